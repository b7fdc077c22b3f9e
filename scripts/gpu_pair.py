"""Pack a trained pair for a GPU machine that reaches nothing else: ``scripts/device_check.sh``'s ``PAIR``.

``python scripts/gpu_pair.py --pair data/pair-large --draft draft-medium
--dataset data/next_token_pairs-large-draft-medium.npz --out gpu-pair-large`` writes to ``--out``:

- ``target/`` and ``<draft>/``: the pair of ``scripts/train_pair.py`` in bfloat16 (half the bytes to
  carry; the benchmarks run it in bfloat16 anyway), and ``tokenizer/`` as it is;
- ``next_token_pairs-128.npz``: the first ``--contexts`` held-out contexts of the pair's dataset in
  float32, for the tree search's acceptance curve (docs/benchmarks/gpu.md: within 0.002 of 256
  contexts in float64 on the small pair).

A run carries at most 64 MiB (the wheels of ``.whl/`` included): the script prints the total and
fails above ``--limit-mib``.
"""
from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import numpy as np


def directory_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pair", type=Path, default=Path("data/pair"), help="trained pair (default %(default)s)")
    parser.add_argument("--draft", default="draft", help="the draft's directory in --pair (default %(default)s)")
    parser.add_argument("--dataset", type=Path, default=Path("data/next_token_pairs.npz"),
                        help="the pair's next-token dataset (default %(default)s)")
    parser.add_argument("--out", type=Path, default=Path("gpu-pair"), help="output directory (default %(default)s)")
    parser.add_argument("--contexts", type=int, default=128, help="contexts kept (default %(default)s)")
    parser.add_argument("--carried", type=Path, default=Path(".whl"),
                        help="what else the run carries, counted in the total (default %(default)s)")
    parser.add_argument("--limit-mib", type=float, default=64.0, help="most MiB a run carries (default %(default)s)")
    args = parser.parse_args(argv)
    import torch
    from transformers import AutoModelForCausalLM

    args.out.mkdir(parents=True, exist_ok=True)
    for name in ("target", args.draft):
        model = AutoModelForCausalLM.from_pretrained(args.pair / name)
        model.to(torch.bfloat16).save_pretrained(args.out / name)
    shutil.copytree(args.pair / "tokenizer", args.out / "tokenizer", dirs_exist_ok=True)
    with np.load(args.dataset, allow_pickle=False) as data:
        kept = {k: data[k][:args.contexts].astype(np.float32) if data[k].ndim == 2 else data[k] for k in data.files}
    np.savez_compressed(args.out / f"next_token_pairs-{args.contexts}.npz", **kept)
    carried = directory_bytes(args.carried) if args.carried.is_dir() else 0
    total = (directory_bytes(args.out) + carried) / 2 ** 20
    print(f"{args.out}: {directory_bytes(args.out) / 2 ** 20:.1f} MiB; with {args.carried}: {total:.1f} MiB "
          f"(limit {args.limit_mib:g})")
    return 0 if total <= args.limit_mib else 1


if __name__ == "__main__":
    sys.exit(main())

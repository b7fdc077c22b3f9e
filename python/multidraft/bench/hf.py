"""Generation benchmark: multi-draft decoding inside ``model.generate`` against its peers.

``python -m multidraft.bench.hf [--pair data/pair] [--new-tokens 64] [--repeats 5]`` loads the
trained pair of ``scripts/train_pair.py`` and compares, on one prompt with the same generation
arguments (sampling at the models' defaults, exactly ``--new-tokens`` tokens):

- ``target.generate`` (plain sampling) and ``transformers``' assisted generation
  (``assistant_model=draft``, single draft);
- ``target.generate(custom_generate=multidraft.hf.decode, ...)`` for several verifiers and n.

Reported per method: tokens per target forward pass (a forward hook counts the passes), median
wall time over ``--repeats`` runs after one warm-up run, and for multidraft the target positions
computed per round (tokens fed to the target) and the acceptance per draft position.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Sequence, Tuple

import numpy as np
import torch

#: (verifier, n) compared by default: single draft, the exact optimum, and K-SEQ.
CONFIGS: Tuple[Tuple[str, int], ...] = (("sps", 1), ("otlp", 2), ("otlp", 4), ("spectr", 4), ("rrs", 4))


def _timed(run: Callable[[int], object], repeats: int, passes: Dict[str, int]):
    """One warm-up run, then ``repeats`` runs: (median seconds, target passes, outputs)."""
    run(repeats)
    passes["n"] = 0
    seconds, outputs = [], []
    for i in range(repeats):
        start = time.perf_counter()
        outputs.append(run(i))
        seconds.append(time.perf_counter() - start)
    return float(np.median(seconds)), passes["n"], outputs


def compare(target, draft, prompt: torch.Tensor, new_tokens: int, repeats: int,
            configs: Sequence[Tuple[str, int]] = CONFIGS, draft_length: int = 4, draft_top_k: int = 16) -> List[dict]:
    """Rows of the comparison (see the module docstring) for one prompt (1, T)."""
    from .. import hf

    passes = {"n": 0}
    hook = target.register_forward_hook(lambda *_: passes.__setitem__("n", passes["n"] + 1))
    common = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=True,
                  attention_mask=torch.ones_like(prompt), pad_token_id=target.generation_config.eos_token_id)
    rows = []
    try:
        for label, extra in (("target.generate", {}), ("transformers assisted", {"assistant_model": draft})):
            seconds, calls, _ = _timed(lambda i: target.generate(prompt, **extra, **common), repeats, passes)
            rows.append(dict(method=label, n=1, tokens_per_pass=repeats * new_tokens / calls, seconds=seconds))
        for name, n in configs:
            seconds, calls, outputs = _timed(lambda i: target.generate(
                prompt, custom_generate=hf.decode, draft_model=draft, num_drafts=n, draft_length=draft_length,
                verifier=name, draft_top_k=draft_top_k, seed=i, return_dict_in_generate=True, **common),
                repeats, passes)
            stats = [o.multidraft for o in outputs]
            rounds = sum(s.row_rounds for s in stats)
            rows.append(dict(method=f"multidraft {name}", n=n, tokens_per_pass=repeats * new_tokens / calls,
                             seconds=seconds, target_positions_per_round=sum(s.target_positions for s in stats) / rounds,
                             acceptance=(sum(s.accepted for s in stats) / np.maximum(sum(s.reached for s in stats), 1))))
    finally:
        hook.remove()
    return rows


def format_rows(rows: List[dict]) -> str:
    lines = ["| method | n | tokens per target pass | wall time (s) | target positions per round | acceptance per position |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        positions = f"{r['target_positions_per_round']:.1f}" if "target_positions_per_round" in r else "-"
        acceptance = " ".join(f"{a:.2f}" for a in r["acceptance"]) if "acceptance" in r else "-"
        lines.append(f"| {r['method']} | {r['n']} | {r['tokens_per_pass']:.2f} | {r['seconds']:.3f} | {positions} "
                     f"| {acceptance} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pair", type=Path, default=Path("data/pair"), help="scripts/train_pair.py output")
    parser.add_argument("--prompt", default="And God said unto Moses,")
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1: shared cores)")
    args = parser.parse_args(argv)
    if not (args.pair / "target").is_dir():
        parser.error(f"no trained pair under {args.pair}: run scripts/train_pair.py first")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(args.threads)
    tokenizer = AutoTokenizer.from_pretrained(args.pair / "tokenizer")
    target = AutoModelForCausalLM.from_pretrained(args.pair / "target").eval()
    draft = AutoModelForCausalLM.from_pretrained(args.pair / "draft").eval()
    prompt = tokenizer(args.prompt, return_tensors="pt").input_ids
    print(f"prompt {args.prompt!r} ({prompt.shape[1]} tokens), {args.new_tokens} new tokens, "
          f"{args.repeats} runs after a warm-up (medians), {args.threads} torch thread(s)")
    print(format_rows(compare(target, draft, prompt, args.new_tokens, args.repeats)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

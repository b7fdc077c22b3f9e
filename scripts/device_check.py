"""Verification on an accelerator: the device path against the host path, as a serving step calls it.

``python scripts/device_check.py [--device cuda] [--vocab 32000,128000] [--batches 1,4,16,64]``
times ONE ``md.verifier(name).verify(p, q, drafts, seeds)`` call on a batch of B rows (one tree
level of B sequences) whose target and draft laws are float32 tensors on ``--device`` (what a model's
softmax gives), drafts drawn by the verifier's own scheme from a draft law cut to its top k tokens
(``k = 32``; ``k = V`` for "sps (full draft)"), two ways:

- device path: the tensors themselves (docs/design/device-path.md; O(k) numbers per row to the host);
- host path: what a caller does without it, ``.double().cpu().numpy()`` of p and q, the NumPy
  verifier, and the tokens back to the device.

Each is the median of ``--repeats`` calls after one warm-up, the device synchronised after each.
Prints a Markdown table (ms per call, host bytes per call of the device path) and writes it as JSON
to ``--out`` if given. Laws are the benchmark's "peaked" pairs (multidraft.bench.distributions).
"""
from __future__ import annotations

import argparse
import json
import time
from typing import List, Optional, Sequence

import numpy as np
import torch

import multidraft as md
from multidraft import _device
from multidraft.bench.distributions import make_pairs

#: (label, verifier, n, draft top-k or None for the full draft law)
CONFIGS = (("sps (full draft)", "sps", 1, None), ("sps", "sps", 1, 32), ("global_resolution", "global_resolution", 4, 32),
           ("otlp", "otlp", 2, 32), ("rrs", "rrs", 4, 32), ("topk", "topk", 4, 32))


def median_ms(call, device: torch.device, repeats: int) -> float:
    call()
    _device.synchronize(device)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        _device.synchronize(device)
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times))


def host_path(v, p, q, drafts, seeds, device):
    """The NumPy verifier on host copies, tokens back on the device."""
    tokens, accepted = v.verify(p.double().cpu().numpy(), q.double().cpu().numpy(), drafts.cpu().numpy(), seeds)
    return torch.as_tensor(tokens, device=device), torch.as_tensor(accepted, device=device)


def measure(device: torch.device, vocabularies: Sequence[int], batches: Sequence[int], repeats: int) -> List[dict]:
    rows = []
    for V in vocabularies:
        for label, name, n, k in CONFIGS:
            v = md.verifier(name)
            for B in batches:
                p_np, q_np = make_pairs("peaked", V, k, B, seed=B)
                rng = np.random.default_rng(B)
                drafts_np = np.stack([v.draft(q_np[b], n, rng) for b in range(B)])
                p = torch.as_tensor(p_np, dtype=torch.float32, device=device)
                q = torch.as_tensor(q_np, dtype=torch.float32, device=device)
                drafts = torch.as_tensor(drafts_np, device=device)
                seeds = np.arange(B, dtype=np.uint64)
                device_ms = median_ms(lambda: v.verify(p, q, drafts, seeds), device, repeats)
                host_bytes = _device.last_host_bytes()
                host_ms = median_ms(lambda: host_path(v, p, q, drafts, seeds, device), device, repeats)
                rows.append({"V": V, "method": label, "n": n, "k": k or V, "B": B, "device_ms": device_ms,
                             "host_ms": host_ms, "device_path_host_bytes": host_bytes,
                             "host_path_host_bytes": 2 * B * V * 4})
                print(f"| {V} | {label} | {n} | {k or V} | {B} | {device_ms:.3f} | {host_ms:.3f} | "
                      f"{host_ms / device_ms:.2f}x | {host_bytes} | {2 * B * V * 4} |", flush=True)
    return rows


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--vocab", default="32000,128000")
    parser.add_argument("--batches", default="1,4,16,64")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", default=None)
    parser.add_argument("--cpu-device-path", action="store_true",
                        help="CPU tensors take the accelerator's path (to check this script without one)")
    args = parser.parse_args(argv)
    _device.CPU_ON_HOST = not args.cpu_device_path
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"device {device} ({name}), torch {torch.__version__}, {md.get_num_threads()} core thread(s)\n")
    print("| V | verifier | n | draft top-k | B | device path (ms) | host path (ms) | host / device | "
          "bytes to host, device path | bytes to host, host path |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = measure(device, [int(v) for v in args.vocab.split(",")], [int(b) for b in args.batches.split(",")],
                   args.repeats)
    if args.out:
        with open(args.out, "w") as handle:
            json.dump({"device": name, "torch": torch.__version__, "rows": rows}, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

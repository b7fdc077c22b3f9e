"""Per-batch verification cost, as a serving engine would pay it (docs/serving.md).

``python -m multidraft.bench.verify_batch [--vocab 32000] [--batches 1,2,4,...] [--repeats 9]``
times ONE call ``md.verifier(name).verify(p, q, drafts)`` on a batch of B rows (one row per
sequence of the batch at one draft position: what a serving step verifies per tree level) of the
benchmark's ``"peaked"`` pairs at vocabulary V, drafts drawn by the verifier's own scheme, with
the draft law full or cut to its top 16 tokens (``draft_top_k``, see :data:`CONFIGS`). Prints a Markdown table of
median milliseconds per call over ``--repeats`` calls (after one warm-up call) and per row.
"""
from __future__ import annotations

import argparse
import time
from typing import List, Optional, Sequence, Tuple

import numpy as np

import multidraft as md
from .distributions import make_pairs

#: (verifier, n, draft_top_k) measured: single draft (full and cut draft law), the exact optimum, [GR], SpecTr's
#: K-SEQ and recursive rejection. The exact OTLP needs a cut draft law at this V (its network grows
#: with the draft support).
CONFIGS: Tuple[Tuple[str, int, Optional[int]], ...] = (
    ("sps", 1, None), ("sps", 1, 16), ("otlp", 2, 16), ("otlp", 4, 16), ("global_resolution", 4, 16), ("spectr", 4, 16),
    ("rrs", 4, 16))


def time_verify(name: str, n: int, B: int, V: int, k: Optional[int], repeats: int, seed: int = 0) -> float:
    """Median seconds of one ``verify`` call on a (B, V) batch."""
    v = md.verifier(name)
    p, q = make_pairs("peaked", V, k=k, count=B, seed=seed)
    rng = np.random.default_rng(seed)
    drafts = np.stack([v.draft(q[b], n, rng) for b in range(B)])
    v.verify(p, q, drafts, rng)  # warm-up
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        v.verify(p, q, drafts, rng)
        seconds.append(time.perf_counter() - start)
    return float(np.median(seconds))


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--batches", default="1,4,16,64", help="comma-separated batch sizes B")
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args(argv)
    batches = [int(b) for b in args.batches.split(",")]
    print(f"V = {args.vocab}, {md.get_num_threads()} core thread(s), median ms per call (per row)\n")
    print("| verifier | n | draft_top_k | " + " | ".join(f"B = {b}" for b in batches) + " |")
    print("|---|---|---|" + "---|" * len(batches))
    for name, n, k in CONFIGS:
        cells: List[str] = []
        for B in batches:
            ms = 1e3 * time_verify(name, n, B, args.vocab, k, args.repeats)
            cells.append(f"{ms:.2f} ({ms / B:.2f})")
        print(f"| {name} | {n} | {k or '-'} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Interleaved A/B of ``python -m multidraft.bench`` between two builds of the package.

Runs the benchmark alternately on two installed copies of ``multidraft`` (each a folder holding
the ``multidraft`` package, put first on ``PYTHONPATH``), ``--rounds`` times each, the order
swapped every round so that a drift of the machine falls on both sides alike. Every timed cell of
the benchmark (the solver table, the table of every verifier, the batched-threads table) is
compared by the median over rounds of its per-round median: the ratio after / before, and the
worst cell. Used to show that a change is not slower, e.g. docs/benchmarks/restructure-ab.md:

    python scripts/ab_bench.py --before /tmp/old --after /tmp/new --rounds 5 \
        -- --grid 10:2,100:3 --methods alpha_star,gr3,gr4,maxflow_cs --full-vocab 32000

Everything after ``--`` goes to ``python -m multidraft.bench`` (``--out`` and ``--no-progress``
are set here).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Tuple

Key = Tuple[str, ...]


def timed_cells(results: dict) -> Dict[Key, float]:
    """Every timed quantity of one benchmark run, in ms, by a key naming its table and cell."""
    cells: Dict[Key, float] = {}
    for cell in results["cells"]:
        where = (cell["regime"], f"V={cell['V']}", f"k={cell['k']}", f"n={cell['n']}")
        for method, entry in cell["methods"].items():
            if entry.get("status") == "ok" and entry.get("times_ms"):
                cells[("solver",) + where + (method,)] = statistics.median(entry["times_ms"])
    for row in results["meta"].get("baselines") or []:
        where = (row["regime"], f"k={row['k']}", f"n={row['n']}")
        for method, ms in row["verify_ms"].items():
            if ms is not None:
                cells[("verifier",) + where + (method,)] = ms
    for row in results["meta"].get("threads") or []:
        where = (row["regime"], f"k={row['k']}", f"n={row['n']}", f"B={row['B']}", row["verifier"])
        cells[("threads",) + where + ("1 thread",)] = row["one_thread_ms"]
        cells[("threads",) + where + (f"{row['threads']} threads",)] = row["all_threads_ms"]
    return cells


def run_once(package_root: str, bench_args: List[str], out: Path) -> Dict[Key, float]:
    """One benchmark run with ``package_root`` first on the path."""
    env = dict(os.environ, PYTHONPATH=package_root)
    command = [sys.executable, "-m", "multidraft.bench", *bench_args, "--no-progress", "--out", str(out)]
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
    return timed_cells(json.loads((out / "results.json").read_text()))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="folder holding the baseline multidraft package")
    parser.add_argument("--after", required=True, help="folder holding the changed multidraft package")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each side (default 3)")
    parser.add_argument("--json", help="also write every round's cells here")
    parser.add_argument("bench_args", nargs=argparse.REMAINDER, help="-- then the benchmark's arguments")
    args = parser.parse_args(argv)
    bench_args = [a for a in args.bench_args if a != "--"]
    sides = {"before": args.before, "after": args.after}
    rounds: Dict[str, List[Dict[Key, float]]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            order = ("before", "after") if r % 2 == 0 else ("after", "before")
            for side in order:
                rounds[side].append(run_once(sides[side], bench_args, Path(tmp) / f"{side}{r}"))
                print(f"round {r + 1}/{args.rounds}: {side} done", file=sys.stderr)
    common = sorted(set.intersection(*(set(c) for side in rounds.values() for c in side)))
    print(f"bench arguments: {' '.join(bench_args)}; rounds per side: {args.rounds}, interleaved\n")
    print("| table | cell | before (ms) | after (ms) | after / before |")
    print("|---|---|---|---|---|")
    ratios = []
    for key in common:
        before = statistics.median(c[key] for c in rounds["before"])
        after = statistics.median(c[key] for c in rounds["after"])
        ratios.append((after / before, key))
        print(f"| {key[0]} | {' '.join(key[1:])} | {before:.4g} | {after:.4g} | {after / before:.3f} |")
    worst = max(ratios)
    geo = statistics.geometric_mean(r for r, _ in ratios)
    print(f"\ncells: {len(ratios)}; geometric mean after / before: {geo:.3f}; "
          f"slowest cell: {' '.join(worst[1])} at {worst[0]:.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps({side: [{" | ".join(k): v for k, v in c.items()} for c in runs]
                                               for side, runs in rounds.items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

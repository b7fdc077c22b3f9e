"""Command line of ``python -m multidraft.bench`` (see ``--help``). Times are ms per token."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from .distributions import DEFAULT_SEED, DEFAULT_VOCAB, REGIMES, register_regime
from .baselines import (baselines_record, baselines_table, fresh_table, run_baselines, run_thread_scaling,
                        thread_table)
from .methods import METHODS
from .report import all_agree, machine_info, markdown_report, regime_params, write_results
from .runner import run_grid

TABLE1_GRID: List[Tuple[int, int]] = [(10, 2), (10, 3), (10, 4), (10, 5), (100, 2), (100, 3), (1000, 2)]
"""The (k, n) grid of [GR] Table 1."""

MODES: Dict[str, Dict[str, object]] = {
    # --quick: the README's main command, sized to finish in about a minute on 2 cores
    # (docs/benchmarks/python-internals.md).
    "quick": {"grid": [(10, 2), (10, 3), (100, 2)], "tokens": 5, "vocab": 4000, "budget": 2.0, "max_call": 30.0,
              "full_vocab": []},
    "full": {"grid": TABLE1_GRID, "tokens": 20, "vocab": DEFAULT_VOCAB, "budget": 5.0, "max_call": 60.0,
             "full_vocab": [32000, 128000]},
}

FULL_VOCAB_N = (2, 3, 4)
"""Numbers of drafts of the full-vocabulary rows (k = V, no draft top-k)."""

FULL_VOCAB_METHODS = ("alpha_star", "gr3", "gr4", "maxflow_cs")
"""Methods of the full-vocabulary rows (the other exact methods need even larger networks)."""
"""Defaults of each mode; explicit options override them."""


def parse_grid(text: str) -> List[Tuple[int, int]]:
    """Parse ``"10:2,10:3,100:2"`` into ``[(10, 2), (10, 3), (100, 2)]`` (k = draft top-k, n = drafts)."""
    cells = []
    for item in filter(None, (s.strip() for s in text.split(","))):
        try:
            k, n = (int(x) for x in item.split(":"))
        except ValueError:
            raise argparse.ArgumentTypeError(f"grid: expected k:n pairs like 10:2, got {item!r}") from None
        if k < 1 or n < 1:
            raise argparse.ArgumentTypeError(f"grid: k and n must be >= 1, got {item!r}")
        cells.append((k, n))
    if not cells:
        raise argparse.ArgumentTypeError("grid: empty")
    return cells


def _name_list(known: Sequence[str], what: str):
    """An argparse type for a comma-separated subset of ``known``."""

    def parse(text: str) -> List[str]:
        names = [s.strip() for s in text.split(",") if s.strip()]
        unknown = [s for s in names if s not in known]
        if unknown or not names:
            raise argparse.ArgumentTypeError(f"{what}: unknown {unknown or text!r}; known: {', '.join(known)}")
        return names

    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m multidraft.bench",
        description="Per-token solve time (ms per token) of exact multi-draft verifiers on generated "
        "(target p, draft q) pairs, next to SciPy's HiGHS LP. Prints a Markdown table; writes "
        "results.json (raw timings, parameters) and results.csv (the table).",
    )
    parser.add_argument("--quick", action="store_true",
                        help="small run for the README (under a minute on 2 cores): "
                        f"grid {MODES['quick']['grid']}, V={MODES['quick']['vocab']}")
    parser.add_argument("--grid", type=parse_grid, help="k:n cells, e.g. 10:2,10:3,100:2 "
                        "(default: [GR] Table 1 grid, or the quick grid)")
    parser.add_argument("--regimes", type=_name_list(list(REGIMES), "regimes"), default=list(REGIMES),
                        help=f"comma-separated generator regimes (default: {','.join(REGIMES)})")
    parser.add_argument("--tokens", type=int, help="instances per cell (default 20, quick 5)")
    parser.add_argument("--vocab", type=int, help=f"vocabulary size V (default {DEFAULT_VOCAB}, quick 4000)")
    parser.add_argument("--methods", type=_name_list(list(METHODS), "methods"), default=list(METHODS),
                        help=f"comma-separated methods (default: {','.join(METHODS)})")
    parser.add_argument("--budget", type=float,
                        help="seconds per instance after which a method's remaining instances in a cell "
                        "are skipped (default 5, quick 2)")
    parser.add_argument("--max-call", type=float,
                        help="hard limit in seconds on one call: a call still running is stopped and "
                        "counts as this long, a lower bound (default 60, quick 30)")
    parser.add_argument("--full-vocab", type=lambda t: [int(v) for v in t.split(",") if v.strip()],
                        help="vocabulary sizes of extra rows without draft top-k (k = V), n = 2, 3, 4, for "
                        "alpha*, Global Resolution and the CS max-flow (default 32000,128000; quick: none; "
                        "'' for none)")
    parser.add_argument("--no-baselines", action="store_true",
                        help="skip the table of every verifier's acceptance and verify time")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"base seed (default {DEFAULT_SEED})")
    parser.add_argument("--out", type=Path, default=Path("bench-results"),
                        help="output directory for results.json and results.csv (default bench-results/)")
    parser.add_argument("--dataset", type=Path,
                        help="benchmark on the real next-token pairs of this .npz file (scripts/train_pair.py "
                        "writes data/next_token_pairs.npz) instead of the generated regimes; V is the file's")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.add_argument("--rdk", action="store_true", help="run the RDK benchmark ([OOV]: acceptance against "
                        "pruning, build and proposal times) instead; options: --rdk --help")
    parser.add_argument("--generation", action="store_true", help="run the generation benchmark (the trained pair "
                        "of scripts/train_pair.py in model.generate) instead; options: --generation --help")
    parser.add_argument("--launches", action="store_true", help="count the kernel-launching ops and host reads of "
                        "the generation loop and of one verify call (multidraft.bench.launches) instead; options: "
                        "--launches --help")
    return parser


#: Flags that run another benchmark module's ``main``: [OOV]'s (bench/oov.py), generation
#: (bench/generation.py), launch counts (bench/launches.py).
SUBCOMMANDS = {"--rdk": "oov", "--generation": "generation", "--launches": "launches"}


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the benchmark; return the exit status (1 if any method errored or disagreed with alpha*)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    for flag, module in SUBCOMMANDS.items():  # benchmarks with their own options
        if flag in argv:
            return importlib.import_module(f".{module}", __package__).main([a for a in argv if a != flag])
    parser = build_parser()
    args = parser.parse_args(argv)
    mode, grid, tokens, V, budget, max_call, full_vocab = _settings(parser, args)
    methods = [m for m in METHODS.values() if m.name in args.methods]  # table order

    start = time.perf_counter()
    cells = run_grid(args.regimes, grid, V, tokens, args.seed, methods, budget, max_call,
                     progress=not args.no_progress)
    full_methods = [m for m in methods if m.name in FULL_VOCAB_METHODS]
    for full_V in full_vocab:
        cells += run_grid(args.regimes, [(full_V, n) for n in FULL_VOCAB_N], full_V, tokens, args.seed,
                          full_methods, budget, max_call, progress=not args.no_progress)
    baselines = [] if args.no_baselines else run_baselines(args.regimes, grid, V, tokens, args.seed)
    threads = [] if args.no_baselines else run_thread_scaling(args.regimes, V, args.seed, k=min(100, V))
    meta = {
        "benchmark": "multidraft.bench",
        "units": "ms per token",
        "mode": mode,
        "seed": args.seed,
        "V": V,
        "tokens": tokens,
        "budget_s": budget,
        "max_call_s": max_call,
        "grid": [list(c) for c in sorted(set(grid))],
        "full_vocab": list(full_vocab),
        "methods": {m.name: m.label for m in methods},
        "regimes": regime_params(args.regimes),
        "machine": machine_info(),
        "argv": list(sys.argv[1:] if argv is None else argv),
        "wall_s": time.perf_counter() - start,
    }
    meta["baselines"] = baselines_record(baselines)
    meta["threads"] = [dataclasses.asdict(r) for r in threads]
    paths = write_results(args.out, meta, cells)
    print(markdown_report(meta, cells, methods))
    if baselines:
        _print_baselines(baselines, threads)
    print(f"\nWrote {paths['json']} and {paths['csv']}.", file=sys.stderr)
    return 0 if all_agree(cells) else 1


def _settings(parser, args):
    """(mode, grid, tokens, V, budget, max_call, full_vocab) from the command line and the mode's
    defaults; a data set (``--dataset``) is registered as the only regime."""
    mode = "quick" if args.quick else "full"
    grid, tokens, V, budget, max_call, full_vocab = (
        MODES[mode][key] if getattr(args, key) is None else getattr(args, key)
        for key in ("grid", "tokens", "vocab", "budget", "max_call", "full_vocab")
    )
    if args.dataset is not None:
        from .dataset import DatasetRegime
        try:
            regime = DatasetRegime.from_file(args.dataset)
        except ValueError as error:
            parser.error(f"--dataset: {error}")
        if args.vocab is not None and args.vocab != regime.data.V:
            parser.error(f"--vocab {args.vocab} differs from the data set's V = {regime.data.V}")
        register_regime(regime)
        args.regimes, V = [regime.name], regime.data.V
        if args.full_vocab is None:  # full mode: the data set's own vocabulary without draft top-k
            full_vocab = [] if mode == "quick" else [V]
        elif set(args.full_vocab) - {V}:
            parser.error(f"--full-vocab: the data set has V = {V} only, got {args.full_vocab}")
    if tokens < 1 or V < 2 or not 0 < budget <= max_call:
        parser.error(f"need --tokens >= 1, --vocab >= 2, 0 < --budget <= --max-call; "
                     f"got {tokens}, {V}, {budget}, {max_call}")
    if max(k for k, _ in grid) > V:
        parser.error(f"grid: every k must be <= V = {V}")
    return mode, grid, tokens, V, budget, max_call, full_vocab


def _print_baselines(baselines, threads) -> None:
    """The every-verifier and thread-scaling tables, with their captions."""
    print("\n## Every verifier: exact acceptance and verify time\n")
    print("Mean exact acceptance over the cell's instances (in parentheses: mean gap to alpha* on the "
          "same instances) / median ms of one verified token (plan building included) = its multiple of the "
          "floor, the median time of one NumPy pass np.minimum(p, q).sum() over the same arrays in this run; "
          "[r of N]: a slow method stopped after r instances. alpha* is the optimum for i.i.d. drafts; "
          "without-replacement and hub drafts have other draft laws and may exceed it. sps verifies the first "
          "draft alone. otlp: exact optimum (CS max-flow); global_resolution: tau = 1e-3, exactly lossless, "
          "with the exact fallback (its acceptance: P(output is one of the drafts), residual draws included).\n")
    print(baselines_table(baselines))
    print("\n## Fresh arrays, one call\n")
    print("Each verifier's verify time as a multiple of the floor, as a generation loop calls it (fresh copies of "
          "p and q at every instance, the floor timed once on them, then one verify call; median over the "
          "instances) / on repeated calls over the same arrays (the table above).\n")
    print(fresh_table(baselines))
    print("\n## Batched verification on threads\n")
    print("Median ms of one v.verify call on a batch of B distinct rows, with md.set_num_threads(1) and "
          "with all usable cores (md.get_num_threads()).\n")
    print(thread_table(threads))

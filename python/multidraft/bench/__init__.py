"""Benchmark harness of multidraft: ``python -m multidraft.bench [--quick]``.

Times exact multi-draft verifiers (ms per token) on generated (target p, draft q) pairs.
Modules: :mod:`~multidraft.bench.distributions` (the pair generator, importable without the
compiled core), :mod:`~multidraft.bench.runner` (timing loop), :mod:`~multidraft.bench.report`
(table, JSON, CSV), :mod:`~multidraft.bench.cli` (command line, :func:`main`).
"""

from .distributions import REGIMES, Regime, make_pairs


def main(argv=None) -> int:
    """Run the benchmark with command-line arguments ``argv``; return the exit status."""
    from .cli import main as _main

    return _main(argv)


__all__ = ["REGIMES", "Regime", "make_pairs", "main"]

"""The number of C++ threads a batched call spreads its rows over.

Batched calls (``p`` of shape (B, V): ``transport``, ``verify``, ``acceptance``, subset selection,
draft sampling, ``plan.transport`` of many tuples, the RDK projections and samplers) run their
rows on a persistent C++ thread pool with the GIL released, the calling thread included. Each
row is computed from its own inputs and seed, so results are identical whatever the count.
"""
from __future__ import annotations

import os

from . import _core
from . import _validation as check

#: Largest accepted thread count.
MAX_THREADS = int(_core.MAX_THREADS)


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def set_num_threads(k: int) -> None:
    """Spread the rows of every batched call over ``k`` threads (1 <= k <= ``MAX_THREADS``).

    ``k = 1`` runs batches on the calling thread only. Default: :func:`usable_cores`.
    """
    k = check.count(k, "k")
    if k > MAX_THREADS:
        raise ValueError(f"'k' must be <= {MAX_THREADS}, got {k}")
    _core.set_num_threads(k)


def get_num_threads() -> int:
    """The number of threads batched calls use (see :func:`set_num_threads`)."""
    return int(_core.get_num_threads())


_core.set_num_threads(min(usable_cores(), MAX_THREADS))

"""Timed ``generate`` runs, shared by the generation benchmark (:mod:`~multidraft.bench.generation`)
and its token-tree table (:mod:`~multidraft.bench.trees`)."""
from __future__ import annotations

from typing import Callable, Dict

import numpy as np

from .._device import synchronize
from .methods import time_ms


def timed_runs(run: Callable[[int], object], repeats: int, passes: Dict[str, int]):
    """One warm-up run, then ``repeats`` runs: (median seconds, target passes, outputs)."""
    def synchronised(i):  # a run on a device ends when its kernels have
        out = run(i)
        synchronize()
        return out

    synchronised(repeats)
    passes["n"] = 0
    timed = [time_ms(synchronised, i) for i in range(repeats)]
    return float(np.median([ms for ms, _ in timed])) / 1e3, passes["n"], [out for _, out in timed]

"""The timed methods of the benchmark and how one call is timed (ms per token).

One *token* is one (p, q) instance. For an OTLP method the timed call is
``md.solve_otlp(p, q, n, ...)`` plus one ``plan.sample(drafts, seed)`` for ``n`` drafts drawn
i.i.d. from ``q`` beforehand (untimed): the per-token cost of an exact verifier inside a decoding
loop (``"maxflow_cs"`` solves its outer or inner network lazily, at the sample). For
``alpha_star`` the timed call is ``md.optimal_acceptance`` alone.
"""

from __future__ import annotations

import dataclasses
import gc
import time
from typing import Callable, Dict, Iterable, Tuple

import numpy as np

import multidraft as md

from .distributions import make_pairs

Solver = Callable[[np.ndarray, np.ndarray, int, np.ndarray, int], float]


@dataclasses.dataclass(frozen=True)
class Method:
    """A timed method.

    Attributes:
        name: key on the command line and in result files.
        label: column title (seed 000 Table 1 names where they exist).
        run: ``run(p, q, n, drafts, seed) -> alpha``; everything it does is timed.
        exact_plan: True for exact OTLP solvers: their alpha is checked against alpha* and the
            fastest of them is the reference of the ratio column.
    """

    name: str
    label: str
    run: Solver
    exact_plan: bool


def _alpha_star(p: np.ndarray, q: np.ndarray, n: int, drafts: np.ndarray, seed: int) -> float:
    """Subset selection only (seed 000 Eq. 4): no plan, no sample."""
    return float(md.optimal_acceptance(p, q, n))


def _otlp(**options) -> Solver:
    """A solver that builds an exact OTLP plan with ``options`` and samples one verified token."""

    def run(p: np.ndarray, q: np.ndarray, n: int, drafts: np.ndarray, seed: int) -> float:
        plan = md.solve_otlp(p, q, n, **options)
        token = plan.sample(drafts, seed)
        if not 0 <= int(token) < p.shape[-1]:
            raise RuntimeError(f"plan.sample returned token {token!r} outside [0, {p.shape[-1]})")
        return float(plan.alpha)

    return run


METHODS: Dict[str, Method] = {
    m.name: m
    for m in (
        Method("alpha_star", "alpha* (subset)", _alpha_star, exact_plan=False),
        Method("maxflow", "Max-Flow (sets)", _otlp(method="maxflow"), exact_plan=True),
        Method("maxflow_tuples", "Max-Flow (tuples)", _otlp(method="maxflow", network="tuples"), exact_plan=True),
        Method("maxflow_cs", "Opt. Max-Flow (CS)", _otlp(method="maxflow_cs"), exact_plan=True),
        Method("lp", "General LP (HiGHS)", _otlp(method="lp"), exact_plan=True),
    )
}
"""All methods, in table order. ``maxflow_tuples`` is seed 000's plain V^n network ("Max-Flow"),
``maxflow_cs`` its complementary-slackness "Opt. Max-Flow", ``lp`` its "General LP"."""


def time_ms(fn: Callable, *args) -> Tuple[float, object]:
    """Call ``fn(*args)`` with the garbage collector paused; return (elapsed ms, result)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter()
        out = fn(*args)
        elapsed = time.perf_counter() - start
    finally:
        if was_enabled:
            gc.enable()
    return 1e3 * elapsed, out


def warm_up(methods: Iterable[Method]) -> None:
    """Run every method once on a tiny instance (imports, lazy initialisation); errors ignored."""
    p, q = make_pairs("peaked", 64, 4, 1, 0)
    drafts = np.flatnonzero(q[0])[:2]
    for m in methods:
        try:
            m.run(p[0], q[0], 2, drafts, 0)
        except Exception:
            pass

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
from typing import Callable, Dict, Iterable, Optional, Tuple

import numpy as np

import multidraft as md

from .distributions import make_pairs

Solver = Callable[[np.ndarray, np.ndarray, int, np.ndarray, int], "Outcome"]


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What one timed call reports: the plan's acceptance and, for Global Resolution, whether
    its Lemma 6.6 bound was met and the L1 bound it achieved (exact methods: True, 0)."""

    alpha: float
    success: bool = True
    l1_bound: float = 0.0


@dataclasses.dataclass(frozen=True)
class Method:
    """A timed method.

    Attributes:
        name: key on the command line and in result files.
        label: column title ([GR] Table 1 names where they exist).
        run: ``run(p, q, n, drafts, seed) -> Outcome``; everything it does is timed.
        exact_plan: True for exact OTLP solvers: their alpha is checked against alpha* and the
            fastest of them is the reference of the ratio column.
        tau: Global Resolution's tolerance (None for exact methods): its alpha must be within
            10 tau of alpha* whenever it reports success.
    """

    name: str
    label: str
    run: Solver
    exact_plan: bool
    tau: Optional[float] = None


def _alpha_star(p: np.ndarray, q: np.ndarray, n: int, drafts: np.ndarray, seed: int) -> Outcome:
    """Subset selection only ([GR] Eq. 4): no plan, no sample."""
    return Outcome(float(md.optimal_acceptance(p, q, n)))


def _checked_sample(plan, p: np.ndarray, drafts: np.ndarray, seed: int) -> None:
    token = plan.sample(drafts, seed)
    if not 0 <= int(token) < p.shape[-1]:
        raise RuntimeError(f"plan.sample returned token {token!r} outside [0, {p.shape[-1]})")


def _otlp(**options) -> Solver:
    """A solver that builds an exact OTLP plan with ``options`` and samples one verified token."""

    def run(p: np.ndarray, q: np.ndarray, n: int, drafts: np.ndarray, seed: int) -> Outcome:
        plan = md.solve_otlp(p, q, n, **options)
        _checked_sample(plan, p, drafts, seed)
        return Outcome(float(plan.alpha))

    return run


def _global_resolution(tau: float) -> Solver:
    """Algorithm 1 of [GR] (no fallback: its own success and bound are what is measured)."""

    def run(p: np.ndarray, q: np.ndarray, n: int, drafts: np.ndarray, seed: int) -> Outcome:
        plan = md.GlobalResolution(p, q, n, tau=tau)
        _checked_sample(plan, p, drafts, seed)
        return Outcome(float(plan.alpha), bool(plan.success), float(plan.l1_bound))

    return run


METHODS: Dict[str, Method] = {
    m.name: m
    for m in (
        Method("alpha_star", "alpha* (subset)", _alpha_star, exact_plan=False),
        Method("gr3", "G.R. (tau=1e-3)", _global_resolution(1e-3), exact_plan=False, tau=1e-3),
        Method("gr4", "G.R. (tau=1e-4)", _global_resolution(1e-4), exact_plan=False, tau=1e-4),
        Method("maxflow", "Max-Flow (sets)", _otlp(method="maxflow"), exact_plan=True),
        Method("maxflow_tuples", "Max-Flow (tuples)", _otlp(method="maxflow", network="tuples"), exact_plan=True),
        Method("maxflow_cs", "Opt. Max-Flow (CS)", _otlp(method="maxflow_cs"), exact_plan=True),
        Method("lp", "General LP (HiGHS)", _otlp(method="lp"), exact_plan=True),
    )
}
"""All methods, in table order. ``gr3``/``gr4`` are Global Resolution ([GR] Algorithm 1) at
tau = 1e-3 / 1e-4; ``maxflow_tuples`` is [GR]'s plain V^n network ("Max-Flow"),
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

"""Timing loop of the benchmark: methods, cells, budgets. All times are in ms per token.

One *token* is one (p, q) instance from :mod:`multidraft.bench.distributions`. For an OTLP
method, its time is ``md.solve_otlp(p, q, n, ...)`` plus one ``plan.sample(drafts, rng)`` for
``n`` drafts drawn i.i.d. from ``q`` (drawn outside the timed region): the per-token cost of an
exact verifier inside a decoding loop. For ``alpha_star`` it is ``md.optimal_acceptance``.
"""

from __future__ import annotations

import dataclasses
import gc
import sys
import time
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

import numpy as np

import multidraft as md

from .distributions import derive_seed, get_regime, make_pairs, summarize_pairs

ALPHA_TOL = 1e-7
"""Every exact method's acceptance must match alpha* (subset selection) within this."""

REFUSAL_WORDS = ("too large", "MAX_NETWORK_ARCS", "MAX_LP_VARIABLES", "MAX_ENUMERATED_TUPLES")
"""A ValueError mentioning one of these is the package refusing a too large problem."""

Solver = Callable[[np.ndarray, np.ndarray, int, np.ndarray, np.random.Generator], float]


@dataclasses.dataclass(frozen=True)
class Method:
    """A timed method.

    Attributes:
        name: key on the command line and in result files.
        label: column title (seed 000 Table 1 names where they exist).
        run: ``run(p, q, n, drafts, rng) -> alpha``; everything it does is timed.
        exact_plan: True for exact OTLP solvers: their alpha is checked against alpha* and the
            fastest of them is the reference of the ratio column.
    """

    name: str
    label: str
    run: Solver
    exact_plan: bool


def _alpha_star(p: np.ndarray, q: np.ndarray, n: int, drafts, rng) -> float:
    """Subset selection only (seed 000 Eq. 4): no plan, no sample."""
    return float(md.optimal_acceptance(p, q, n))


def _otlp(**options) -> Solver:
    """A solver that builds an exact OTLP plan with ``options`` and samples one verified token."""

    def run(p: np.ndarray, q: np.ndarray, n: int, drafts: np.ndarray, rng) -> float:
        plan = md.solve_otlp(p, q, n, **options)
        token = plan.sample(drafts, rng)
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

# Method statuses within a cell.
OK = "ok"              # every instance ran
BUDGET = "budget"      # one instance exceeded the budget; the rest were skipped (median is a lower bound)
REFUSED = "refused"    # the package refused the problem as too large (ValueError)
SKIPPED = "skipped"    # not run: exceeded the budget in a smaller cell (k' <= k, n' <= n)
ERROR = "error"        # any other exception (a bug: reported, and the exit status is 1)


@dataclasses.dataclass
class MethodResult:
    """Raw measurements of one method in one cell (times in ms per token)."""

    name: str
    status: str = OK
    times_ms: List[float] = dataclasses.field(default_factory=list)
    alpha_dev: List[float] = dataclasses.field(default_factory=list)
    message: str = ""

    @property
    def active(self) -> bool:
        """Whether the method still runs on the next instance."""
        return self.status == OK

    @property
    def median_ms(self) -> Optional[float]:
        """Median ms per token over the instances run (None if none ran)."""
        return float(np.median(self.times_ms)) if self.times_ms else None

    @property
    def lower_bound(self) -> bool:
        """True when the median is only a lower bound (the budget cut the run short)."""
        return self.status == BUDGET

    @property
    def max_alpha_dev(self) -> Optional[float]:
        """Largest |alpha - alpha*| over the instances run (None if none ran)."""
        return max(self.alpha_dev) if self.alpha_dev else None


@dataclasses.dataclass
class Cell:
    """All measurements of one (regime, k, n) cell."""

    regime: str
    V: int
    k: int
    n: int
    alpha_star: List[float]
    h_star_size: List[int]
    pairs: Dict[str, float]
    methods: Dict[str, MethodResult]

    def reference(self) -> Optional[str]:
        """The fastest exact OTLP method (complete runs preferred), the ratio's denominator."""
        timed = [r for r in self.methods.values() if METHODS[r.name].exact_plan and r.times_ms]
        complete = [r for r in timed if r.status == OK] or timed
        return min(complete, key=lambda r: r.median_ms).name if complete else None

    def ratio(self, name: str) -> Optional[float]:
        """Median of ``name`` divided by the median of :meth:`reference` (None if undefined)."""
        ref, own = self.reference(), self.methods[name].median_ms
        if ref is None or own is None:
            return None
        return own / self.methods[ref].median_ms

    def max_alpha_dev(self) -> Optional[float]:
        """Largest |alpha - alpha*| over every exact OTLP method and instance of the cell."""
        devs = [r.max_alpha_dev for r in self.methods.values()
                if METHODS[r.name].exact_plan and r.max_alpha_dev is not None]
        return max(devs) if devs else None


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


def _measure(method: Method, result: MethodResult, args: tuple, alpha_ref: float, budget_ms: float) -> None:
    """Time one instance of ``method`` and update ``result`` (status, times, deviations)."""
    try:
        elapsed, alpha = time_ms(method.run, *args)
    except ValueError as exc:
        refused = any(word in str(exc) for word in REFUSAL_WORDS)
        result.status, result.message = (REFUSED if refused else ERROR), str(exc)
        return
    except Exception as exc:  # a bug in the package: report it, keep benchmarking the others
        result.status, result.message = ERROR, f"{type(exc).__name__}: {exc}"
        return
    result.times_ms.append(elapsed)
    result.alpha_dev.append(abs(alpha - alpha_ref))
    if elapsed > budget_ms:
        result.status = BUDGET


def run_cell(
    regime: str,
    V: int,
    k: int,
    n: int,
    count: int,
    seed: int,
    methods: Sequence[Method],
    budget_s: float,
    skip: Iterable[str] = (),
    on_instance: Callable[[], None] = lambda: None,
) -> Cell:
    """Benchmark ``methods`` on ``count`` instances of one (regime, k, n) cell.

    The instances depend on (seed, regime, k) only, so cells with the same k and different n
    share their (p, q) pairs. Methods named in ``skip`` are recorded as skipped. A method that
    exceeds ``budget_s`` seconds on an instance is not run on the remaining instances.
    ``on_instance`` is called after each instance (progress bar).
    """
    p_all, q_all = make_pairs(regime, V, k, count, derive_seed(seed, regime, k))
    rng = np.random.default_rng(derive_seed(seed, regime, k, n))
    skip = set(skip)
    results = {m.name: MethodResult(m.name, SKIPPED if m.name in skip else OK) for m in methods}
    alpha_star, h_size = [], []
    for p, q in zip(p_all, q_all):
        alpha, H = md.optimal_subset(p, q, n)
        alpha_star.append(float(alpha))
        h_size.append(int(np.count_nonzero(H)))
        support = np.flatnonzero(q)
        drafts = rng.choice(support, size=n, p=q[support]).astype(np.int64)
        for m in methods:
            if results[m.name].active:
                _measure(m, results[m.name], (p, q, n, drafts, rng), alpha, 1e3 * budget_s)
        on_instance()
    return Cell(regime, V, k, n, alpha_star, h_size, summarize_pairs(p_all, q_all), results)


def dominated(cell: Tuple[int, int], over_budget: Iterable[Tuple[int, int]]) -> bool:
    """True if some (k0, n0) in ``over_budget`` has k0 <= k and n0 <= n (a smaller problem)."""
    k, n = cell
    return any(k0 <= k and n0 <= n for k0, n0 in over_budget)


def warm_up(methods: Sequence[Method], regime: str) -> None:
    """Run every method once on a tiny instance (imports, lazy initialisation); errors ignored."""
    p, q = make_pairs(regime, 64, 4, 1, 0)
    for m in methods:
        try:
            m.run(p[0], q[0], 2, np.flatnonzero(q[0])[:2], np.random.default_rng(0))
        except Exception:
            pass


def run_grid(
    regimes: Sequence[str],
    grid: Sequence[Tuple[int, int]],
    V: int,
    count: int,
    seed: int,
    methods: Sequence[Method],
    budget_s: float,
    progress: bool = True,
) -> List[Cell]:
    """Benchmark every (regime, k, n) cell, cells in increasing (k, n) order per regime.

    A method that exceeded the budget in a cell is skipped in every larger cell of the same
    regime (larger or equal k and n), like seed 000's lower bounds, to keep the run bounded.
    """
    for r in regimes:
        get_regime(r)  # validate names before any work
    grid = sorted(set(grid))
    bar = _progress_bar(len(regimes) * len(grid) * count, progress)
    cells = []
    try:
        warm_up(methods, regimes[0])
        for regime in regimes:
            over_budget: Dict[str, Set[Tuple[int, int]]] = {m.name: set() for m in methods}
            for k, n in grid:
                bar.set_description(f"{regime} k={k} n={n}")
                skip = [name for name, cut in over_budget.items() if dominated((k, n), cut)]
                cell = run_cell(regime, V, k, n, count, seed, methods, budget_s, skip, lambda: bar.update(1))
                for name, res in cell.methods.items():
                    if res.status == BUDGET:
                        over_budget[name].add((k, n))
                cells.append(cell)
    finally:
        bar.close()
    return cells


class _NoBar:
    """Stand-in for tqdm when it is missing or disabled."""

    def update(self, _n: int = 1) -> None: ...
    def set_description(self, _s: str) -> None: ...
    def close(self) -> None: ...


def _progress_bar(total: int, enabled: bool):
    """A tqdm bar on stderr (or a no-op if disabled or tqdm is not installed)."""
    if not enabled:
        return _NoBar()
    try:
        from tqdm import tqdm
    except ImportError:
        return _NoBar()
    return tqdm(total=total, unit="tok", file=sys.stderr, dynamic_ncols=True)

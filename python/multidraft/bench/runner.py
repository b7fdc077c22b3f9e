"""The timing loop: cells, budgets, lower bounds. All times are in ms per token.

A *cell* is (regime, k, n): ``count`` instances of the regime with draft top-k ``k`` and ``n``
i.i.d. drafts. Every method runs on every instance (interleaved, in one worker process, see
:mod:`multidraft.bench.worker`) until it is refused, fails, or exceeds the per-instance budget.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

import numpy as np

import multidraft as md

from .baselines import floor_ms
from .distributions import derive_seed, get_regime, make_pairs, summarize_pairs
from .methods import METHODS, Method
from .worker import DONE, TIMEOUT, VALUE_ERROR, Worker, default_memory_limit

ALPHA_TOL = 1e-7
"""Every exact method's acceptance must match alpha* (subset selection) within this."""

REFUSAL_WORDS = ("too large", "MAX_NETWORK_ARCS", "MAX_LP_VARIABLES", "MAX_ENUMERATED_TUPLES")
"""A ValueError mentioning one of these is the package refusing a too large problem."""

# Method statuses within a cell.
OK = "ok"              # every instance ran
BUDGET = "budget"      # an instance exceeded the budget (or the hard cap); the rest were skipped
REFUSED = "refused"    # the package refused the problem as too large (ValueError)
SKIPPED = "skipped"    # not run: exceeded the budget in a smaller cell (k' <= k, n' <= n)
ERROR = "error"        # any other exception or a crash (a bug: reported, exit status 1)


@dataclasses.dataclass
class MethodResult:
    """Raw measurements of one method in one cell (times in ms per token).

    A call stopped at the hard cap is recorded with the cap as its time and ``timed_out``.
    """

    name: str
    status: str = OK
    times_ms: List[float] = dataclasses.field(default_factory=list)
    alpha_dev: List[float] = dataclasses.field(default_factory=list)
    alphas: List[float] = dataclasses.field(default_factory=list)
    successes: List[bool] = dataclasses.field(default_factory=list)
    l1_bounds: List[float] = dataclasses.field(default_factory=list)
    timed_out: bool = False
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

    @property
    def success_rate(self) -> Optional[float]:
        """Share of instances whose plan met its bound (Global Resolution; exact methods: 1)."""
        return float(np.mean(self.successes)) if self.successes else None

    @property
    def max_l1_bound(self) -> Optional[float]:
        """Largest achieved L1 bound over the instances run (Global Resolution)."""
        return max(self.l1_bounds) if self.l1_bounds else None

    def bound_violations(self, tau: Optional[float]) -> int:
        """Successful instances whose alpha is not within 10 tau of alpha* (must be 0)."""
        if tau is None:
            return 0
        return sum(ok and dev > 10 * tau for ok, dev in zip(self.successes, self.alpha_dev))

    def record(self, outcome: Tuple, alpha_ref: float, budget_ms: float, cap_ms: float) -> None:
        """Update status, times and deviations with one outcome of :meth:`Worker.run`."""
        kind, payload = outcome[0], outcome[1:]
        if kind == DONE:
            elapsed, outcome = payload
            self.times_ms.append(elapsed)
            self.alphas.append(outcome.alpha)
            self.alpha_dev.append(abs(outcome.alpha - alpha_ref))
            self.successes.append(outcome.success)
            self.l1_bounds.append(outcome.l1_bound)
            if elapsed > budget_ms:
                self.status = BUDGET
        elif kind == TIMEOUT:
            self.times_ms.append(cap_ms)
            self.timed_out, self.status = True, BUDGET
            self.message = f"stopped at the hard cap of {cap_ms / 1e3:g} s"
        else:
            message = payload[0]
            refused = kind == VALUE_ERROR and any(word in message for word in REFUSAL_WORDS)
            self.status, self.message = (REFUSED if refused else ERROR), message


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
    # Median over the instances of one NumPy pass over p and q (np.minimum(p, q).sum()), timed in
    # this run on the same arrays: the floor the full-vocabulary tables compare against.
    floor_ms: float = 0.0

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


def run_cell(
    worker: Worker,
    regime: str,
    V: int,
    k: int,
    n: int,
    count: int,
    seed: int,
    methods: Sequence[Method],
    budget_s: float,
    skip: Iterable[str] = (),
    on_instance=lambda: None,
) -> Cell:
    """Benchmark ``methods`` on ``count`` instances of one (regime, k, n) cell.

    The instances depend on (seed, regime, k) only, so cells with the same k and different n
    share their (p, q) pairs. alpha* and H* come from ``md.optimal_subset`` (untimed). Methods
    named in ``skip`` are recorded as skipped. A method that exceeds ``budget_s`` seconds on an
    instance is not run on the remaining ones. ``on_instance()`` is called after each instance.
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
        instance = (p, q, n, drafts, int(rng.integers(2**63)))
        active = [m.name for m in methods if results[m.name].active]
        for name, outcome in worker.run(instance, active).items():
            results[name].record(outcome, alpha, 1e3 * budget_s, 1e3 * worker.max_call_s)
        on_instance()
    floor = float(np.median([floor_ms(p, q) for p, q in zip(p_all, q_all)]))
    return Cell(regime, V, k, n, alpha_star, h_size, summarize_pairs(p_all, q_all), results, floor)


def dominated(cell: Tuple[int, int], over_budget: Iterable[Tuple[int, int]]) -> bool:
    """True if some (k0, n0) in ``over_budget`` has k0 <= k and n0 <= n (a smaller problem)."""
    k, n = cell
    return any(k0 <= k and n0 <= n for k0, n0 in over_budget)


def run_grid(
    regimes: Sequence[str],
    grid: Sequence[Tuple[int, int]],
    V: int,
    count: int,
    seed: int,
    methods: Sequence[Method],
    budget_s: float,
    max_call_s: float,
    progress: bool = True,
) -> List[Cell]:
    """Benchmark every (regime, k, n) cell, cells in increasing (k, n) order per regime.

    A method that exceeded the budget in a cell is skipped in every larger cell of the same
    regime (k and n both at least as large), like [GR]'s lower bounds, to keep the run
    bounded. No single call may take more than ``max_call_s`` seconds.
    """
    for r in regimes:
        get_regime(r)  # validate names before any work
    grid = sorted(set(grid))
    bar = _progress_bar(len(regimes) * len(grid) * count, progress)
    cells = []
    with Worker(max_call_s, default_memory_limit()) as worker:
        try:
            for regime in regimes:
                over_budget: Dict[str, Set[Tuple[int, int]]] = {m.name: set() for m in methods}
                for k, n in grid:
                    bar.set_description(f"{regime} k={k} n={n}")
                    skip = [name for name, cut in over_budget.items() if dominated((k, n), cut)]
                    cell = run_cell(worker, regime, V, k, n, count, seed, methods, budget_s, skip,
                                    lambda: bar.update(1))
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

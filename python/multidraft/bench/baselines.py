"""Every verifier side by side: exact acceptance against alpha*, per-token verify time against
the memory floor, and the speedup of batched verification from threads.

For each (regime, k, n) cell and each verifier that handles n drafts, the acceptance is the
verifier's exact expected acceptance (``v.acceptance``, no sampling), averaged over the cell's
instances, and the time is the median over the instances of the median ms of three
``v.verify(p, q, drafts, seed)`` calls (one for calls over 50 ms; plan building included), with
drafts drawn by the verifier's own scheme ("sps": the first draft only).
The floor is the median time of one NumPy pass over the same arrays, ``np.minimum(p, q).sum()``,
measured in the same run; each verify time is also given as a multiple of it.

A generation loop brings new arrays at every token, so each instance is also timed as it would
be there, first: fresh copies of p and q (new memory), the floor timed once on them, then one
verify call on them; the "fresh" multiple is the median over instances of that call over that
floor (:func:`fresh_table`, beside the repeated calls' multiple). alpha* is the
optimum for n i.i.d. drafts; methods with other draft schemes (without replacement, SpecHub's hub
pairs, the top-n tokens of "topk") can exceed it, since their draft law differs.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

import multidraft as md

from .distributions import derive_seed, make_pairs
from .methods import time_ms

VERIFIERS: Dict[str, Dict[str, object]] = {
    "sps": {},
    "naive": {},
    "topk": {},
    "rrs": {},
    "rrs_without_replacement": {},
    "spectr": {},
    "spechub": {},
    "khisti": {},
    "otlp": {},
    "global_resolution": {"tau": 1e-3, "fallback": True},
}
"""Verifiers of the table and their options (``otlp``: the exact optimum by its default, the CS
max-flow; ``global_resolution``: exactly lossless, the default)."""

VERIFY_REPEATS = 3
REPEAT_BELOW_MS = 50.0
"""Calls of v.verify per instance (one when the first took REPEAT_BELOW_MS or more); their median
is the instance's time (slow methods stop after max_call_ms, see run_baselines)."""

THREADED = tuple(VERIFIERS)
"""Verifiers whose batched verify is timed with one thread and with all of them."""


@dataclasses.dataclass
class BaselineRow:
    regime: str
    k: int
    n: int
    alpha_star: float
    acceptance: Dict[str, Optional[float]]   # mean exact acceptance (None: not applicable / refused)
    gap: Dict[str, Optional[float]]          # mean of (acceptance - alpha*) over the same instances
    runs: Dict[str, int]                     # instances run (a slow method stops after max_call_ms)
    verify_ms: Dict[str, Optional[float]]    # median ms per verified token
    notes: Dict[str, str]
    instances: int = 0
    floor_ms: float = 0.0                    # median ms of np.minimum(p, q).sum() on the same arrays
    fresh_ratio: Dict[str, Optional[float]] = dataclasses.field(default_factory=dict)  # median fresh call / floor


def _applies(name: str, n: int) -> bool:
    return not (name == "spechub" and n != 2)


def _drafts_of(name: str, n: int) -> int:
    return 1 if name == "sps" else n


def floor_ms(p: np.ndarray, q: np.ndarray, repeats: int = 5) -> float:
    """Median ms of one NumPy pass over p and q (``np.minimum(p, q).sum()``): the memory floor."""
    return float(np.median([time_ms(lambda: np.minimum(p, q).sum())[0] for _ in range(repeats)]))


def fresh_call_ratio(v, p: np.ndarray, q: np.ndarray, drafts: np.ndarray, seed: int) -> float:
    """One ``v.verify`` call on fresh copies of p and q over the floor timed once on them just before."""
    p, q = np.array(p), np.array(q)  # new memory, as a generation loop brings at every token
    floor = time_ms(lambda: np.minimum(p, q).sum())[0]
    return time_ms(v.verify, p, q, drafts, seed)[0] / floor


def run_baselines(regimes: Sequence[str], grid: Sequence[Tuple[int, int]], V: int, count: int, seed: int,
                  max_call_ms: float = 2000.0) -> List[BaselineRow]:
    """Acceptance and verify time of every verifier on every cell (see the module docstring)."""
    rows = []
    for regime in regimes:
        for k, n in sorted(set(grid)):
            p_all, q_all = make_pairs(regime, V, k, count, derive_seed(seed, regime, k))
            stars = np.atleast_1d(md.optimal_acceptance(p_all, q_all, n))
            floor = float(np.median([floor_ms(p, q) for p, q in zip(p_all, q_all)]))
            rng = np.random.default_rng(derive_seed(seed, regime, k, n, 7))
            acceptance, gap, runs, verify_ms, notes, fresh = {}, {}, {}, {}, {}, {}
            for name, options in VERIFIERS.items():
                acceptance[name] = gap[name] = verify_ms[name] = fresh[name] = None
                runs[name] = 0
                if not _applies(name, n):
                    notes[name] = "n = 2 only"
                    continue
                v = md.verifier(name, **options)
                values, times, fresh_ratios = [], [], []
                m = _drafts_of(name, n)
                try:
                    for p, q in zip(p_all, q_all):
                        drafts = v.draft(q, m, rng)
                        fresh_ratios.append(fresh_call_ratio(v, p, q, drafts, int(rng.integers(2**63))))
                        # median of a few calls, as for the floor: both read p and q from a warm cache
                        # (calls slower than REPEAT_BELOW_MS are not repeated: caches do not matter there)
                        calls = [time_ms(v.verify, p, q, drafts, int(rng.integers(2**63)))[0]]
                        while calls[0] < REPEAT_BELOW_MS and len(calls) < VERIFY_REPEATS:
                            calls.append(time_ms(v.verify, p, q, drafts, int(rng.integers(2**63)))[0])
                        elapsed = float(np.median(calls))
                        times.append(elapsed)
                        values.append(v.acceptance(p, q, m))
                        if elapsed > max_call_ms:
                            break
                except ValueError as error:  # refused as too large
                    notes[name] = str(error).split(":")[0]
                if values:
                    runs[name] = len(values)
                    acceptance[name] = float(np.mean(values))
                    gap[name] = float(np.mean(np.array(values) - stars[: len(values)]))
                    verify_ms[name] = float(np.median(times))
                    fresh[name] = float(np.median(fresh_ratios))
            rows.append(BaselineRow(regime, k, n, float(np.mean(stars)), acceptance, gap, runs, verify_ms, notes,
                                    len(p_all), floor, fresh))
    return rows


def baselines_table(rows: Sequence[BaselineRow]) -> str:
    """Markdown: per cell, each verifier's mean acceptance (its mean gap to alpha* on the same
    instances), median verify ms per token and its multiple of the floor; [r of N] when a slow
    method ran r instances only."""
    head = ["regime", "(k, n)", "alpha* (iid)", "floor (ms)"] + [
        "sps (first draft)" if name == "sps" else name for name in VERIFIERS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r.regime, f"({r.k}, {r.n})", f"{r.alpha_star:.4f}", f"{r.floor_ms:.3g}"]
        for name in VERIFIERS:
            a, t = r.acceptance.get(name), r.verify_ms.get(name)
            if a is None:
                cells.append(r.notes.get(name, "n/a"))
                continue
            partial = f" [{r.runs[name]} of {r.instances}]" if r.runs[name] < r.instances else ""
            cells.append(f"{a:.4f} ({r.gap[name]:+.4f}) / {t:.3g} ms = {t / r.floor_ms:.3g}x{partial}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def fresh_table(rows: Sequence[BaselineRow]) -> str:
    """Markdown: per cell, each verifier's verify time as a multiple of the floor on fresh arrays (one
    call, see the module docstring) / on repeated calls over the same arrays."""
    head = ["regime", "(k, n)"] + list(VERIFIERS)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r.regime, f"({r.k}, {r.n})"]
        for name in VERIFIERS:
            fresh, t = r.fresh_ratio.get(name), r.verify_ms.get(name)
            cells.append("-" if fresh is None else f"{fresh:.3g}x / {t / r.floor_ms:.3g}x")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def baselines_record(rows: Sequence[BaselineRow]) -> List[Dict[str, object]]:
    return [dataclasses.asdict(r) for r in rows]


@dataclasses.dataclass
class ThreadRow:
    regime: str
    verifier: str
    k: int
    n: int
    B: int
    threads: int
    one_thread_ms: float
    all_threads_ms: float

    @property
    def speedup(self) -> float:
        return self.one_thread_ms / self.all_threads_ms


#: The first row of each regime in the thread table: the floor, one read of the batch's p and q.
ONE_READ = "one read of p and q (acceptance_rate)"


def run_thread_scaling(regimes: Sequence[str], V: int, seed: int, B: int = 64, k: int = 100, n: int = 2,
                       repeats: int = 15, threads: Optional[int] = None) -> List[ThreadRow]:
    """Median ms of one batched ``v.verify`` of B distinct (p, q) rows with one C++ thread and with
    ``threads`` (default ``md.get_num_threads()``, all usable cores), for the verifiers of
    :data:`THREADED` (n drafts each, "sps" one, "spechub" two), after the floor (:data:`ONE_READ`:
    ``md.acceptance_rate`` of the batch, one pass over p and q on the same threads), whose speedup
    is what this machine's memory gives that many threads reading these bytes. The two thread
    counts alternate call by call, so a slow spell of the machine falls on both."""
    usable = md.get_num_threads()
    threads = threads or usable
    rows = []
    try:
        for regime in regimes:
            p, q = make_pairs(regime, V, k, B, derive_seed(seed, regime, k, "threads"))
            rows.append(ThreadRow(regime, ONE_READ, k, 0, B, threads,
                                  *_alternating(lambda r: md.acceptance_rate(p, q), threads, repeats)))
            for name in THREADED:
                v = md.verifier(name, **VERIFIERS[name])
                rng = np.random.default_rng(derive_seed(seed, regime, k, n, "threads"))
                m = _drafts_of(name, n) if _applies(name, n) else 2
                drafts = np.stack([v.draft(row, m, rng) for row in q])
                medians = _alternating(lambda r: v.verify(p, q, drafts, r), threads, repeats)
                rows.append(ThreadRow(regime, name, k, m, B, threads, *medians))
    finally:
        md.set_num_threads(usable)
    return rows


def _alternating(call, threads: int, repeats: int) -> Tuple[float, float]:
    """(median ms with one thread, with ``threads``) of ``call(r)``, the counts alternating call by
    call after a warm-up of each."""
    times: Dict[int, List[float]] = {1: [], threads: []}
    for count in (1, threads):
        md.set_num_threads(count)
        call(0)
    for r in range(repeats):
        for count in (1, threads):
            md.set_num_threads(count)
            times[count].append(time_ms(call, r)[0])
    return float(np.median(times[1])), float(np.median(times[threads]))


def thread_table(rows: Sequence[ThreadRow]) -> str:
    head = ["regime", "verifier", "(k, n)", "B", "1 thread (ms)", "threads", "all threads (ms)", "speedup"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        pair = "-" if r.verifier == ONE_READ else f"({r.k}, {r.n})"
        lines.append(f"| {r.regime} | {r.verifier} | {pair} | {r.B} | {r.one_thread_ms:.3g} | {r.threads} | "
                     f"{r.all_threads_ms:.3g} | {r.speedup:.2f}x |")
    return "\n".join(lines)

"""Every verifier side by side: exact acceptance against alpha*, and per-token verify time.

For each (regime, k, n) cell and each verifier that handles n drafts, the acceptance is the
verifier's exact expected acceptance (``v.acceptance``, no sampling), averaged over the cell's
instances, and the time is the median ms of one ``v.verify(p, q, drafts, seed)`` call (plan
building included), with drafts drawn by the verifier's own scheme. alpha* is the optimum for
n i.i.d. drafts; methods with other draft schemes (without replacement, SpecHub's hub pairs)
can exceed it, since their draft law differs.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

import multidraft as md

from .distributions import derive_seed, make_pairs
from .methods import time_ms

VERIFIERS: Dict[str, Dict[str, object]] = {
    "naive": {},
    "rrs": {},
    "rrs_without_replacement": {},
    "spectr": {},
    "spechub": {},
    "khisti": {},
    "otlp": {"method": "maxflow_cs"},
    "global_resolution": {"tau": 1e-3, "fallback": True},
}
"""Verifiers of the table and their options (``otlp``: the exact optimum by the CS max-flow)."""


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


def _applies(name: str, n: int) -> bool:
    return not (name == "spechub" and n != 2)


def run_baselines(regimes: Sequence[str], grid: Sequence[Tuple[int, int]], V: int, count: int, seed: int,
                  max_call_ms: float = 2000.0) -> List[BaselineRow]:
    """Acceptance and verify time of every verifier on every cell (see the module docstring)."""
    rows = []
    for regime in regimes:
        for k, n in sorted(set(grid)):
            p_all, q_all = make_pairs(regime, V, k, count, derive_seed(seed, regime, k))
            stars = np.atleast_1d(md.optimal_acceptance(p_all, q_all, n))
            rng = np.random.default_rng(derive_seed(seed, regime, k, n, 7))
            acceptance, gap, runs, verify_ms, notes = {}, {}, {}, {}, {}
            for name, options in VERIFIERS.items():
                acceptance[name] = gap[name] = verify_ms[name] = None
                runs[name] = 0
                if not _applies(name, n):
                    notes[name] = "n = 2 only"
                    continue
                v = md.verifier(name, **options)
                values, times = [], []
                try:
                    for p, q in zip(p_all, q_all):
                        drafts = v.draft(q, n, rng)
                        elapsed, _ = time_ms(v.verify, p, q, drafts, int(rng.integers(2**63)))
                        times.append(elapsed)
                        values.append(v.acceptance(p, q, n))
                        if elapsed > max_call_ms:
                            break
                except ValueError as error:  # refused as too large
                    notes[name] = str(error).split(":")[0]
                if values:
                    runs[name] = len(values)
                    acceptance[name] = float(np.mean(values))
                    gap[name] = float(np.mean(np.array(values) - stars[: len(values)]))
                    verify_ms[name] = float(np.median(times))
            rows.append(BaselineRow(regime, k, n, float(np.mean(stars)), acceptance, gap, runs, verify_ms, notes,
                                    len(p_all)))
    return rows


def baselines_table(rows: Sequence[BaselineRow]) -> str:
    """Markdown: per cell, each verifier's mean acceptance (its mean gap to alpha* on the same
    instances) and median verify ms per token; [r of N] when a slow method ran r instances only."""
    head = ["regime", "(k, n)", "alpha* (iid)"] + list(VERIFIERS)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r.regime, f"({r.k}, {r.n})", f"{r.alpha_star:.4f}"]
        for name in VERIFIERS:
            a, t = r.acceptance.get(name), r.verify_ms.get(name)
            if a is None:
                cells.append(r.notes.get(name, "n/a"))
                continue
            partial = f" [{r.runs[name]} of {r.instances}]" if r.runs[name] < r.instances else ""
            cells.append(f"{a:.4f} ({r.gap[name]:+.4f}) / {t:.3g} ms{partial}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def baselines_record(rows: Sequence[BaselineRow]) -> List[Dict[str, object]]:
    return [dataclasses.asdict(r) for r in rows]

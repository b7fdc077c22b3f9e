"""Cost model of speculative decoding: the speedup predicted from acceptance and relative costs.

The standard analysis (Leviathan et al. 2023, extended to per-position acceptance). A round drafts
``L`` positions and verifies them with ONE target forward pass. With ``a[j]`` = P(draft position j
accepted | position j verified) (``GenerationStats.acceptance_per_position``), the round emits the
accepted prefix plus one token (the verifier's or the bonus token), so

    E[tokens per round] = 1 + sum_{k=1..L} a[0] a[1] ... a[k-1].

Costs are in units of one target forward pass: ``cost_ratio`` c = one draft forward pass (all n
draft sequences batched) / one target pass, ``overhead`` v = verification and loop work per round.
A round costs ``L c + 1 + v``; plain sampling costs 1 per token, so

    speedup = E[tokens per round] / (L c + 1 + v).

A measured run adds ``target_step`` r: what one target pass of the speculative loop costs in plain
sampling steps (1 in the model; more when the loop's pass over the n L tree tokens, its mask and
its laws cost more than a plain step), and the speedup is divided by r.

Assumptions (say them next to any prediction): a target pass over the n L tree tokens costs what
a one-token pass costs (memory-bound decoding, n L small), plain sampling's own overhead is
negligible, and the acceptance does not depend on L (true: position j's acceptance is a property
of the first j positions only). These are PREDICTIONS, not measurements.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Dict, Sequence, Tuple

import numpy as np

from .. import _validation as check


def _acceptance(acceptance) -> np.ndarray:
    a = np.asarray(acceptance, dtype=np.float64)
    if a.ndim != 1 or a.size == 0 or not np.all((a >= 0) & (a <= 1)):  # NaN fails the comparison too
        raise ValueError(f"'acceptance' must be a non-empty 1-D array of probabilities in [0, 1], got {acceptance!r}")
    return a


def _nonnegative(x, name: str) -> float:
    if isinstance(x, bool) or not isinstance(x, numbers.Real) or not np.isfinite(x) or x < 0:
        raise ValueError(f"'{name}' must be a finite number >= 0, got {x!r}")
    return float(x)


def expected_tokens(acceptance: Sequence[float]) -> float:
    """Expected tokens per round for draft length ``L = len(acceptance)`` (module docstring)."""
    a = _acceptance(acceptance)
    return float(1.0 + np.sum(np.cumprod(a)))


def round_cost(draft_length: int, cost_ratio: float, overhead: float = 0.0) -> float:
    """Cost of one round in target forward passes: ``L c + 1 + v``."""
    L = check.count(draft_length, "draft_length")
    return L * _nonnegative(cost_ratio, "cost_ratio") + 1.0 + _nonnegative(overhead, "overhead")


def predicted_speedup(acceptance: Sequence[float], cost_ratio: float, overhead: float = 0.0,
                      target_step: float = 1.0) -> float:
    """Predicted speedup over plain sampling with draft length ``len(acceptance)``; ``target_step``:
    one target pass in plain sampling steps (module docstring)."""
    if _nonnegative(target_step, "target_step") == 0:
        raise ValueError("'target_step' must be > 0")
    return expected_tokens(acceptance) / round_cost(len(_acceptance(acceptance)), cost_ratio, overhead) / target_step


def best_draft_length(acceptance: Sequence[float], cost_ratio: float, overhead: float = 0.0) -> Tuple[int, float]:
    """(L, predicted speedup) maximising the speedup over L = 1 .. len(acceptance), each L using
    the first L positions of the profile (the shortest L wins ties)."""
    a = _acceptance(acceptance)
    speedups = [predicted_speedup(a[:L], cost_ratio, overhead) for L in range(1, a.size + 1)]
    best = int(np.argmax(speedups))
    return best + 1, float(speedups[best])


@dataclass(frozen=True)
class MeasuredCosts:
    """Relative costs of a measured run (``multidraft.hf.GenerationStats``), in target passes:
    ``cost_ratio`` (one draft pass), ``overhead`` (verification per round); ``target_step``: one
    target pass in plain sampling steps."""

    cost_ratio: float
    overhead: float
    target_step: float


def measured_costs(stats, plain_step_seconds: float) -> MeasuredCosts:
    """The relative costs of a run, from its wall-time split (the loop runs ``L`` draft passes and
    one target pass per round, batched over rows) and the measured seconds of one plain sampling
    step (e.g. ``target.generate``'s time over its tokens)."""
    if stats.target_calls == 0 or stats.target_seconds <= 0:
        raise ValueError("'stats' has no target pass to compare with (no round was run)")
    if _nonnegative(plain_step_seconds, "plain_step_seconds") == 0:
        raise ValueError("'plain_step_seconds' must be > 0")
    target = stats.target_seconds / stats.target_calls
    draft = stats.draft_seconds / (stats.target_calls * stats.draft_length)
    return MeasuredCosts(draft / target, stats.verify_seconds / stats.target_calls / target,
                         target / plain_step_seconds)


def format_predictions(profiles: Dict[str, Sequence[float]], ratios: Sequence[float], overhead: float = 0.0) -> str:
    """A Markdown table of PREDICTED speedups: one row per acceptance profile, one column per cost
    ratio, each cell ``speedup (best L)`` over L up to the profile's length."""
    lines = ["| acceptance profile (measured) | " + " | ".join(f"c = {c:g}" for c in ratios) + " |",
             "|---|" + "---|" * len(ratios)]
    for label, acceptance in profiles.items():
        cells = [best_draft_length(acceptance, c, overhead) for c in ratios]
        lines.append(f"| {label} | " + " | ".join(f"{s:.2f}x (L = {L})" for L, s in cells) + " |")
    return "\n".join(lines)

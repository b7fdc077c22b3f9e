"""The planner's input checks, shared by its modules (integers: ``multidraft._validation.count``):
an acceptance curve alpha(1..K), a tree shape ``parents`` (see :mod:`~multidraft.hf.planner.tokens`),
seconds of loop work per output token."""
from __future__ import annotations

import math

import numpy as np


def _check_acceptance(acceptance) -> np.ndarray:
    """(K,) float64 alpha(1..K); ValueError unless finite, in [0, 1] and nondecreasing."""
    try:
        alpha = np.asarray(acceptance, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"'acceptance' must be a 1-D array of probabilities: {error}") from None
    if alpha.ndim != 1 or alpha.size == 0:
        raise ValueError(f"'acceptance' must be a non-empty 1-D array alpha(1..K), got shape {alpha.shape}")
    bad = np.flatnonzero(~np.isfinite(alpha) | (alpha < 0) | (alpha > 1))
    if bad.size:
        raise ValueError(f"acceptance[{bad[0]}] = {float(alpha[bad[0]])} is not a probability in [0, 1]")
    drop = np.flatnonzero(np.diff(alpha) < 0)
    if drop.size:
        i = drop[0]
        raise ValueError(f"'acceptance' must be nondecreasing in the group size: acceptance[{i + 1}] = "
                         f"{float(alpha[i + 1])} < acceptance[{i}] = {float(alpha[i])}")
    return alpha


def _check_parents(parents) -> np.ndarray:
    """(M,) int64 parents; ValueError unless parents[i] in [-1, i - 1] for every i."""
    try:
        array = np.asarray(parents)
    except (TypeError, ValueError) as error:
        raise ValueError(f"'parents' must be a sequence of integers: {error}") from None
    if array.ndim != 1 or (array.size and not np.issubdtype(array.dtype, np.integer)):
        raise ValueError(f"'parents' must be a 1-D sequence of integers, got {parents!r}")
    array = array.astype(np.int64)
    bad = np.flatnonzero((array < -1) | (array >= np.arange(array.size)))
    if bad.size:
        i = bad[0]
        raise ValueError(f"parents[{i}] = {array[i]} must be -1 (the root) or an earlier node in [0, {i - 1}]")
    return array


def _check_verify_cost(verify_cost) -> float:
    try:
        value = float(verify_cost)
    except (TypeError, ValueError):
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"'verify_cost' must be finite seconds >= 0, got {verify_cost!r}")
    return value

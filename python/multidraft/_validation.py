"""One validation layer for every entry point: arrays, token ids, counts and random generators.

Every violation raises :class:`ValueError` naming the argument and the problem.
"""
from __future__ import annotations

import numbers
from typing import Optional, Sequence, Union

import numpy as np

#: Probabilities must sum to 1 within this absolute tolerance (float32 inputs round to ~1e-7).
SUM_TOLERANCE = 1e-6

RngLike = Union[np.random.Generator, int, Sequence[int], None]


def probabilities(x, name: str, ndims: Sequence[int] = (1, 2)) -> np.ndarray:
    """Return ``x`` as a C-contiguous float64 array after checking it is a probability array.

    The last axis holds distributions over the vocabulary; ``ndims`` lists the accepted ranks.
    """
    try:
        array = np.asarray(x)
    except Exception as error:  # e.g. ragged lists
        raise ValueError(f"'{name}' must be an array of probabilities: {error}") from None
    if array.dtype == object or not (np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)):
        raise ValueError(f"'{name}' must be a float32 or float64 array, got dtype {array.dtype}")
    if array.ndim not in ndims:
        expected = " or ".join(f"{d}-D" for d in ndims)
        raise ValueError(f"'{name}' must be {expected}, got shape {array.shape}")
    if array.shape[-1] == 0 or array.size == 0:
        raise ValueError(f"'{name}' is empty (shape {array.shape})")
    array = np.ascontiguousarray(array, dtype=np.float64)
    sums = array.sum(axis=-1)
    # Fast path, two passes: NaN fails `>= 0`, and an infinite entry makes its sum fail.
    if np.all(array >= 0) and np.all(np.abs(sums - 1.0) <= SUM_TOLERANCE):
        return array
    if not np.all(np.isfinite(array)):
        where = np.argwhere(~np.isfinite(array))[0]
        raise ValueError(f"'{name}' is not finite at index {tuple(int(i) for i in where)}")
    if np.any(array < 0):
        where = np.argwhere(array < 0)[0]
        raise ValueError(f"'{name}' has a negative entry at index {tuple(int(i) for i in where)}")
    bad = np.abs(sums - 1.0) > SUM_TOLERANCE
    row = np.argwhere(np.atleast_1d(bad))[0]
    total = float(np.atleast_1d(sums)[tuple(row)] if sums.ndim else sums)
    where = "" if array.ndim == 1 else f" (row {tuple(int(i) for i in row)})"
    raise ValueError(f"'{name}' must sum to 1 within {SUM_TOLERANCE:g}, sums to {total!r}{where}")


def count(n, name: str = "n", minimum: int = 1) -> int:
    """A positive integer such as the number of drafts."""
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, numbers.Integral):
        raise ValueError(f"'{name}' must be an integer, got {n!r}")
    if n < minimum:
        raise ValueError(f"'{name}' must be >= {minimum}, got {n}")
    return int(n)


def tokens(drafts, V: int, n: Optional[int], name: str = "drafts", ndims: Sequence[int] = (1, 2)) -> np.ndarray:
    """Token ids as a C-contiguous int64 array, each in ``[0, V)``, last axis of length ``n``."""
    array = np.asarray(drafts)
    if array.ndim == 0 and 1 in ndims and n == 1:
        array = array.reshape(1)
    if array.size and not np.issubdtype(array.dtype, np.integer):
        if not (np.issubdtype(array.dtype, np.floating) and np.all(np.isfinite(array)) and np.all(array == np.round(array))):
            raise ValueError(f"'{name}' must hold integer token ids, got dtype {array.dtype}")
    if array.ndim not in ndims:
        expected = " or ".join(f"{d}-D" for d in ndims)
        raise ValueError(f"'{name}' must be {expected}, got shape {array.shape}")
    if n is not None and array.shape[-1] != n:
        raise ValueError(f"'{name}' must hold n = {n} tokens per row, got shape {array.shape}")
    array = np.ascontiguousarray(array, dtype=np.int64)
    if np.any((array < 0) | (array >= V)):
        bad = array[(array < 0) | (array >= V)].ravel()[0]
        raise ValueError(f"'{name}' has token {int(bad)} out of range [0, {V})")
    return array


def same_vocabulary(V: int, other: np.ndarray, name: str) -> None:
    if other.shape[-1] != V:
        raise ValueError(f"'{name}' has vocabulary size {other.shape[-1]}, but 'p' has {V}")


def row_seeds(rng: RngLike, rows: int) -> np.ndarray:
    """Per-row 64-bit seeds for the core's generator.

    An int seeds one row directly (for ``rows == 1``); a sequence gives one seed per row; a
    Generator (or an int, for ``rows > 1``) draws ``rows`` seeds. So a batched call with per-row
    seeds ``s`` equals the loop of single calls with ``rng=s[b]``.
    """
    if isinstance(rng, np.random.Generator):
        return rng.integers(0, 2**63, size=rows, dtype=np.uint64)
    if rng is None:
        return np.random.default_rng().integers(0, 2**63, size=rows, dtype=np.uint64)
    if isinstance(rng, numbers.Integral) and not isinstance(rng, (bool, np.bool_)):
        if rng < 0:
            raise ValueError(f"'rng' seed must be non-negative, got {rng}")
        if rows == 1:
            return np.array([int(rng) % 2**64], dtype=np.uint64)
        return np.random.default_rng(int(rng)).integers(0, 2**63, size=rows, dtype=np.uint64)
    seeds = np.asarray(rng)
    if seeds.ndim == 1 and np.issubdtype(seeds.dtype, np.integer):
        if seeds.shape[0] != rows:
            raise ValueError(f"'rng' holds {seeds.shape[0]} seeds for {rows} rows")
        if np.any(seeds < 0):
            raise ValueError("'rng' seeds must be non-negative")
        return seeds.astype(np.uint64)
    raise ValueError(f"'rng' must be a numpy Generator, an int seed or a sequence of int seeds, got {type(rng).__name__}")

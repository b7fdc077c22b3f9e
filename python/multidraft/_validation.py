"""One validation layer for every entry point: arrays, token ids, counts and random generators.

Every violation raises :class:`ValueError` naming the argument and the problem.
"""
from __future__ import annotations

import functools
import numbers
import sys
from typing import Optional, Sequence, Tuple, Union

import numpy as np

from . import _core

#: The smallest sum tolerance, whatever the input's precision: float64 input is held to it.
SUM_TOLERANCE = 1e-6

#: Unit roundoff of float32, the least precision in which softmax kernels accumulate their
#: normaliser (torch on the CPU does so for float16 and bfloat16 outputs too).
_FLOAT32_ROUNDOFF = 2.0**-24

RngLike = Union[np.random.Generator, int, Sequence[int], None]

def _largest_as_unsigned(array: np.ndarray) -> int:
    """The largest int64 id read as unsigned: a negative id becomes >= 2**63, so this one
    reduction checks both ends of [0, V)."""
    return int(array.view(np.uint64).max())


#: dtypes the core reads directly (distribution.hpp)
_CORE_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _precision(dtype) -> Tuple[float, float]:
    """(machine epsilon, smallest normal number) of a NumPy or torch dtype; (0, 0) for integers."""
    torch = sys.modules.get("torch")  # a torch dtype exists only if torch was imported
    if torch is not None and isinstance(dtype, torch.dtype):
        if not dtype.is_floating_point:
            return 0.0, 0.0
        info = torch.finfo(dtype)
    elif np.issubdtype(np.dtype(dtype), np.floating):
        info = np.finfo(dtype)
    else:
        return 0.0, 0.0
    return float(info.eps), float(info.tiny)


@functools.lru_cache(maxsize=256)  # a few (dtype, V) pairs per process; computed on every call otherwise
def sum_tolerance(dtype, V: int) -> float:
    """How far from 1 a distribution over ``V`` tokens stored in ``dtype`` (NumPy or torch) may sum.

    Derivation: a worst-case bound on the rounding a producer adds to an exact law, for a dtype of
    machine epsilon eps (unit roundoff u = eps / 2) and smallest normal number ``tiny``.

    - Storage: rounding an entry p_i to the dtype errs by less than eps p_i (any faithful
      rounding: to nearest, or by truncation as some bfloat16 conversions do), and by less than
      eps tiny in the subnormal range; summed, < eps (1 + V tiny). The V tiny part matters for
      float16 only (tiny = 6.1e-5: a flat row at V = 152064 is all subnormal).
    - The producer's normaliser S = sum_j exp(x_j - max): every entry is divided by the same S,
      so the relative error of S becomes the error of the sum. A sum of V positive terms in
      precision u_acc errs by at most (V - 1) u_acc relative, whatever the summation order
      (Higham's gamma_{V-1}). Softmax kernels accumulate in float32 or better, so
      u_acc = min(u, 2**-24).

    ``tolerance = max(SUM_TOLERANCE, eps (1 + V tiny) + (V - 1) min(u, 2**-24))``: float64 keeps
    1e-6 (as before); float32 gets 1.9e-3 at V = 32000 and 9.1e-3 at V = 152064, bfloat16
    9.7e-3 and 1.7e-2, float16 4.8e-3 and 1.9e-2. Integers are exact (eps = 0).

    The accumulation term is not a formality: in a peaked row (one token near 1 and a tail of
    entries near u), every addition of a tail entry to the vector lane that holds the peak can
    lose up to u. ``docs/benchmarks/softmax-sums.md`` (``scripts/measure_softmax_sums.py``) holds
    torch's rows against this rule: peaked float32 rows need the accumulation term, and bfloat16
    and float16 rows are off mostly by their storage rounding, which the first term bounds.
    """
    eps, tiny = _precision(dtype)
    return max(SUM_TOLERANCE, eps * (1 + V * tiny) + (V - 1) * min(eps / 2, _FLOAT32_ROUNDOFF))


def as_array(x, name: str) -> Tuple[np.ndarray, object]:
    """``x`` as a NumPy array sharing its memory where possible, and the dtype it was stored in.

    A CPU torch tensor becomes a view of its memory (detached first if it requires grad), a tensor
    on another device a copy on the host (the verifiers keep tensors on their device instead:
    multidraft._device);
    bfloat16, which NumPy lacks, is upcast to float32 (exactly). The second value is the dtype
    the caller's values were rounded to (a torch dtype for tensors), which sets the sum tolerance.
    """
    torch = sys.modules.get("torch")  # a tensor exists only if torch was imported: torch stays optional
    if torch is not None and isinstance(x, torch.Tensor):
        if x.device.type == "meta":
            raise ValueError(f"'{name}' is a torch tensor on device 'meta', which holds no values")
        tensor = x.detach().cpu()  # a copy from another device: entry points without a device path
        if tensor.dtype == torch.bfloat16:
            tensor = tensor.float()
        try:
            return tensor.numpy(), x.dtype
        except (RuntimeError, TypeError) as error:  # e.g. sparse or quantised tensors
            raise ValueError(f"'{name}' cannot be read as an array: {error}") from None
    try:
        array = np.asarray(x)
    except Exception as error:  # e.g. ragged lists
        raise ValueError(f"'{name}' must be an array: {error}") from None
    return array, array.dtype


def probabilities(x, name: str, ndims: Sequence[int] = (1, 2)) -> np.ndarray:
    """Check that ``x`` is a probability array and return it normalised: ``x / x.sum(-1)`` in float64.

    ``x``: a float16, float32 or float64 NumPy array (any strides), or a CPU torch tensor of any
    float dtype (bfloat16 included); integer arrays too (exact). The last axis holds
    distributions over the vocabulary; ``ndims`` lists the accepted ranks. Entries must be finite
    and >= 0, and every row must sum to 1 within :func:`sum_tolerance` of the input's dtype and
    V. The result is a new C-contiguous float64 array whose rows are the input's rows divided by
    their float64 sums: the law the core computes with, exactly. ``x`` itself is never modified.
    """
    array, stored = (x, x.dtype) if type(x) is np.ndarray else as_array(x, name)
    if array.dtype not in _CORE_DTYPES and (array.dtype == object or not (
            np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer))):
        raise ValueError(f"'{name}' must be a float16, float32 or float64 array or a torch tensor of floats, "
                         f"got dtype {stored}")
    if array.ndim not in ndims:
        expected = " or ".join(f"{d}-D" for d in ndims)
        raise ValueError(f"'{name}' must be {expected}, got shape {array.shape}")
    if array.shape[-1] == 0 or array.size == 0:
        raise ValueError(f"'{name}' is empty (shape {array.shape})")
    tolerance = sum_tolerance(stored, array.shape[-1])
    if array.dtype in _CORE_DTYPES:  # fast path: the core checks and normalises in one read
        rows = array.reshape(-1, array.shape[-1]) if array.ndim != 2 else array
        normalised = _core.normalised_rows(rows, tolerance)
        if normalised is not None:
            return normalised.reshape(array.shape)
    sums = array.sum(axis=-1, dtype=np.float64)
    if array.min() >= 0 and np.all(np.abs(sums - 1.0) <= tolerance):  # float16, integers; NaN fails min >= 0
        return np.divide(array, sums[..., None], out=np.empty(array.shape), dtype=np.float64)
    if not np.all(np.isfinite(array)):
        where = np.argwhere(~np.isfinite(array))[0]
        raise ValueError(f"'{name}' is not finite at index {tuple(int(i) for i in where)}")
    if np.any(array < 0):
        where = np.argwhere(array < 0)[0]
        raise ValueError(f"'{name}' has a negative entry at index {tuple(int(i) for i in where)}")
    row = np.argwhere(np.atleast_1d(np.abs(sums - 1.0) > tolerance))[0]
    total = float(np.atleast_1d(sums)[tuple(row)])
    where = "" if array.ndim == 1 else f" in row {int(row[0]) if len(row) == 1 else tuple(int(i) for i in row)}"
    raise ValueError(f"'{name}' must sum to 1 within {tolerance:.3g} (the tolerance for {stored} at V = "
                     f"{array.shape[-1]}), but sums to {total!r}{where}")


def probability_scales(x, name: str, ndims: Sequence[int] = (1, 2)) -> Tuple[np.ndarray, np.ndarray]:
    """:func:`probabilities` without the normalised copy where the core can read ``x`` in place.

    Returns ``(rows, scales)``: ``rows`` has the shape of ``x`` and ``scales`` one entry per row
    (the last axis), such that ``rows * scales[..., None]``, entry by entry, is the law
    :func:`probabilities` returns (the same sum, the same one multiplication per entry). A
    C-contiguous float64 NumPy array is returned itself with 1 / its row sums; anything else, or a
    refused array (to raise the same error), goes through :func:`probabilities`, with scales 1.
    """
    if type(x) is np.ndarray and x.dtype == np.float64 and x.flags.c_contiguous and x.ndim in ndims and x.size:
        scales = _core.row_scales(x.reshape(-1, x.shape[-1]), sum_tolerance(x.dtype, x.shape[-1]))
        if scales is not None:
            return x, scales
    rows = probabilities(x, name, ndims)
    return rows, np.ones(rows.size // rows.shape[-1])


def core_tolerances(p, q) -> Optional[Tuple[float, float]]:
    """The sum tolerances of ``p`` and ``q`` when the core's checked calls read them as given
    (``_core.verify_checked`` and its kin: NumPy float32 or float64 arrays of one shape, (V,) or
    (B, V), any strides, checked there in one read per row); None for anything else, which the
    general path (:func:`probabilities`) handles and explains."""
    if not (type(p) is np.ndarray and type(q) is np.ndarray and p.shape == q.shape and p.ndim in (1, 2)
            and p.dtype in _CORE_DTYPES and q.dtype in _CORE_DTYPES and p.size):
        return None
    V = p.shape[-1]
    return sum_tolerance(p.dtype, V), sum_tolerance(q.dtype, V)


def temperature(value, name: str = "temperature") -> float:
    """A finite number > 0, such as a softmax temperature."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) or not np.isfinite(value) \
            or value <= 0:
        raise ValueError(f"'{name}' must be a finite number > 0, got {value!r}")
    return float(value)


def count(n, name: str = "n", minimum: int = 1, maximum: Optional[int] = None) -> int:
    """An integer in [minimum, maximum] (no upper bound without ``maximum``), such as the number of drafts."""
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, numbers.Integral):
        raise ValueError(f"'{name}' must be an integer, got {n!r}")
    if n < minimum:
        raise ValueError(f"'{name}' must be >= {minimum}, got {n}")
    if maximum is not None and n > maximum:
        raise ValueError(f"'{name}' must be <= {maximum}, got {n}")
    return int(n)


def tokens(drafts, V: int, n: Optional[int], name: str = "drafts", ndims: Sequence[int] = (1, 2)) -> np.ndarray:
    """Token ids as a C-contiguous int64 array, each in ``[0, V)``, last axis of length ``n``."""
    array = np.asarray(drafts)
    if array.ndim == 0 and 1 in ndims and n == 1:
        array = array.reshape(1)
    if array.size and array.dtype.kind not in "iu":
        if not (np.issubdtype(array.dtype, np.floating) and np.all(np.isfinite(array)) and np.all(array == np.round(array))):
            raise ValueError(f"'{name}' must hold integer token ids, got dtype {array.dtype}")
    if array.ndim not in ndims:
        expected = " or ".join(f"{d}-D" for d in ndims)
        raise ValueError(f"'{name}' must be {expected}, got shape {array.shape}")
    if n is not None and array.shape[-1] != n:
        raise ValueError(f"'{name}' must hold n = {n} tokens per row, got shape {array.shape}")
    array = np.ascontiguousarray(array, dtype=np.int64)
    if array.size and _largest_as_unsigned(array) >= V:
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
    if isinstance(rng, (list, tuple)) and all(isinstance(s, numbers.Integral) and not isinstance(s, (bool, np.bool_))
                                              for s in rng):
        if any(s < 0 for s in rng):
            raise ValueError("'rng' seeds must be non-negative")
        # as an int seed is taken; NumPy would read ints from 2**63 up, mixed with smaller ones, as floats
        seeds = np.array([int(s) % 2**64 for s in rng], dtype=np.uint64)
    else:
        seeds = np.asarray(rng)
    if seeds.ndim == 1 and np.issubdtype(seeds.dtype, np.integer):
        if seeds.shape[0] != rows:
            raise ValueError(f"'rng' holds {seeds.shape[0]} seeds for {rows} rows")
        if np.any(seeds < 0):
            raise ValueError("'rng' seeds must be non-negative")
        return seeds.astype(np.uint64)
    raise ValueError(f"'rng' must be a numpy Generator, an int seed or a sequence of int seeds, got {type(rng).__name__}")

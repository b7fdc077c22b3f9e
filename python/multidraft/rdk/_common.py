"""Validation helpers shared by the RDK modules ([OOV])."""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from .. import _core
from .. import _validation as check

_rdk = _core.rdk

def no_shared_mass(row: int) -> ValueError:
    """The refusal of TLI for a row whose drafter law puts no mass on the shared set I."""
    return ValueError(f"'q' puts no mass on the shared vocabulary (row {row}): TLI is undefined, draft nothing "
                      "at this position and let the target sample")


def save_arrays(path, kind: str, **arrays) -> None:
    """Write ``arrays`` to the .npz file ``path``, tagged with ``kind`` (the class that reads it)."""
    np.savez(path, multidraft_kind=np.array(kind), **arrays)


def load_arrays(path, kind: str, names: Tuple[str, ...]) -> dict:
    """The arrays ``names`` of a file written by :func:`save_arrays` for ``kind``; ValueError for
    any other file (not a .npz, another kind, a missing array)."""
    refusal = ValueError(f"{path!s} is not a saved {kind}: not a NumPy .npz archive of arrays")
    try:
        data = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError):
        raise refusal from None
    if not isinstance(data, np.lib.npyio.NpzFile):  # a .npy file holds one bare array
        raise refusal
    with data:
        try:
            found = {name: data[name] for name in data.files}
        except ValueError:  # an object array, which only unpickling would read
            raise refusal from None
    if str(found.get("multidraft_kind", "")) != kind or any(name not in found for name in names):
        raise ValueError(f"{path!s} is not a saved {kind}: it holds {sorted(found)}")
    return {name: found[name] for name in names}


def check_block_shape(p_shape, L: int, V: int) -> None:
    """Refuse a draft block whose target laws ``p`` are not (L + 1, V) for L proposals of width V."""
    if tuple(p_shape) != (L + 1, V):
        raise ValueError(f"'p' must be (L + 1, V) = ({L + 1}, {V}), got {tuple(p_shape)}")


def check_mask_shape(q_shape, p_shape) -> None:
    """Refuse a masked drafter law ``q_mask`` whose shape is not that of ``p``."""
    if tuple(q_shape) != tuple(p_shape):
        raise ValueError(f"'q_mask' must have the shape of 'p' {tuple(p_shape)}, got {tuple(q_shape)}")


#: The refusal of a masked drafter law that breaks its rules (the masked baseline, [OOV] Section 1).
MASK_RULE = "'q_mask' must be finite, >= 0 and sum to at most 1 (the masked drafter mass q(I))"


def effective_size(n_eff, V: int) -> float:
    """First-order RDK's N ([OOV] Eq. (3)): ``n_eff``, by default the target vocabulary size V."""
    n_eff = float(V if n_eff is None else n_eff)
    if not np.isfinite(n_eff) or n_eff <= 0:
        raise ValueError(f"'n_eff' must be a positive finite number, got {n_eff!r}")
    return n_eff


def _ids(x, name: str, size: int, allow_missing: bool = False) -> np.ndarray:
    """1-D int64 token ids in [0, size) (or -1 where ``allow_missing``); a tensor is read on the host."""
    array = check.as_array(x, name)[0]
    if array.ndim != 1:
        raise ValueError(f"'{name}' must be 1-D, got shape {array.shape}")
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"'{name}' must hold integer token ids, got dtype {array.dtype}")
    array = np.ascontiguousarray(array, dtype=np.int64)
    low = -1 if allow_missing else 0
    bad = (array < low) | (array >= size)
    if np.any(bad):
        raise ValueError(f"'{name}' has id {int(array[bad][0])} at index {int(np.flatnonzero(bad)[0])} "
                         f"out of range [{low}, {size})")
    return array


def _nonnegative_vector(x, name: str, size: Optional[int] = None) -> np.ndarray:
    array = check.as_array(x, name)[0]
    if array.ndim != 1 or array.size == 0 or not (np.issubdtype(array.dtype, np.floating)
                                                  or np.issubdtype(array.dtype, np.integer)):
        raise ValueError(f"'{name}' must be a non-empty 1-D numeric array, got shape {array.shape}, dtype {array.dtype}")
    array = np.ascontiguousarray(array, dtype=np.float64)
    if size is not None and array.shape[0] != size:
        raise ValueError(f"'{name}' has length {array.shape[0]}, expected {size}")
    if not np.all(np.isfinite(array)) or np.any(array < 0):
        where = int(np.flatnonzero(~np.isfinite(array) | (array < 0))[0])
        raise ValueError(f"'{name}' must be finite and >= 0, got {float(array[where])!r} at index {where}")
    return array


def _rows(x, name: str) -> Tuple[np.ndarray, bool]:
    """Probabilities as (B, V) float64 plus whether the caller passed a batch."""
    array = check.probabilities(x, name)
    return array.reshape(-1, array.shape[-1]), array.ndim == 2


def _unbatch(x: np.ndarray, batched: bool):
    return x if batched else x[0]


def _calibration_samples(samples) -> np.ndarray:
    """Calibration vectors (K, V) as float64 on the host (read once, offline: a tensor is copied)."""
    array = check.as_array(samples, "samples")[0]
    if array.ndim != 2 or not (np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)):
        raise ValueError(f"'samples' must be a 2-D numeric array (contexts, V), got shape {array.shape}, "
                         f"dtype {array.dtype}")
    if array.shape[0] < 2 or array.shape[1] < 1:
        raise ValueError(f"'samples' needs at least 2 contexts and 1 token, got shape {array.shape}")
    array = np.ascontiguousarray(array, dtype=np.float64)
    if not np.all(np.isfinite(array)):
        r, c = np.argwhere(~np.isfinite(array))[0]
        raise ValueError(f"'samples' is not finite at index ({r}, {c})")
    return array

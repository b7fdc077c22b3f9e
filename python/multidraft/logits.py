"""Probabilities from logits, computed in float64 so that users need not normalise at all."""
from __future__ import annotations


import numpy as np

from . import _device
from . import _validation as check


@_device.tensor_route(_device.softmax)
def softmax(logits, temperature: float = 1.0) -> np.ndarray:
    """``softmax(logits / temperature)`` along the last axis, computed in float64.

    ``logits``: (V,) or (B, V), a NumPy array or a torch tensor on any device (then the result is a
    float64 tensor there) of any float dtype (bfloat16
    included) or of integers. A ``-inf`` logit gives probability 0 (e.g. a token masked by top-k).
    ``temperature``: a finite number > 0. Returns a new float64 array of the same shape whose rows
    sum to 1 to float64 rounding, so every entry point accepts it and samples it as it is.

    Raises ValueError for NaN or ``+inf`` logits, a row whose logits are all ``-inf``, a bad
    temperature, or an array of another rank or dtype.
    """
    check.temperature(temperature)
    array, stored = check.as_array(logits, "logits")
    if array.dtype == object or not (np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)):
        raise ValueError(f"'logits' must be an array of floats, got dtype {stored}")
    if array.ndim not in (1, 2) or array.shape[-1] == 0:
        raise ValueError(f"'logits' must be (V,) or (B, V) with V >= 1, got shape {array.shape}")
    if np.any(np.isnan(array) | (array == np.inf)):
        where = np.argwhere(np.isnan(array) | (array == np.inf))[0]
        raise ValueError(f"'logits' has {array[tuple(where)]} at index {tuple(int(i) for i in where)}: "
                         "logits must be finite or -inf")
    top = array.max(axis=-1, keepdims=True).astype(np.float64)
    if np.any(top == -np.inf):
        row = int(np.argwhere(np.atleast_1d(top[..., 0] == -np.inf))[0][0])
        raise ValueError(f"'logits' row {row} is all -inf: no token has a positive probability")
    # Shifting by the row maximum makes every exponent <= 0 and the sum >= 1; an exponent that
    # overflows to -inf (huge logit gaps, tiny temperatures) rightly gives probability 0.
    with np.errstate(over="ignore"):
        probs = np.subtract(array, top, dtype=np.float64)
        probs /= float(temperature)
    np.exp(probs, out=probs)
    probs /= probs.sum(axis=-1, keepdims=True)
    return probs

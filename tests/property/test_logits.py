"""``md.softmax``: logits of any dtype and layout (NumPy float16 / float32 / float64 / integers, CPU
torch float32 / bfloat16), with -inf entries, ties, huge and tiny magnitudes and any temperature,
give float64 rows equal to a float64 reference that every entry point accepts as they are; invalid
logits or temperatures raise ValueError naming them.
"""
import warnings

import numpy as np
import pytest
from hypothesis import given, strategies as st

import multidraft as md

from .strategies import NUMPY_DTYPES, examples, stored_values, to_numpy, torch

LOGIT = st.one_of(st.floats(-50, 50), st.sampled_from((0.0, -np.inf, 1e308, -1e308, 1e-300, 88.7, -745.0)))


@st.composite
def logits(draw):
    """(B, V) or (V,) finite-or--inf logits, not all -inf in a row, in some dtype and layout."""
    V, batched = draw(st.integers(1, 6)), draw(st.booleans())
    rows = [draw(st.lists(LOGIT, min_size=V, max_size=V)) for _ in range(draw(st.integers(1, 3)) if batched else 1)]
    x = np.array(rows)
    for row in x:
        if np.all(row == -np.inf):
            row[draw(st.integers(0, V - 1))] = 0.0
    x = x if batched else x[0]
    kind = draw(st.sampled_from(("numpy", "numpy", "int", "strided") + (("torch",) if torch else ())))
    if kind == "int":
        return np.clip(np.nan_to_num(x, neginf=-1000), -1000, 1000).astype(np.int64)
    if kind == "torch":
        return torch.from_numpy(x).to(draw(st.sampled_from((torch.float32, torch.bfloat16))))
    dtype = draw(st.sampled_from(NUMPY_DTYPES))
    with np.errstate(over="ignore"):
        x = x.astype(dtype)
    x[np.isinf(x) & (x > 0)] = np.finfo(dtype).max  # huge logits that overflowed the dtype
    if kind == "strided":
        buffer = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), dtype=dtype)
        buffer[..., ::2] = x
        return buffer[..., ::2]
    return x


def reference_softmax(x, temperature):
    """exp((x - max) / T) / sum in float64 from the stored values (longdouble where the platform has it)."""
    values = stored_values(x).astype(np.longdouble)
    with np.errstate(over="ignore", invalid="ignore"):
        shifted = (values - values.max(axis=-1, keepdims=True)) / np.longdouble(temperature)
    e = np.exp(shifted)
    return (e / e.sum(axis=-1, keepdims=True)).astype(np.float64)


@examples(2.0)
@given(x=logits(), temperature=st.one_of(st.floats(1e-3, 1e3), st.sampled_from((1.0, 1e-300, 1e300, 0.5))))
def test_softmax_rows_are_exact_and_accepted(x, temperature):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow or division warnings, whatever the magnitudes
        probs = to_numpy(md.softmax(x, temperature)).astype(np.float64)
    values = stored_values(x)
    assert probs.shape == values.shape and np.all(np.isfinite(probs)) and probs.min() >= 0
    np.testing.assert_allclose(probs.sum(axis=-1), 1.0, rtol=0, atol=4 * values.shape[-1] * np.finfo(float).eps)
    np.testing.assert_allclose(probs, reference_softmax(x, temperature), rtol=1e-12, atol=1e-300)
    assert not probs[values == -np.inf].any(), "a -inf logit has positive probability"
    top = values == values.max(axis=-1, keepdims=True)
    assert np.all(probs[top] == np.broadcast_to(probs.max(axis=-1, keepdims=True), probs.shape)[top])
    q = probs if probs.ndim == 1 else probs[0]
    md.draft_scheme(q, 1)  # accepted as it is by every entry point
    if probs.ndim == 2:
        for b in range(len(probs)):
            np.testing.assert_array_equal(to_numpy(md.softmax(x[b], temperature)), probs[b])


BAD_LOGITS = [np.array([np.nan, 0.0]), np.array([np.inf, 0.0]), np.array([-np.inf, -np.inf]),
              np.array([[0.0, 1.0], [-np.inf, -np.inf]]), np.zeros(0), np.zeros((1, 1, 2)), np.float64(1.0),
              np.array([0, 1], dtype=complex), np.array(["a", "b"]), np.array([True, False])]


@examples(1.0)
@given(bad=st.sampled_from(BAD_LOGITS), torch_tensor=st.booleans())
def test_softmax_refuses_invalid_logits(bad, torch_tensor):
    if torch_tensor and torch is not None and bad.dtype.kind in "fc" and bad.ndim:
        bad = torch.from_numpy(bad)
    with pytest.raises(ValueError, match="'logits'"):
        md.softmax(bad)


@examples(0.5)
@given(temperature=st.sampled_from((0.0, -1.0, np.nan, np.inf, -np.inf, True, "1", None, 1j)))
def test_softmax_refuses_invalid_temperatures(temperature):
    with pytest.raises(ValueError, match="'temperature'"):
        md.softmax(np.zeros(3), temperature)

"""Hypothesis strategies shared by the property tests, and the helpers that read results back.

A probability row is drawn in two steps: its float64 values (random, one-hot, ties, uniform,
with zeros, denormals and 1e-300 masses, or 1 ulp off a sum of 1), then how a user stores it
(NumPy float16 / float32 / float64 or a CPU torch float32 / bfloat16 tensor; contiguous, strided,
reversed, Fortran-ordered). The law every entry point must use is the stored values divided by
their float64 sum (:func:`law`), whatever the storage. p = TARGET, q = DRAFT ([GR] notation).
"""
import numpy as np
from hypothesis import settings
from hypothesis import strategies as st

try:  # tensors are one more storage where torch is installed (the hf extra); test_torch.py needs it
    import torch
except ImportError:  # pragma: no cover - the NumPy properties hold without torch
    torch = None

#: Losslessness and acceptance are exact up to float64 rounding (as in tests/core/test_lossless.py).
TOL = 1e-9

#: Tiny masses: float64 denormals, half and all of the smallest normal number, 1e-300, 1e-200, 1e-30.
TINY64 = (5e-324, np.finfo(np.float64).tiny / 2, 1e-300, np.finfo(np.float64).tiny, 1e-200, 1e-30)

NUMPY_DTYPES = (np.float16, np.float32, np.float64)
TORCH_DTYPES = (torch.float32, torch.bfloat16) if torch else ()
LAYOUTS_1D = ("contiguous", "strided", "reversed")
LAYOUTS_2D = LAYOUTS_1D + ("fortran",)


def examples(fraction: float):
    """Settings with ``fraction`` of the profile's ``max_examples`` (at least 2), for costly tests."""
    return settings(max_examples=max(2, int(settings.default.max_examples * fraction)))


def to_numpy(x):
    """A result as NumPy, whether the package returned NumPy, a Python scalar or a torch tensor
    (tensors on the input's device are the coming API; bfloat16 read as float32, exactly)."""
    if isinstance(x, tuple):
        return tuple(to_numpy(item) for item in x)
    if torch is not None and isinstance(x, torch.Tensor):
        x = x.detach().cpu()
        return np.asarray(x.float() if x.dtype == torch.bfloat16 else x)
    return np.asarray(x)


def stored_values(x) -> np.ndarray:
    """The values of an input as stored, in float64 (exact for every dtype used here)."""
    if torch is not None and isinstance(x, torch.Tensor):
        return x.detach().double().cpu().numpy()
    return np.asarray(x, dtype=np.float64)


def law(x) -> np.ndarray:
    """The law an entry point must use for input ``x``: each row divided by its float64 sum."""
    values = stored_values(x)
    return values / values.sum(axis=-1, keepdims=True)


# ----------------------------------------------------------------------------- float64 values

@st.composite
def weights(draw, V: int) -> np.ndarray:
    """A normalised float64 row of length V; every shape of mass the verifiers must handle."""
    kind = draw(st.sampled_from(("random", "random", "onehot", "ties", "uniform", "sparse")))
    if kind == "onehot":
        w = np.zeros(V)
        w[draw(st.integers(0, V - 1))] = 1.0
    elif kind == "uniform":
        w = np.ones(V)
    elif kind == "ties":  # few distinct levels: equal entries and equal ratios p/q
        w = np.array(draw(st.lists(st.sampled_from((0.0, 1.0, 2.0, 4.0)), min_size=V, max_size=V)))
    elif kind == "sparse":  # exact zeros
        w = np.array(draw(st.lists(st.sampled_from((0.0, 0.0, 0.3, 0.7)), min_size=V, max_size=V)))
    else:
        w = np.array(draw(st.lists(st.floats(0.0, 1.0), min_size=V, max_size=V)))
    if not w.sum() > 0:
        w[draw(st.integers(0, V - 1))] = 1.0
    return w / w.sum()


@st.composite
def adversarial(draw, row: np.ndarray) -> np.ndarray:
    """``row`` with some entries replaced by tiny masses (denormals, 1e-300) and its sum possibly
    moved by 1 ulp: the largest entry absorbs both, so the row still sums to 1 within an ulp or two."""
    row = row.copy()
    top = int(np.argmax(row))
    others = [i for i in range(len(row)) if i != top]
    if others and draw(st.booleans()):
        for i in draw(st.lists(st.sampled_from(others), max_size=len(others), unique=True)):
            row[i] = draw(st.sampled_from(TINY64))
        row[top] += 1.0 - row.sum()
    ulps = draw(st.sampled_from((0, 0, 1, -1, 2)))
    for _ in range(abs(ulps)):
        row[top] = np.nextafter(row[top], np.inf if ulps > 0 else -np.inf)
    return row


def row(V: int):
    """A float64 probability row of length V, adversarial values included."""
    return weights(V).flatmap(adversarial)


@st.composite
def pair(draw, V: int, q_rows: int = 0):
    """(p, q) float64 with a relation between them: independent, p == q, disjoint supports, q one-hot,
    or q a permutation of p (ties in the ratios p/q). ``q_rows`` > 0: q is (q_rows, V) (one row per
    draft model), the relation holding for its first row."""
    p = draw(row(V))
    relation = draw(st.sampled_from(("independent", "independent", "equal", "disjoint", "onehot", "permuted")))
    if relation == "equal":
        q = p.copy()
    elif relation == "disjoint" and V >= 2:
        inside = np.array(draw(st.lists(st.booleans(), min_size=V, max_size=V)))
        if inside.all() or not inside.any():
            inside[: V // 2 or 1], inside[V // 2 or 1:] = True, False
        p = np.where(inside, draw(weights(V)) + 1e-3, 0.0)
        q = np.where(inside, 0.0, draw(weights(V)) + 1e-3)
        p, q = p / p.sum(), q / q.sum()
    elif relation == "onehot":
        q = np.eye(V)[draw(st.integers(0, V - 1))]
    elif relation == "permuted":
        q = p[draw(st.permutations(range(V)))]
    else:
        q = draw(row(V))
    if q_rows:
        q = np.stack([q] + [draw(row(V)) for _ in range(q_rows - 1)])
    return p, q


# ----------------------------------------------------------------------------- storage

def _cast(values: np.ndarray, dtype, repair: bool = True) -> np.ndarray:
    """``values`` rounded to a NumPy dtype; with ``repair``, an all-zero row (all mass underflowed)
    gets its largest entry back as 1, so that the stored row is still a distribution."""
    out = values.astype(dtype)
    if not repair or out.size == 0:
        return out
    rows = out.reshape(-1, out.shape[-1])
    for r, source in zip(rows, values.reshape(-1, values.shape[-1])):
        if not np.any(r):
            r[np.argmax(source)] = 1
    return out


def _numpy_layout(values: np.ndarray, layout: str) -> np.ndarray:
    """An array holding ``values`` in ``layout`` (a view of a larger buffer where not contiguous)."""
    if layout == "strided":
        buffer = np.zeros(values.shape[:-1] + (2 * values.shape[-1],), dtype=values.dtype)
        buffer[..., ::2] = values
        return buffer[..., ::2]
    if layout == "reversed":
        return np.ascontiguousarray(values[..., ::-1])[..., ::-1]
    if layout == "fortran":
        return np.asfortranarray(values)
    return np.ascontiguousarray(values)


def _torch_layout(values: np.ndarray, dtype, layout: str):
    tensor = torch.from_numpy(np.ascontiguousarray(values)).to(dtype)
    if layout == "strided":
        buffer = torch.zeros(values.shape[:-1] + (2 * values.shape[-1],), dtype=dtype)
        buffer[..., ::2] = tensor
        return buffer[..., ::2]
    if layout == "fortran":
        return tensor.transpose(-1, -2).contiguous().transpose(-1, -2)
    if layout == "reversed":
        return tensor.flip(-1).contiguous().flip(-1)  # flip copies: torch has no negative strides
    return tensor


@st.composite
def stored(draw, values: np.ndarray, torch_allowed: bool = True, dtypes=None, repair: bool = True):
    """``values`` (float64, any rank) as a user stores them: a NumPy or CPU torch array of some dtype
    and layout. ``dtypes``: restrict to these NumPy dtypes (no torch). ``repair``: see :func:`_cast`
    (off for deliberately invalid rows)."""
    layouts = LAYOUTS_2D if values.ndim >= 2 else LAYOUTS_1D
    layout = draw(st.sampled_from(layouts))
    if dtypes is None and torch_allowed and TORCH_DTYPES and draw(st.integers(0, 3)) == 0:
        dtype = draw(st.sampled_from(TORCH_DTYPES))
        rounded = stored_values(torch.from_numpy(values).to(dtype))
        return _torch_layout(_cast(rounded, np.float64, repair), dtype, layout)
    dtype = draw(st.sampled_from(dtypes or NUMPY_DTYPES))
    return _numpy_layout(_cast(values, dtype, repair), layout)


class Instance:
    """One (p, q, n) of a draft scheme as passed to the package, with the oracle's float64 laws."""

    def __init__(self, p, q, n: int, scheme: str):
        self.p, self.q, self.n, self.scheme = p, q, n, scheme

    @property
    def V(self) -> int:
        return int(self.p.shape[-1])

    @property
    def p64(self) -> np.ndarray:
        return law(self.p)

    @property
    def q64(self) -> np.ndarray:
        return law(self.q)

    def __repr__(self) -> str:
        def show(x):  # dtype, layout and exact values: enough to rebuild a failing input
            return f"{type(x).__name__}[{x.dtype}, strides {tuple(x.stride() if hasattr(x, 'stride') else x.strides)}]" \
                   f"({stored_values(x).tolist()!r})"
        return f"Instance(scheme={self.scheme!r}, n={self.n}, p={show(self.p)}, q={show(self.q)})"


@st.composite
def instance(draw, scheme: str = "iid", ns=(1, 2, 3), V=(1, 6), torch_allowed: bool = True, dtypes=None):
    """A small instance of a draft scheme (V in the range ``V``, n in ``ns``) for exact enumeration."""
    n = draw(st.sampled_from(ns))
    V = draw(st.integers(*V))
    p, q = draw(pair(V, q_rows=n if scheme == "independent" else 0))
    return Instance(draw(stored(p, torch_allowed, dtypes)), draw(stored(q, torch_allowed, dtypes)), n, scheme)

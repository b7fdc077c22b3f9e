"""Draft schemes: how the ``n`` draft tokens are drawn, with exact tuple probabilities.

``"iid"``: n independent draws from one draft ``q`` (V,); ``"without_replacement"``: n ordered
draws from ``q`` without replacement (probability prod_j q(w_j) / (Q - sum_{l<j} q(w_l)),
Q = sum(q)); ``"independent"``: one draw from each of n draft models, ``qs`` of shape (n, V);
``"hub"``: SpecHub's pairs (n = 2): with a = argmax q, (x, a) with probability q(x) and (a, x)
with probability q(a) q(x) / (1 - q(a)); ``"topk"``: the n most probable tokens of ``q``, most
probable first, ties by lowest id (deterministic: the tuple has probability 1; the token trees of
EAGLE and SGLang).
"""
from __future__ import annotations

import itertools
import warnings
from typing import Optional, Tuple

import numpy as np

from . import _core
from . import _validation as check

SCHEME_KINDS = ("iid", "without_replacement", "independent", "hub", "topk")

#: Largest number of tuples :meth:`DraftScheme.enumerate` will list.
MAX_ENUMERATED_TUPLES = 10**7


def scheme_kind(kind: str, name: str = "scheme") -> str:
    if kind not in SCHEME_KINDS:
        raise ValueError(f"'{name}' must be one of {SCHEME_KINDS}, got {kind!r}")
    return kind


def renamed_scheme(scheme: Optional[str], kind: Optional[str]) -> str:
    """The draft scheme of a call that accepts the deprecated ``kind=`` spelling of ``scheme=``
    (default ``"iid"``)."""
    if kind is None:
        return "iid" if scheme is None else scheme
    warnings.warn("'kind' is deprecated: name the draft scheme with 'scheme='", DeprecationWarning, stacklevel=3)
    if scheme is not None:
        raise ValueError("give the draft scheme once: 'scheme' (or the deprecated 'kind'), not both")
    return kind


def _normalised(x, name: str, ndims=(1, 2)):
    """:func:`_validation.probabilities` in the form of :func:`_validation.probability_scales`."""
    return check.probabilities(x, name, ndims), None


def batched_inputs(p, q, n: Optional[int], kind: str, scales: Optional[list] = None):
    """Validate target(s) and draft(s) for a scheme and return the core's batched layout.

    Returns ``(p2, q3, n, batched)``: ``p2`` (B, V), ``q3`` (B, rows, V) with rows = n for
    independent drafts and 1 otherwise, and whether the caller passed a batch. With a list
    ``scales``, ``p2`` and ``q3`` may be the caller's arrays, unnormalised, and their row scales
    (B,) are appended to the list (:func:`_validation.probability_scales`; independent drafts,
    whose n draft rows would need a scale each, are normalised, with scales 1).
    """
    kind = scheme_kind(kind)
    read = _normalised if scales is None else check.probability_scales
    p, p_scale = read(p, "p")
    batched = p.ndim == 2
    if kind == "independent":
        q = check.probabilities(q, "q", ndims=(p.ndim + 1,))
        q_scale = np.ones(p.size // p.shape[-1])
        if n is not None and check.count(n) != q.shape[-2]:
            raise ValueError(f"'n' = {n} does not match the {q.shape[-2]} draft rows of 'q'")
        n = q.shape[-2]
    else:
        q, q_scale = read(q, "q", ndims=(p.ndim,))
        if n is None:
            raise ValueError("'n' (the number of drafts) is required unless 'q' holds one row per draft model")
        n = check.count(n)
    check.same_vocabulary(p.shape[-1], q, "q")
    if batched and q.shape[0] != p.shape[0]:
        raise ValueError(f"'q' has batch size {q.shape[0]}, but 'p' has {p.shape[0]}")
    if scales is not None:
        scales += [p_scale, q_scale]
    B, V = (p.shape[0] if batched else 1), p.shape[-1]
    return p.reshape(B, V), q.reshape(B, -1, V), n, batched


def draft_seed(kind: str, rng: check.RngLike) -> int:
    """The seed :meth:`DraftScheme.sample` draws a tuple of scheme ``kind`` with: one from ``rng``
    (:func:`_validation.row_seeds`), but 0 for ``"topk"``, whose drafts are deterministic, so that
    a Generator is not advanced. Drawing the seeds of several draws first (in their order) and
    passing them as ints gives the draws the Generator would give."""
    if kind == "topk" and isinstance(rng, np.random.Generator):
        return 0  # deterministic drafts: leave the caller's generator where it is
    return int(check.row_seeds(rng, 1)[0])


class DraftScheme:
    """A draft scheme over a vocabulary of size ``V``: its ``kind`` (the name given as ``scheme=``),
    ``n`` and the draft law ``q``.

    ``q`` is (V,) for ``"iid"``, ``"without_replacement"``, ``"hub"`` and ``"topk"``, and (n, V)
    for ``"independent"``. Degenerate laws are drawable: without replacement from a support of
    k < n tokens, the first k drafts are the whole support (in the sequential order above) and
    the remaining n - k drafts repeat the k-th; the top-n drafts of such a support are its k
    tokens by decreasing q, then n - k repeats of the k-th; the hub scheme with a one-token
    support draws that token twice. ``kind=`` is the deprecated spelling of ``scheme=``.
    """

    def __init__(self, q, n: Optional[int] = None, scheme: Optional[str] = None, *, kind: Optional[str] = None):
        self.kind = scheme_kind(renamed_scheme(scheme, kind), "scheme")
        if self.kind == "independent":
            q = check.probabilities(q, "q", ndims=(2,))
            if n is not None and check.count(n) != q.shape[0]:
                raise ValueError(f"'n' = {n} does not match the {q.shape[0]} draft rows of 'q'")
            n = q.shape[0]
        else:
            q = check.probabilities(q, "q", ndims=(1,))
            if n is None:
                raise ValueError("'n' (the number of drafts) is required")
            n = check.count(n)
        self._assign(q, n)

    @classmethod
    def _from_batched(cls, q3: np.ndarray, n: int, kind: str) -> "DraftScheme":
        """The scheme of the first row of :func:`batched_inputs`' ``q3``, already validated there
        (one pass over ``q`` per call instead of two)."""
        scheme = cls.__new__(cls)
        scheme.kind = kind
        scheme._assign(q3[0] if kind == "independent" else q3[0, 0], n)
        return scheme

    def _assign(self, q: np.ndarray, n: int) -> None:
        self.n: int = n
        self.V: int = q.shape[-1]
        # Validation returned a normalised copy, never the caller's array: freeze it for the plan's lifetime.
        self.q: np.ndarray = q
        self.q.setflags(write=False)
        if self.kind != "iid":  # n >= 1 i.i.d. draws are possible from every q
            # Let the core refuse impossible schemes (e.g. too few tokens to draw without replacement).
            _core.tuple_probability(self.q, self.kind, self.n, np.zeros((0, self.n), dtype=np.int64))

    def __repr__(self) -> str:
        return f"DraftScheme(scheme={self.kind!r}, n={self.n}, V={self.V})"

    def probability(self, drafts) -> float:
        """Exact probability of the ordered draft tuple ``drafts`` (n,)."""
        drafts = check.tokens(drafts, self.V, self.n, ndims=(1,))
        return float(_core.tuple_probability(self.q, self.kind, self.n, drafts.reshape(1, -1))[0])

    def check_drawable(self, drafts: np.ndarray) -> None:
        """Raise ValueError unless every tuple of ``drafts`` (M, n) int64 has positive probability
        (the core's one check, that of every verifier)."""
        _core.check_drawable(self.q, self.kind, self.n, drafts)

    def sample(self, rng: check.RngLike = None) -> np.ndarray:
        """One draft tuple (n,) int64, drawn by the core's generator seeded from ``rng`` (``"topk"``:
        the one tuple, ``rng`` unused: a Generator is not advanced)."""
        seeds = np.array([draft_seed(self.kind, rng)], dtype=np.uint64)
        return _core.sample_drafts(self.q.reshape(1, -1, self.V), self.kind, self.n, seeds)[0]

    def support(self) -> np.ndarray:
        """Tokens that some draft can take, ascending."""
        if self.kind == "topk":  # only the top-n, not every token of positive q
            return np.unique(self.sample(0))
        rows = self.q.reshape(-1, self.V)
        return np.flatnonzero(np.any(rows > 0, axis=0))

    def enumerate(self) -> Tuple[np.ndarray, np.ndarray]:
        """All tuples with positive probability, (M, n) int64, and their probabilities (M,)."""
        support = self.support()
        total = float(len(support)) ** self.n
        if total > MAX_ENUMERATED_TUPLES:
            raise ValueError(
                f"enumerating {len(support)}**{self.n} = {total:.3g} draft tuples is too large "
                f"(limit {MAX_ENUMERATED_TUPLES:g}, multidraft.schemes.MAX_ENUMERATED_TUPLES)"
            )
        tuples = np.array(list(itertools.product(support, repeat=self.n)), dtype=np.int64).reshape(-1, self.n)
        probabilities = _core.tuple_probability(self.q, self.kind, self.n, tuples)
        keep = probabilities > 0
        return tuples[keep], probabilities[keep]


def draft_scheme(q, n: Optional[int] = None, scheme: Optional[str] = None, *,
                 kind: Optional[str] = None) -> DraftScheme:
    """Build a :class:`DraftScheme`; ``scheme`` is one of ``SCHEME_KINDS`` (default ``"iid"``).

    ``kind=`` is the deprecated spelling of ``scheme=`` (a DeprecationWarning).
    """
    return DraftScheme(q, n, renamed_scheme(scheme, kind))

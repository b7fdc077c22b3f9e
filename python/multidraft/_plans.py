"""The plan classes every OTLP method returns: :class:`OTLPPlan` (the interface, exported as
``multidraft.OTLPPlan``) and the plans the C++ core holds. Both :mod:`multidraft.otlp` and
:mod:`multidraft.global_resolution` build on them, so they live here, below both."""
from __future__ import annotations

from typing import Optional

import numpy as np

from . import _core
from . import _validation as check
from .schemes import DraftScheme


def draft_kind(p, q, scheme: Optional[str]) -> str:
    """The scheme named by the caller, else "independent" when q has one row per draft model."""
    if scheme is not None:
        return scheme
    return "independent" if np.ndim(q) == np.ndim(p) + 1 else "iid"


class OTLPPlan:
    """A transport plan for one (target, draft scheme) pair: what :func:`solve_otlp` returns.

    Attributes: ``alpha`` (its acceptance), ``alpha_star`` (the optimum), ``method``, ``scheme``
    (a DraftScheme), ``success`` (the plan met its guarantee), ``law_error_bound`` (bound on the
    L1 distance of the output law from p beyond rounding), ``l1_bound`` (the same bound for
    [GR]'s raw plan) and ``acceptance_bound`` (bound on alpha_star - alpha). Exact methods have
    ``alpha == alpha_star``, ``success`` True and the bounds 0;
    :class:`multidraft.GlobalResolution` sets its own.
    ``transport(drafts)``: the output law pi(. | drafts), (V,) for drafts (n,), (M, V) for (M, n).
    ``sample(drafts, rng)``: one verified token drawn from that law.
    """

    success = True
    law_error_bound = 0.0
    l1_bound = 0.0
    acceptance_bound = 0.0

    def __init__(self, p: np.ndarray, scheme: DraftScheme, method: str, alpha: float):
        self.p = p
        self.scheme = scheme
        self.method = method
        self.alpha = float(alpha)
        self.alpha_star = self.alpha  # exact plans; GlobalResolution sets its own

    def __repr__(self) -> str:
        return f"OTLPPlan(method={self.method!r}, scheme={self.scheme!r}, alpha={self.alpha:.12g})"

    def _slices(self, drafts: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _drawable(self, drafts, ndims=(1, 2)) -> np.ndarray:
        """Validated drafts as (M, n), refused unless every tuple can be drawn (its law is undefined)."""
        drafts = check.tokens(drafts, self.scheme.V, self.scheme.n, ndims=ndims).reshape(-1, self.scheme.n)
        self.scheme.check_drawable(drafts)
        return drafts

    def transport(self, drafts) -> np.ndarray:
        laws = self._slices(self._drawable(drafts))
        return laws if np.ndim(drafts) == 2 else laws[0]

    def sample(self, drafts, rng: check.RngLike = None) -> int:
        law = self._slices(self._drawable(drafts, ndims=(1,)))
        return int(_core.sample_rows(law, check.row_seeds(rng, 1))[0])


class _CorePlan(OTLPPlan):
    """A plan held by the C++ core (max-flow methods)."""

    def __init__(self, p, scheme, method, core_plan):
        super().__init__(p, scheme, method, core_plan.alpha)
        self._core = core_plan

    def _drawable(self, drafts, ndims=(1, 2)) -> np.ndarray:
        """Validated drafts as (M, n); the core plan refuses undrawable tuples itself (check_drawable)."""
        return check.tokens(drafts, self.scheme.V, self.scheme.n, ndims=ndims).reshape(-1, self.scheme.n)

    def _slices(self, drafts):
        return self._core.transport(drafts, self.scheme.V)

    def sample(self, drafts, rng: check.RngLike = None) -> int:
        return int(self._core.sample(self._drawable(drafts, ndims=(1,)), check.row_seeds(rng, 1), self.scheme.V)[0])

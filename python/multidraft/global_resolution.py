"""Global Resolution ([GR] Section 6, Algorithm 1): near-optimal multi-draft verification for n
i.i.d. drafts at the speed of a few passes over the draft support, exactly lossless by default.

Notation: ``p`` target, ``q`` draft.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from . import _core
from . import _validation as check
from ._plans import _CorePlan, draft_kind
from .schemes import DraftScheme, batched_inputs


class GlobalResolution(_CorePlan):
    """Algorithm 1 of [GR] for target ``p`` (V,) and n i.i.d. drafts from ``q`` (V,).

    By default (``exact=True``) the plan is **exactly lossless**: [GR]'s plan proposes a draft
    whose law r is computed exactly (the convex systems' rows on the truncation sets T; tuples
    outside them propose their first draft outside T, whose law is closed form); the proposal is
    kept with probability min(1, p / r), otherwise the token is drawn from (p - r)^+ normalised.
    The output law is then p up to float rounding (plus ``law_error_bound``, the certified error
    of interpolated sums, about 1e-10 at most and 0 when every sum was enumerated), and
    ``0 <= alpha_star - alpha <= alpha_star - kept <= acceptance_bound`` (<= 10 tau when
    ``success``).
    ``exact=False`` gives the raw plan of [GR] Eq. (18), whose output law is only within
    ``l1_bound`` (<= 15 tau when ``success``) of ``p`` in L1, for reproducing the paper.

    Attributes:
        alpha: acceptance of this plan, P(output is one of the drafts), as for every other
            plan (and ``verifier('global_resolution').acceptance``): with ``exact=True`` the kept
            proposals plus the residual draws that land on a draft; with ``exact=False`` the raw
            plan's; with a fallback, alpha*. Exact in float64 (within ``alpha_error_bound``).
        kept: the probability that the proposal is kept, sum_y min(r(y), p(y)) (``exact=True``;
            what ``alpha`` meant before it counted the residual's drafts), or the Eq. (18)
            accepted mass (``exact=False``); ``kept <= alpha``. With a fallback, alpha*.
        alpha_error_bound: a certified bound on ``|alpha - P(output in drafts)|``: 0 unless a
            truncation set held more subsets of up to n tokens than the acceptance enumerates
            (about 50 us of work: ``|T|`` up to 81 at n = 2, 13 at n = 4, 8 at n = 8), where a
            second-order part of alpha is bounded instead (docs/design/output-correction.md,
            "Acceptance"). 0 for the raw plan, whose inner accepted mass is the solve's own sum
            (exact when enumerated; interpolated sums carry their uncertified error).
        alpha_star: the optimal acceptance (subset selection, exact).
        exact: whether the output correction is on.
        law_error_bound: ``exact=True``: L1 bound on the output law's distance from ``p`` beyond
            float rounding (0 unless sums were interpolated); ``exact=False``: ``l1_bound``.
        success: both convex systems met their stopping rule within the work budget.
        l1_bound: the Lemma 6.6 bound a + 2b achieved on the L1 distance between the raw plan's
            output marginal and ``p`` (<= 15 tau when ``success``).
        acceptance_bound: a + b, the bound on ``|alpha - alpha_star|`` (raw plan) and on
            alpha_star - alpha (exact plan).
        diagnostics: per system ("outer", "inner"): ``|T|``, grouped terms, eps_T / gamma_T,
            achieved gradient L1 norm (a bound on it when the terms were summed rather than
            enumerated, ``interpolated``), threshold, Newton iterations, convergence.
        used_fallback: True when ``fallback=True`` and the bound was not met, in which case
            ``transport`` and ``sample`` use the exact complementary-slackness max-flow plan
            (and ``alpha`` and ``kept`` are its acceptance, alpha*).

    Options: ``tau`` (> 0), ``max_iterations`` (Newton), ``max_terms`` (work budget per system:
    the grouped terms a Newton pass may enumerate; for n = 2 to 6 every term can be summed without
    enumeration (n = 2's pairs by interpolation, any size by a Laplace-transform quadrature) and
    does not count unless a point needs it enumerated; T is never capped by size),
    ``paper_threshold`` (Algorithm 1's 5 tau stopping threshold instead of the corrected
    5 tau - 3 eps_T), ``fallback``, ``exact``.
    """

    def __init__(self, p, q, n: int, tau: float = 1e-3, *, exact: bool = True, fallback: bool = False,
                 max_iterations: int = 50, max_terms: float = 2e6, paper_threshold: bool = False,
                 scheme: Optional[str] = None):
        kind = draft_kind(p, q, scheme)
        # A p of no valid rank only looks like independent drafts to draft_kind: batched_inputs names it.
        if kind != "iid" and (scheme is not None or np.ndim(p) in (1, 2)):
            raise ValueError(f"GlobalResolution needs i.i.d. drafts (Lemma 6.3 uses Q(H)^n); got scheme {kind!r}: "
                             "use solve_otlp(..., method='maxflow_cs') for other draft schemes")
        p2, q3, n, batched = batched_inputs(p, q, n, "iid")
        if batched:
            raise ValueError("'p' must be 1-D for GlobalResolution: a plan serves one (target, draft) pair")
        if not (isinstance(tau, (int, float)) and np.isfinite(tau) and 0 < tau < 1):
            raise ValueError(f"'tau' must be in (0, 1), got {tau!r}")
        check.count(max_iterations, "max_iterations", minimum=0)
        draft = DraftScheme._from_batched(q3, n, kind)
        if not isinstance(exact, (bool, np.bool_)):
            raise ValueError(f"'exact' must be True or False, got {exact!r}")
        plan = _core.GlobalResolutionPlan(p2[0], draft.q, n, float(tau), int(max_iterations), float(max_terms),
                                          bool(paper_threshold), bool(exact))
        used_fallback = bool(fallback and not plan.success)
        core = _core.SlacknessPlan(p2[0], draft.q, "iid", n) if used_fallback else plan  # the exact plan instead
        super().__init__(p2[0], draft, "global_resolution", core)
        self.tau = float(tau)
        self.alpha_star = plan.alpha_star
        self.success = bool(plan.success)
        self.l1_bound = float(plan.l1_bound)
        self.acceptance_bound = float(plan.acceptance_bound)
        self.exact = bool(exact)
        self.diagnostics = plan.diagnostics
        self.used_fallback = used_fallback
        self.law_error_bound = 0.0 if used_fallback else float(plan.law_error_bound) if exact else self.l1_bound
        self.kept = self.alpha if used_fallback else float(plan.kept)
        self.alpha_error_bound = 0.0 if used_fallback else float(plan.alpha_error_bound)

    def __repr__(self) -> str:
        return (f"GlobalResolution(tau={self.tau:g}, exact={self.exact}, alpha={self.alpha:.9g}, kept={self.kept:.9g}, "
                f"alpha_star={self.alpha_star:.9g}, success={self.success}, l1_bound={self.l1_bound:.3g}, "
                f"used_fallback={self.used_fallback})")

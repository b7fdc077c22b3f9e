"""Optimal acceptance (subset selection) and exact OTLP plans ([GR], Sections 3 and 5).

Notation: ``p`` is the target distribution, ``q`` the draft distribution.
"""
from __future__ import annotations

import inspect
from typing import Optional, Tuple, Union

import numpy as np

from . import _core, _device
from . import _validation as check
from ._plans import _CorePlan, OTLPPlan, draft_kind
from .global_resolution import GlobalResolution
from .schemes import DraftScheme, batched_inputs

#: Largest network (arcs) the max-flow solvers build; larger requests raise ValueError.
MAX_NETWORK_ARCS = int(_core.MAX_NETWORK_ARCS)
#: Largest OTLP the ``"lp"`` method hands to SciPy HiGHS (variables).
MAX_LP_VARIABLES = 2_000_000

#: Exact methods of :func:`solve_otlp` (and of ``verifier("otlp")``), the default first.
EXACT_METHODS = ("maxflow_cs", "maxflow", "lp")
#: Methods of :func:`solve_otlp`.
OTLP_METHODS = EXACT_METHODS + ("global_resolution",)

# The plan interface lives in _plans (global_resolution builds on it too); its public home stays
# here, which repr, pickle and the API reference's inventory show.
OTLPPlan.__module__ = __name__


def _unbatch(values: np.ndarray, batched: bool):
    return values if batched else values[0]


@_device.tensor_route(_device.acceptance_rate)
def acceptance_rate(p, q) -> Union[float, np.ndarray]:
    """Single-draft optimal acceptance ``sum_i min(p_i, q_i)``.

    ``p``, ``q``: (V,) or (B, V). Returns a float, or (B,) for a batch (float64 tensors on their
    device for tensor input).
    """
    tolerances = check.core_tolerances(p, q)
    if tolerances is not None:  # checked and summed in the core: two reads of p and q, no copies
        out = _core.acceptance_rate_checked(p, q, *tolerances)
        if out is not None:
            return out if p.ndim == 2 else float(out[0])
    p2, q3, _, batched = batched_inputs(p, q, 1, "iid")
    out = _core.acceptance("sps", p2, q3, 1)  # the registry's single-draft acceptance, the same sum
    return out if batched else float(out[0])


@_device.tensor_route(_device.optimal_subset)
def optimal_subset(p, q, n: Optional[int] = None, *, scheme: Optional[str] = None) -> Tuple:
    """``(alpha*, H*)``: optimal acceptance ``1 + min_H psi(H)`` and the smallest minimiser ([GR] Eq. 4).

    ``psi(H) = P(H) - p_draft(H^n)``. i.i.d. drafts (``q`` (V,), ``n``): O(V log V) prefix scan of
    the tokens by decreasing q/p. Independent drafts of n models (``q`` of shape (n, V)): the
    min cut of Appendix D for n = 2, of the set-compressed relaxed-OTLP network for n >= 3.
    ``scheme="without_replacement"``, ``"hub"`` or ``"topk"``: the min cut of the relaxed-OTLP network
    (``"topk"``: one draft tuple, so alpha* = p(top-n)).
    Batched: ``p`` (B, V) with ``q`` (B, V) or (B, n, V). ``H*`` is a bool mask (V,) or (B, V).
    Raises ValueError when a network would exceed ``MAX_NETWORK_ARCS``. Tensor input gives tensors
    on its device, computed from the draft support only (docs/design/device-path.md).
    """
    p2, q3, n, batched = batched_inputs(p, q, n, draft_kind(p, q, scheme))
    alpha, in_H = _core.optimal_subset(p2, q3, n, draft_kind(p, q, scheme))
    return (alpha if batched else float(alpha[0])), _unbatch(in_H, batched)


def optimal_acceptance(p, q, n: Optional[int] = None, *, scheme: Optional[str] = None):
    """Optimal multi-draft acceptance alpha* (see :func:`optimal_subset`); float or (B,)."""
    return optimal_subset(p, q, n, scheme=scheme)[0]


class _LinearProgramPlan(OTLPPlan):
    """The paper's "General LP" baseline: [GR] Eq. (1) over tuples, solved by SciPy HiGHS.

    Outputs outside the draft support never count as accepted and enter the LP symmetrically, so
    they are merged into one output and split back in proportion to p (exact). The HiGHS
    solution's accepted part is clipped to the marginals and completed by the residual formula
    Eq. (3), so the plan is exactly lossless whatever the solver's round-off.
    """

    def __init__(self, p, scheme):
        tuples, masses = scheme.enumerate()
        support = scheme.support()
        outputs = support[p[support] > 0]
        rest = np.setdiff1d(np.flatnonzero(p > 0), outputs)
        rows = len(outputs) + (1 if len(rest) else 0)
        M = len(tuples)
        if rows * M > MAX_LP_VARIABLES:
            raise ValueError(
                f"request too large: the OTLP would have {rows * M} variables, more than MAX_LP_VARIABLES = "
                f"{MAX_LP_VARIABLES}; reduce the draft support of 'q' (top-k) or 'n'"
            )
        C = self._solve(p, outputs, rest, tuples, masses)
        # Accepted part S[w, i] = C[i, w] for i in set(w), on the LP's outputs only (M x K, never M x V).
        position = np.full(scheme.V, -1)
        position[outputs] = np.arange(len(outputs))
        in_tuple = np.zeros((M, len(outputs)), dtype=bool)
        for j in range(scheme.n):
            hit = position[tuples[:, j]]
            in_tuple[np.flatnonzero(hit >= 0), hit[hit >= 0]] = True
        S = np.clip(np.where(in_tuple, C[: len(outputs)].T, 0.0), 0.0, None)
        S *= np.minimum(1.0, p[outputs] / np.maximum(S.sum(axis=0), 1e-300))[None, :]
        S *= np.minimum(1.0, masses / np.maximum(S.sum(axis=1), 1e-300))[:, None]
        residual = p.copy()
        residual[outputs] = np.clip(p[outputs] - S.sum(axis=0), 0.0, None)
        # A rejected mass below float64 resolution beside p cancels p - accepted to 0: any law on p's
        # support is then exact to rounding, and p keeps the output there (zeros gave NaN laws).
        self._law = residual / residual.sum() if residual.sum() > 0 else p.copy()
        self._outputs = outputs
        self._accepted = S / masses[:, None]
        self._rejected = np.clip(masses - S.sum(axis=1), 0.0, None) / masses
        super().__init__(p, scheme, "lp", S.sum())
        self._rows = {tuple(t): m for m, t in enumerate(tuples.tolist())}

    @staticmethod
    def _solve(p, outputs, rest, tuples, masses):
        try:
            from scipy.optimize import linprog
            from scipy.sparse import coo_matrix
        except ImportError as error:  # pragma: no cover - scipy is an optional extra
            raise ImportError("method='lp' needs SciPy: pip install 'multidraft[lp]'") from error
        K, M = len(outputs) + (1 if len(rest) else 0), len(tuples)
        position = np.full(int(p.shape[0]), -1)
        position[outputs] = np.arange(len(outputs))
        variable = np.arange(K * M).reshape(K, M)  # C[i, w] is variable i * M + w
        accept = np.zeros((K, M))
        for j in range(tuples.shape[1]):
            hit = position[tuples[:, j]]
            accept[hit[hit >= 0], np.flatnonzero(hit >= 0)] = 1.0
        row_targets = np.concatenate([p[outputs], [p[rest].sum()]])[:K]
        # Output marginals (K rows) and tuple marginals (M rows, the last dropped as redundant).
        ones = np.ones(K * M)
        A_rows = np.concatenate([np.repeat(np.arange(K), M), K + np.tile(np.arange(M), K)])
        A_cols = np.concatenate([variable.ravel(), variable.ravel()])
        A = coo_matrix((np.concatenate([ones, ones]), (A_rows, A_cols)), shape=(K + M, K * M)).tocsr()[:-1]
        b = np.concatenate([row_targets, masses])[:-1]
        result = linprog(
            -accept.ravel(), A_eq=A, b_eq=b, bounds=(0, None), method="highs",
            options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10},
        )
        if result.status != 0:
            raise RuntimeError(f"HiGHS failed on the OTLP: {result.message}")
        return result.x.reshape(K, M)

    def _slices(self, drafts):
        out = np.empty((len(drafts), self.scheme.V))
        for m, tup in enumerate(drafts.tolist()):
            row = self._rows.get(tuple(tup))
            if row is None:  # drawable, but its probability underflows to 0 (so not enumerated): no mass to move
                out[m] = self._law
                continue
            out[m] = self._rejected[row] * self._law
            out[m, self._outputs] += self._accepted[row]
            out[m] /= out[m].sum()
        return out


def solve_otlp(p, q, n: Optional[int] = None, *, method: str = "maxflow_cs", scheme: Optional[str] = None,
               network: str = "sets", **options) -> OTLPPlan:
    """An OTLP plan ([GR] Eq. 1) for target ``p`` (V,) and a draft scheme: one entry, four methods.

    ``q`` (V,) with ``n`` for ``scheme="iid"`` (default), ``"without_replacement"``, ``"hub"`` or ``"topk"``;
    ``q`` (n, V) for independent drafts of n models. Methods (all return an :class:`OTLPPlan`):

    - ``"maxflow_cs"`` (default, the fastest exact one): the complementary-slackness outer and
      inner networks of [GR] Theorem 5.1, each solved when a tuple of its kind is first asked
      for, completed by Eq. (8).
    - ``"maxflow"``: the relaxed OTLP as a max-flow ([GR] Section 5.2; LEMON Preflow), completed by
      Eq. (3). ``network="sets"`` merges tuples with equal token sets (exact, far smaller);
      ``network="tuples"`` is the paper's V**n network.
    - ``"lp"``: the full OTLP by SciPy HiGHS (the paper's baseline).
    - ``"global_resolution"``: [GR] Algorithm 1 for i.i.d. drafts, a
      :class:`multidraft.GlobalResolution` plan; takes the options ``tau``, ``exact``,
      ``fallback``, ``max_iterations``, ``max_terms`` and ``paper_threshold`` (see that class).

    Raises ValueError for requests beyond ``MAX_NETWORK_ARCS`` / ``MAX_LP_VARIABLES`` and for
    options the method does not take.
    """
    if method not in OTLP_METHODS:
        raise ValueError(f"'method' must be one of {OTLP_METHODS}, got {method!r}")
    # The options are GlobalResolution's parameters after (p, q, n), the scheme aside.
    unknown = sorted(set(options) - (set(inspect.signature(GlobalResolution).parameters) - {"p", "q", "n", "scheme"}))
    if unknown:
        raise ValueError(f"solve_otlp got unexpected option(s) {unknown}")
    if options and method != "global_resolution":
        raise ValueError(f"options {sorted(options)} apply to method='global_resolution' only")
    if method == "global_resolution":
        if network != "sets":
            raise ValueError("'network' applies to method='maxflow' only")
        return GlobalResolution(p, q, n, scheme=scheme, **options)
    kind = draft_kind(p, q, scheme)
    if network not in ("sets", "tuples"):
        raise ValueError(f"'network' must be 'sets' or 'tuples', got {network!r}")
    if network != "sets" and method != "maxflow":
        raise ValueError("'network' applies to method='maxflow' only")
    p2, q3, n, batched = batched_inputs(p, q, n, kind)
    if batched:
        raise ValueError("'p' must be 1-D for solve_otlp: a plan serves one (target, draft) pair")
    p1 = p2[0]
    draft = DraftScheme._from_batched(q3, n, kind)
    if method == "lp":
        return _LinearProgramPlan(p1, draft)
    if method == "maxflow":
        core = _core.RelaxedPlan(p1, draft.q, kind, n, network)
    else:
        core = _core.SlacknessPlan(p1, draft.q, kind, n)
    return _CorePlan(p1, draft, method, core)

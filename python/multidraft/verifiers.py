"""One interface for every verifier: a draft scheme plus a conditional output law.

``v = multidraft.verifier(name, **options)``; losslessness means
``sum_w P(w) * v.transport(p, q, w) == p``. Notation: ``p`` target, ``q`` draft.
"""
from __future__ import annotations

import functools
from math import comb
from typing import Dict, List, Optional, Type, Union

import numpy as np

from . import _core, _device
from . import _validation as check
from .global_resolution import GlobalResolution
from .otlp import EXACT_METHODS, optimal_acceptance, solve_otlp
from .schemes import DraftScheme, batched_inputs, scheme_kind

#: Largest work (elementary steps) of an exact acceptance that enumerates draft prefixes or tuples
#: ("rrs_without_replacement": prefixes times draft support; "khisti" with n > 1: tuples times n^2).
MAX_ACCEPTANCE_WORK = 10**8


@functools.lru_cache(maxsize=None)  # a handful of combinations; the core's options are immutable
def _scheme_options(kind: str, without_replacement: bool, truncation: int = -1):
    return _core.VerifierOptions(kind=kind, without_replacement=without_replacement, truncation=truncation,
                                 max_work=float(MAX_ACCEPTANCE_WORK))


def _unbatch(values: np.ndarray, batched: bool) -> Union[float, np.ndarray]:
    return values if batched else float(values[0])


class Verifier:
    """Base class: the core's verifier registry (registry/verifier_registry.hpp) under ``core_method``.

    Subclasses set ``name``, ``scheme_kind`` (the draft scheme), ``fixed_n``, ``core_method`` and
    the core's options; a verifier run from Python instead overrides ``_transport`` and
    ``acceptance``.

    Shapes: ``p``, ``q`` (V,) with ``drafts`` (n,), or a batch ``p``, ``q`` (B, V) with ``drafts``
    (B, n); for independent drafts ``q`` has one more axis of length n.
    """

    name = ""
    scheme_kind = "iid"
    fixed_n: Optional[int] = None   # the only number of drafts the method handles, if any
    core_method = ""                # name of the method in _core.transport
    without_replacement = False
    # For loops that verify at every token (multidraft.hf): whether the exact acceptance costs
    # about one plan at any n (not when it enumerates draft prefixes or tuples), and whether a
    # node wider than :meth:`node_subsets` allows may draw fewer drafts rather than be refused.
    cheap_acceptance = True
    caps_wide_groups = False

    def __repr__(self) -> str:
        return f"multidraft.verifier({self.name!r})"

    def node_subsets(self, support: int, n: int) -> int:
        """Draft subsets one verification of n drafts over ``support`` draft tokens enumerates
        (a max-flow network's size, say): 0 for the verifiers that enumerate none."""
        return 0

    def _check_n(self, n: int) -> None:
        """Refuse draft counts the method does not handle."""
        if self.fixed_n is not None and n != self.fixed_n:
            raise ValueError(f"verifier {self.name!r} takes exactly {self.fixed_n} draft(s): "
                             f"'n' must be {self.fixed_n}, got {n}")

    def _rows(self, p, q, n):
        """Validated (p2 (B, V), q3 (B, rows, V), n, batched) for the acceptance formulas."""
        if n is not None:
            self._check_n(check.count(n))
        p2, q3, n, batched = batched_inputs(p, q, self.fixed_n or n, self.scheme_kind)
        return p2, q3, n, batched

    @_device.tensor_route(_device.draft)
    def draft(self, q, n: Optional[int], rng: check.RngLike = None) -> np.ndarray:
        """Draw the n drafts (n,) int64 as this method samples them (a tensor on ``q``'s device for a tensor ``q``)."""
        self._check_n(check.count(n) if n is not None else np.shape(q)[0])
        return DraftScheme(q, n, self.scheme_kind).sample(rng)

    @_device.tensor_route(_device.draft_probability)
    def draft_probability(self, q, drafts) -> float:
        """Probability that :meth:`draft` returns the ordered tuple ``drafts`` (a 0-d tensor for tensors)."""
        drafts = np.asarray(drafts)
        n = drafts.shape[-1] if drafts.ndim else 1
        self._check_n(n)
        return DraftScheme(q, n, self.scheme_kind).probability(drafts)

    def _draft_count(self, drafts, q) -> int:
        """n, the tokens per row of ``drafts`` (any array-like or tensor), refused naming 'drafts' when
        empty or not the n this verifier and ``q`` take."""
        shape = tuple(drafts.shape) if hasattr(drafts, "shape") else np.shape(drafts)
        n = shape[-1] if shape else 1
        if n < 1:
            raise ValueError(f"'drafts' holds no token (shape {shape})")
        if self.fixed_n is not None and n != self.fixed_n:
            raise ValueError(f"verifier {self.name!r} takes exactly {self.fixed_n} draft(s): 'drafts' must hold "
                             f"{self.fixed_n} token(s) per row, got shape {shape}")
        q_shape = tuple(q.shape) if hasattr(q, "shape") else np.shape(q)
        if self.scheme_kind == "independent" and len(q_shape) >= 2 and q_shape[-2] != n:
            raise ValueError(f"'drafts' holds {n} token(s) per row, but 'q' has {q_shape[-2]} draft rows "
                             "(one per draft model)")
        return n

    def _inputs(self, p, q, drafts, scales=None):
        n = self._draft_count(drafts, q)
        p2, q3, n, batched = batched_inputs(p, q, n, self.scheme_kind, scales)
        d = check.tokens(drafts, p2.shape[1], n, ndims=(2,) if batched else (1,)).reshape(-1, n)
        if d.shape[0] != p2.shape[0]:
            raise ValueError(f"'drafts' has batch size {d.shape[0]}, but 'p' has {p2.shape[0]}")
        # Drafts of probability zero are refused by the core's check_drawable, for the methods it
        # runs and for the plans of the Python ones ("otlp" with method "lp").
        return p2, q3, n, d, batched

    @_device.tensor_route(_device.transport)
    def transport(self, p, q, drafts) -> np.ndarray:
        """Exact output law pi(. | drafts): (V,), or (B, V) for a batch (float64 tensors on their device
        for tensor input: docs/design/device-path.md)."""
        checked = self._checked_drafts(p, q, drafts)
        if checked is not None:
            laws = _core.transport_checked(self.core_method, p, q, checked[0], self._core_options(), *checked[1])
            if laws is not None:
                return laws if p.ndim == 2 else laws[0]
        scales = [] if self.core_method else None  # the core reads float64 rows in place, with their scales
        p2, q3, n, d, batched = self._inputs(p, q, drafts, scales)
        laws = self._transport(p2, q3, n, d, scales or ())
        return laws if batched else laws[0]

    @_device.tensor_route(_device.verify)
    def verify(self, p, q, drafts, rng: check.RngLike = None):
        """One verified token per row and whether it is one of the drafts.

        Returns ``(token, accepted)``, or ``((B,) int64, (B,) bool)`` for a batch. Rows run on
        the core's threads (:func:`multidraft.set_num_threads`); a method that can draw its token
        without writing the output law (``"sps"``, ``"naive"``, ``"global_resolution"``) does so.
        NumPy float32 or float64 ``p`` and ``q`` (any strides) with integer ``drafts`` are checked
        and verified in a single core call, which reads C-contiguous float64 rows in place, each
        entry times 1 / its row's sum as it is read: the law p / sum(p) exactly, the very numbers
        a normalised copy would hold (other rows are normalised into a buffer of the call). Tensor
        input gives tensors on its device (0-d for one row).
        """
        checked = self._checked_drafts(p, q, drafts)
        if checked is not None:
            d, tolerances = checked
            seeds = check.row_seeds(rng, d.shape[0])
            out = _core.verify_checked(self.core_method, p, q, d, seeds, self._core_options(), *tolerances)
            if out is not None:
                return out if p.ndim == 2 else (int(out[0][0]), bool(out[1][0]))
        scales = [] if self.core_method else None  # as in transport
        p2, q3, n, d, batched = self._inputs(p, q, drafts, scales)
        seeds = check.row_seeds(rng, p2.shape[0])
        if self.core_method:
            tokens = _core.verify(self.core_method, p2, q3, d, seeds, self._core_options(), *scales)
        else:
            tokens = _core.sample_rows(self._transport(p2, q3, n, d), seeds)
        if not batched:  # one row: a Python test of n ids costs less than the array comparison
            token = int(tokens[0])
            return token, token in d[0].tolist()
        return tokens, np.any(d == tokens[:, None], axis=1)

    def _checked_drafts(self, p, q, drafts):
        """``(drafts (B, n) int64, tolerances)`` when the core's checked calls take this input as
        given (:func:`_validation.core_tolerances`; a core method with one draft law per row), else
        None: the general path then checks, converts and explains. The core still refuses rows
        (returning None) that the general path must explain."""
        if not self.core_method or self.scheme_kind == "independent":
            return None
        tolerances = check.core_tolerances(p, q)
        if tolerances is None:
            return None
        d = drafts if type(drafts) is np.ndarray else np.asarray(drafts)
        if d.dtype != np.int64:
            if d.dtype.kind not in "iu":
                return None
            d = d.astype(np.int64)
        if d.ndim != p.ndim or d.shape[0] != (p.shape[0] if p.ndim == 2 else d.shape[0]) or not d.shape[-1]:
            return None
        if self.fixed_n is not None and d.shape[-1] != self.fixed_n:
            return None
        return np.ascontiguousarray(d).reshape(-1, d.shape[-1]), tolerances

    def _core_options(self):
        """The options of this verifier for the core's batched calls."""
        return _scheme_options(self.scheme_kind, self.without_replacement)

    def _transport(self, p2, q3, n, drafts, scales=()) -> np.ndarray:
        """Laws (B, V) of the validated rows; ``scales``: their row scales when read in place."""
        return _core.transport(self.core_method, p2, q3, drafts, self._core_options(), *scales)

    @_device.tensor_route(_device.acceptance)
    def acceptance(self, p, q, n: Optional[int] = None):
        """Exact expected acceptance P(output in drafts) of this method: float or (B,).

        ``n`` defaults to the method's fixed number of drafts, else 1 (independent drafts: the
        rows of ``q``). Tensor input gives a float64 tensor on its device (0-d for one row).
        """
        if n is None and self.scheme_kind != "independent":
            n = self.fixed_n or 1
        p2, q3, n, batched = self._rows(p, q, n)
        return _unbatch(_core.acceptance(self.core_method, p2, q3, n, self._core_options()), batched)


def draft_subsets(support: int, n: int) -> int:
    """Non-empty draft subsets of at most n tokens over ``support`` tokens."""
    return sum(comb(support, j) for j in range(1, min(n, support) + 1))


_REGISTRY: Dict[str, Type[Verifier]] = {}


def register(cls: Type[Verifier]) -> Type[Verifier]:
    """Add a verifier class to the registry under ``cls.name``."""
    _REGISTRY[cls.name] = cls
    return cls


@register
class SpeculativeSampling(Verifier):
    """``"sps"``: single-draft speculative sampling (Leviathan et al.; Chen et al.).

    Accept the draft y with probability min(1, p(y)/q(y)), else sample (p - q)^+ normalised.
    Optimal for one draft: acceptance sum_i min(p_i, q_i).
    """

    name = "sps"
    fixed_n = 1
    core_method = "sps"


@register
class NaiveRejection(Verifier):
    """``"naive"``: naive rejection ([NH]): output Z ~ p, accepted iff Z is one of the drafts.

    Lossless by construction; with n i.i.d. drafts its acceptance is sum_i p_i (1 - (1 - q_i)^n).
    """

    name = "naive"
    core_method = "naive"


@register
class TopK(Verifier):
    """``"topk"``: the n most probable draft tokens (scheme ``"topk"``), verified by naive rejection ([NH]).

    The drafts are the n most probable tokens of ``q``, most probable first, ties by lowest id
    (the deterministic token trees of EAGLE and SGLang): ``draft`` ignores ``rng``, and
    ``draft_probability`` is 1 for that tuple, 0 for any other (refused by ``transport`` and
    ``verify``). A ``q`` with fewer than n tokens of positive mass gives its k tokens padded by
    repeats of the k-th. The output is a sample of p whatever the drafts, accepted iff it is one of
    them: ``transport`` is p, and the exact acceptance is p(T) for the set T of the top-n drafts,
    which is also the optimum of this draft scheme (``verifier("otlp", scheme="topk")`` attains
    the same).
    """

    name = "topk"
    scheme_kind = "topk"
    core_method = "topk"


@register
class RecursiveRejection(Verifier):
    """``"rrs"``: recursive rejection sampling with n i.i.d. drafts (SpecInfer; [HUB] Section 2, Algorithm 1).

    Drafts are tried in order by speculative sampling against the running residual
    p_{i+1} = norm((p_i - q)^+); if all are rejected the output is drawn from p_{n+1}.
    Exact acceptance 1 - prod_i (1 - beta_i), beta_i = sum_x min(p_i(x), q(x)).
    """

    name = "rrs"
    core_method = "rrs"


@register
class RecursiveRejectionWithoutReplacement(RecursiveRejection):
    """``"rrs_without_replacement"``: RRS with drafts drawn without replacement ([HUB] Section 2, Algorithm 1).

    After a rejection the residual is taken against the current draft law, then the rejected
    token is removed from it. The exact acceptance sums over draft prefixes (order matters), about
    k^n of them for a draft support of k, O(k) each; beyond ``MAX_ACCEPTANCE_WORK`` it is refused.
    A support of k < n tokens gives k distinct drafts padded by repeats (see
    :class:`multidraft.DraftScheme`); the padding is not tested, so the law is that of k drafts.
    """

    name = "rrs_without_replacement"
    scheme_kind = "without_replacement"
    without_replacement = True
    cheap_acceptance = False  # it sums over draft prefixes


@register
class KSequential(Verifier):
    """``"spectr"``: SpecTr's K-sequential selection (K-SEQ) for n i.i.d. drafts.

    Each draft x_i is accepted with probability min(1, p(x_i) / (rho* q(x_i))) in order; if all
    are rejected the output is drawn from SpecTr's residual. rho* in [1, n] is the smallest value
    that keeps the residual non-negative (found by bisection). Acceptance 1 - (1 - beta(rho*))^n,
    beta(rho) = sum_x min(q(x), p(x)/rho); at least (1 - 1/e) alpha* (SpecTr's guarantee).
    ``rho(p, q, n)`` returns rho*.
    """

    name = "spectr"
    core_method = "spectr"

    @_device.tensor_route(_device.rho)
    def rho(self, p, q, n):
        """The K-SEQ parameter rho* in [1, n]: float, or (B,) for a batch (tensors on their device for tensors)."""
        p2, q3, n, batched = self._rows(p, q, n)
        return _unbatch(_core.kseq_rho(p2, q3, n), batched)


@register
class SpecHubVerifier(Verifier):
    """``"spechub"``: SpecHub ([HUB] Section 4, Appendix C), two drafts from the hub scheme.

    Hub a = argmax q (smallest index on ties); drafts (x, a) with probability q(x), or (a, x)
    with probability q(a) q(x) / (1 - q(a)) (scheme ``"hub"``). Four ordered acceptance tests and
    one residual; acceptance p(a) + sum_{x != a} min(p(x), q(x) / (1 - q(a))), the optimum of
    its own draft scheme. n = 2 only. A one-token draft {a} (drafts (a, a)) is verified as
    ``"sps"`` verifies the draft a, with acceptance p(a).
    """

    name = "spechub"
    scheme_kind = "hub"
    fixed_n = 2
    core_method = "spechub"


@register
class CanonicalDecompositionVerifier(Verifier):
    """``"khisti"``: the canonical decomposition of Khisti et al. ([CD] Theorem 1, Appendix I, Remark 3).

    Step 1 selects one draft token by importance weights; step 2 verifies it by single-draft
    speculative sampling against the selected token's own marginal p_I (never against q). The
    weights are optimal (from the relaxed-OTLP max-flow, [GR] Theorem 4.1), so for two drafts
    the acceptance is alpha*; for n > 2 the selection is successive and pairwise (Remark 3), not
    optimal in general. ``scheme``: "iid" (identical drafts, q (V,)) or "independent" (one
    draft model per draft, q (n, V)). ``truncation=s``: the first pair uses Algorithm 2 (truncated
    LP with s free tokens, solved at run time as a small max-flow) instead of the optimal weights.
    The exact acceptance enumerates the draft tuples (work at most ``MAX_ACCEPTANCE_WORK``).
    """

    name = "khisti"
    core_method = "khisti"
    cheap_acceptance = False  # it enumerates draft tuples

    def node_subsets(self, support: int, n: int) -> int:
        return draft_subsets(support, 2) if n >= 2 else 0  # pairwise selection weights (Remark 3)

    def __init__(self, scheme: str = "iid", truncation: Optional[int] = None):
        if scheme not in ("iid", "independent"):
            raise ValueError(f"verifier 'khisti': 'scheme' must be 'iid' or 'independent', got {scheme!r}")
        if truncation is not None:
            check.count(truncation, "truncation", minimum=0)
            if scheme != "iid":
                raise ValueError("verifier 'khisti': 'truncation' (Algorithm 2) applies to identical drafts only")
        self.scheme_kind = scheme
        self.truncation = -1 if truncation is None else int(truncation)

    def __repr__(self) -> str:
        extra = "" if self.truncation < 0 else f", truncation={self.truncation}"
        return f"multidraft.verifier('khisti', scheme={self.scheme_kind!r}{extra})"

    def _core_options(self):
        return _scheme_options(self.scheme_kind, False, self.truncation)


@register
class OptimalTransport(Verifier):
    """``"otlp"``: the exact optimal verifier, pi = the OTLP plan ([GR]), acceptance alpha*.

    Options: ``method`` in ("maxflow_cs" (default, the fastest), "maxflow", "lp"), ``scheme`` in
    ("iid", "without_replacement", "independent", "hub", "topk"). Consecutive rows with equal (p, q)
    share one plan; for slices of one (p, q) pair spread over calls keep a :func:`multidraft.solve_otlp`
    plan instead.
    """

    name = "otlp"

    def node_subsets(self, support: int, n: int) -> int:
        return draft_subsets(support, n)

    def __init__(self, method: str = "maxflow_cs", scheme: str = "iid"):
        if method not in EXACT_METHODS:
            raise ValueError(f"'method' must be one of {EXACT_METHODS}, got {method!r}")
        self.method = method
        self.scheme_kind = scheme_kind(scheme)
        self.core_method = "" if method == "lp" else method  # "lp": SciPy, from Python

    def __repr__(self) -> str:
        return f"multidraft.verifier('otlp', method={self.method!r}, scheme={self.scheme_kind!r})"

    def _transport(self, p2, q3, n, drafts, scales=()):
        if self.core_method:
            return super()._transport(p2, q3, n, drafts, scales)
        q_rows = q3 if self.scheme_kind == "independent" else q3[:, 0]
        laws = np.empty_like(p2)
        starts = _core.equal_row_runs(p2, q3)
        for begin, end in zip(starts[:-1], starts[1:]):  # as in the core: a run of equal rows shares a plan
            plan = solve_otlp(p2[begin], q_rows[begin], n, method="lp", scheme=self.scheme_kind)
            laws[begin:end] = plan.transport(drafts[begin:end])
        return laws

    def acceptance(self, p, q, n=None):
        return optimal_acceptance(p, q, n, scheme=self.scheme_kind)


@register
class GlobalResolutionVerifier(Verifier):
    """``"global_resolution"``: Algorithm 1 of [GR] for n i.i.d. drafts (see GlobalResolution).

    Options are those of :class:`multidraft.GlobalResolution` (``tau``, ``exact``, ``fallback``,
    ...). ``acceptance`` is P(output is one of the drafts), exact, as for every verifier: by
    default the output law is exactly p and the acceptance (kept proposals plus residual draws
    that land on a draft) is within ``acceptance_bound`` (<= 10 tau on success) below alpha*;
    ``exact=False``: [GR]'s raw plan, within L1 15 tau of p on success. With ``fallback=True``
    unsuccessful rows use the exact max-flow plan (acceptance alpha*). ``verify(...)[1]`` is the
    same event.
    """

    name = "global_resolution"
    core_method = "global_resolution"
    caps_wide_groups = True  # its acceptance has all but stopped growing past a few drafts
    #: Largest n whose terms the plan sums without enumerating subsets ([GR] Section 6).
    SUMMED_GROUP = 6

    def node_subsets(self, support: int, n: int) -> int:
        return draft_subsets(support, n) if n > self.SUMMED_GROUP else 0

    def __init__(self, tau: float = 1e-3, **options):
        self.tau = tau
        self.options = dict(options, tau=tau)
        probe = GlobalResolution(np.ones(2) / 2, np.ones(2) / 2, 1, **self.options)  # validate options now
        self._options = _core.VerifierOptions(
            tau=probe.tau, exact=probe.exact, fallback=bool(self.options.get("fallback", False)),
            **{k: self.options[k] for k in ("max_iterations", "max_terms", "paper_threshold") if k in self.options})

    def __repr__(self) -> str:
        return f"multidraft.verifier('global_resolution', {', '.join(f'{k}={v!r}' for k, v in self.options.items())})"

    def plan(self, p, q, n: int) -> GlobalResolution:
        return GlobalResolution(p, q, n, **self.options)

    def _core_options(self):
        return self._options


def verifier_names() -> List[str]:
    """Names accepted by :func:`verifier`."""
    return sorted(_REGISTRY)


def verifier(name: str, **options) -> Verifier:
    """The verifier called ``name`` (see :func:`verifier_names`), built with ``options``."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown verifier {name!r}; choose one of {verifier_names()}")
    try:
        return _REGISTRY[name](**options)
    except TypeError as error:
        raise ValueError(f"verifier {name!r}: {error}") from None

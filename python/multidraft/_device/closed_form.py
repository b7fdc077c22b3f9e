"""The verifiers whose law is closed-form (``"sps"``, ``"naive"``, ``"topk"``) wholly on the
tensors' device.

Their law given the drafts needs no compressed problem (docs/design/device-path.md, Section 9):

- ``"sps"``: accept the draft d with probability a = min(1, p(d) / q(d)), else draw from the
  residual (p - q)^+, or from p where the residual vanishes (p == q up to rounding), exactly the law
  the core writes;
- ``"naive"`` and ``"topk"`` (naive rejection, [NH]): the output is Z ~ p whatever the drafts,
  accepted iff Z is one of them; the law is p.

Every term is an O(V) elementwise pass, a gather or a row sum on the device, so a draft law of any
support (a full softmax, RDK's proposal M^T q') costs the host one read of the checks (O(n) numbers
per row: :class:`multidraft._device.checked.Call`), where the compressed problem would copy the
whole support.
"""
from __future__ import annotations

import numpy as np

from .. import _validation as check
from .sampling import inverse_cdf_at, row_uniforms
from .tensors import row_sums, to_device, torch_module

#: The verifiers computed here; the others solve a compressed problem on the host.
NAMES = ("sps", "naive", "topk")

_UNDRAWABLE = "'drafts' has probability zero under the draft scheme ({})"
_NOT_TOP = ("the 'topk' drafts are the n most probable tokens of q, most probable first, ties by lowest id, "
            "a support smaller than 'n' padded by repeats of its last token")


def _last_rank(q, at, q_at):
    """(B,) the rank of each row's last draft in the topk scheme's order of q (more probable first,
    ties by lowest id): the tokens before it, one (B, V) comparison."""
    torch = torch_module()
    ids = torch.arange(q.shape[-1], device=q.device)
    last, q_last = at[:, -1:], q_at[:, -1:]
    return ((q > q_last) | ((q == q_last) & (ids < last))).sum(-1)


def _top_tuples(d: np.ndarray, q_at: np.ndarray, last_rank: np.ndarray, k: np.ndarray) -> np.ndarray:
    """(B,) bool on the host: whether the drafts ``d`` (B, n) are the topk scheme's tuple
    (core/draft_scheme.hpp's ``top_drafts``), from q at them (B, n), the rank of the last one and the
    support's size k (B,), the drafts having q > 0.

    The tuple is the tokens of ranks 0, 1, ..., m - 1 (m = min(n, k)), then the (m - 1)-th repeated.
    A draft tuple is it iff each of its first m drafts comes strictly before the next in the order
    (more probable, or as probable with a lower id), the drafts from the (m - 1)-th on are equal, and
    the last one's rank is m - 1: m strictly increasing ranks ending at m - 1 are 0, ..., m - 1. So
    one rank count (:func:`_last_rank`) replaces one per draft."""
    n = d.shape[1]
    m = np.minimum(n, k)[:, None]
    before = (q_at[:, :-1] > q_at[:, 1:]) | ((q_at[:, :-1] == q_at[:, 1:]) & (d[:, :-1] < d[:, 1:]))
    steps = np.where(np.arange(n - 1) < m - 1, before, d[:, :-1] == d[:, 1:])
    return steps.all(1) & (last_rank == m[:, 0] - 1)


def _checked(verifier, call):
    """(p, q (B, V) the normalised float64 rows; the drafts on the device (B, n); q at the drafts
    (B, n)) of a :class:`checked.Call` after its ONE host read, which refuses bad drafts and laws
    (:meth:`checked.Call.read`) and drafts the scheme cannot draw, with the core's messages, in the
    core's order: q = 0 at a draft, then a tuple that is not the topk scheme's. The results are
    computed after the read, on checked rows, and stay on the device."""
    p, q = call.normalised()
    at = call.drafts_on_device()
    q_at = q.gather(1, at)
    checks = [_last_rank(q, at, q_at), (q > 0).sum(-1)] if verifier.scheme_kind == "topk" else []
    q_at_host, *read = call.read(q_at, *checks)
    if (q_at_host <= 0).any():
        raise ValueError(_UNDRAWABLE.format("q = 0 at a draft"))
    if checks and not _top_tuples(call.d, q_at_host, *read).all():
        raise ValueError(_UNDRAWABLE.format(_NOT_TOP))
    return p, q, at, q_at


def _speculative_terms(p, q, at, q_at=None):
    """``"sps"``: (a (B,), the residual's weights (B, V)) for the drafts at[:, 0] of the rows p, q
    (``q_at``: q at the drafts, when the caller has it)."""
    torch = torch_module()
    p_d = p.gather(1, at[:, :1])[:, 0]
    q_d = (q.gather(1, at[:, :1]) if q_at is None else q_at[:, :1])[:, 0]
    residual = (p - q).clamp(min=0.0)
    # p where the residual vanishes (p == q up to rounding): the core's guard against 0/0
    weights = torch.where((residual > 0).any(-1, keepdim=True), residual, p)
    return (p_d / q_d).clamp(max=1.0), weights


def transport(verifier, call):
    """The law of a :class:`checked.Call`: ``"sps"`` a delta_d + (1 - a) weights / their sum; naive
    rejection p. (V,) or (B, V) float64 on the device."""
    p, q, at, q_at = _checked(verifier, call)
    if verifier.name == "sps":
        accept, weights = _speculative_terms(p, q, at, q_at)
        law = ((1.0 - accept) / row_sums(weights)).unsqueeze(-1) * weights
        law.scatter_add_(1, at[:, :1], accept[:, None])
    else:
        law = p
    return law if call.batched else law[0]


def uniforms_per_row(verifier) -> int:
    """How many of :func:`multidraft._device.sampling.row_uniforms` a row's :func:`draw` takes."""
    return 2 if verifier.name == "sps" else 1


def draw(verifier, p, q, at, uniforms, q_at=None):
    """(token (B,) int64, accepted (B,) bool) on the device for checked rows p, q (B, V) (any
    positive scale: the draws scale by the row's total) and drafts ``at`` (B, n), from the rows'
    :func:`multidraft._device.sampling.row_uniforms` (B, :func:`uniforms_per_row`) (``q_at``: q at the drafts, when the
    caller has it). ``"sps"``: accepted iff u1 < a, else the inverse CDF of the residual's weights at
    u2. Naive rejection: the inverse CDF of p at u1, accepted iff it is one of the drafts."""
    torch = torch_module()
    if verifier.name == "sps":
        accept, weights = _speculative_terms(p, q, at, q_at)
        accepted = uniforms[:, 0] < accept
        return torch.where(accepted, at[:, 0], inverse_cdf_at(weights, uniforms[:, 1:])[:, 0]), accepted
    token = inverse_cdf_at(p, uniforms)[:, 0]
    return token, (token.unsqueeze(-1) == at).any(-1)


def verify(verifier, call, rng):
    """(token int64, accepted bool), 0-d or (B,), on the device for a :class:`checked.Call`:
    :func:`draw` after the checks, in the call's one host read."""
    p, q, at, q_at = _checked(verifier, call)
    seeds = check.row_seeds(rng, call.B)
    uniforms = to_device(row_uniforms(seeds, uniforms_per_row(verifier)), at.device)
    token, accepted = draw(verifier, p, q, at, uniforms, q_at)
    return (token, accepted) if call.batched else (token[0], accepted[0])

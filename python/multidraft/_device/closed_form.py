"""The verifiers whose law is closed-form (``"sps"``, ``"naive"``, ``"topk"``) wholly on the
tensors' device.

Their law given the drafts needs no compressed problem (docs/design/device-path.md, Section 9):

- ``"sps"``: accept the draft d with probability a = min(1, p(d) / q(d)), else draw from the
  residual (p - q)^+, or from p where the residual vanishes (p == q up to rounding), exactly the law
  the core writes;
- ``"naive"`` and ``"topk"`` (naive rejection, [NH]): the output is Z ~ p whatever the drafts,
  accepted iff Z is one of them; the law is p.

Every term is an O(V) elementwise pass, a gather or a row sum on the device, so a draft law of any
support (a full softmax, RDK's proposal M^T q') costs the host one read of the refusal flags, where
the compressed problem would copy the whole support.
"""
from __future__ import annotations

import numpy as np

from .. import _device
from .. import _validation as check

#: The verifiers computed here; the others solve a compressed problem on the host.
NAMES = ("sps", "naive", "topk")

_UNDRAWABLE = "'drafts' has probability zero under the draft scheme ({})"
_NOT_TOP = ("the 'topk' drafts are the n most probable tokens of q, most probable first, ties by lowest id, "
            "a support smaller than 'n' padded by repeats of its last token")


def _torch():
    import torch  # only reached with a tensor in hand

    return torch


def _top_ranked(q, at):
    """(B,) bool: whether the drafts ``at`` (B, n) are the topk scheme's tuple of the rows ``q``
    (B, V) (core/draft_scheme.hpp's ``top_drafts``). A token's rank is the number of tokens before
    it in that order (more probable, or as probable with a lower id); the tuple is the tokens of
    ranks 0, 1, ..., k - 1 and then k - 1 repeated, k the support's size: so draft j is the tuple's
    iff its rank is min(j, k - 1). One (B, V) comparison per draft, no sort."""
    torch = _torch()
    ids = torch.arange(q.shape[-1], device=q.device)

    def rank(token):  # (B,) ranks of the (B,) tokens
        q_t = q.gather(1, token.unsqueeze(-1))
        return ((q > q_t) | ((q == q_t) & (ids < token.unsqueeze(-1)))).sum(-1)

    ranks = torch.stack([rank(at[:, j]) for j in range(at.shape[1])], dim=1)
    support = (q > 0).sum(-1, keepdim=True)
    wanted = torch.minimum(torch.arange(at.shape[1], device=q.device), support - 1)
    return (ranks == wanted).all(-1)


def _checked(verifier, target, draft, d: np.ndarray):
    """(p (B, V) and q (B, V), the normalised float64 rows; the drafts on the device (B, n)) after the
    call's one host read, which refuses bad laws and drafts the scheme cannot draw, with the core's
    messages, in the core's order."""
    torch = _torch()
    p, q = target.values / target.scale.unsqueeze(-1), draft.values[:, 0] / draft.scale[:, :1]
    at = _device.to_device(d, q.device)
    zero_at_draft = (q.gather(1, at) <= 0).any()
    not_top = ~_top_ranked(q, at).all() if verifier.scheme_kind == "topk" else torch.zeros((), dtype=torch.bool,
                                                                                               device=q.device)
    flags = _device.to_host(torch.stack([target.bad, draft.bad, zero_at_draft, not_top]))
    if flags[0]:
        target.refuse()
    if flags[1]:
        draft.refuse()
    if flags[2]:
        raise ValueError(_UNDRAWABLE.format("q = 0 at a draft"))
    if flags[3]:
        raise ValueError(_UNDRAWABLE.format(_NOT_TOP))
    return p, q, at


def _speculative_terms(p, q, at):
    """``"sps"``: (a (B,), the residual's weights (B, V)) for the drafts at[:, 0] of the rows p, q."""
    torch = _torch()
    p_d, q_d = p.gather(1, at[:, :1])[:, 0], q.gather(1, at[:, :1])[:, 0]
    residual = (p - q).clamp(min=0.0)
    # p where the residual vanishes (p == q up to rounding): the core's guard against 0/0
    weights = torch.where((residual > 0).any(-1, keepdim=True), residual, p)
    return (p_d / q_d).clamp(max=1.0), weights


def transport(verifier, target, draft, d: np.ndarray, batched: bool):
    """The law: ``"sps"`` a delta_d + (1 - a) weights / their sum; naive rejection p. (V,) or (B, V)
    float64 on the device."""
    p, q, at = _checked(verifier, target, draft, d)
    if verifier.name == "sps":
        accept, weights = _speculative_terms(p, q, at)
        law = ((1.0 - accept) / _device.row_sums(weights)).unsqueeze(-1) * weights
        law.scatter_add_(1, at[:, :1], accept[:, None])
    else:
        law = p
    return law if batched else law[0]


def uniforms_per_row(verifier) -> int:
    """How many of :func:`_device.row_uniforms` a row's :func:`draw` takes."""
    return 2 if verifier.name == "sps" else 1


def draw(verifier, p, q, at, uniforms):
    """(token (B,) int64, accepted (B,) bool) on the device for checked rows p, q (B, V) (any
    positive scale: the draws scale by the row's total) and drafts ``at`` (B, n), from the rows'
    :func:`_device.row_uniforms` (B, :func:`uniforms_per_row`). ``"sps"``: accepted iff u1 < a, else
    the inverse CDF of the residual's weights at u2. Naive rejection: the inverse CDF of p at u1,
    accepted iff it is one of the drafts."""
    torch = _torch()
    if verifier.name == "sps":
        accept, weights = _speculative_terms(p, q, at)
        accepted = uniforms[:, 0] < accept
        return torch.where(accepted, at[:, 0], _device.inverse_cdf_at(weights, uniforms[:, 1:])[:, 0]), accepted
    token = _device.inverse_cdf_at(p, uniforms)[:, 0]
    return token, (token.unsqueeze(-1) == at).any(-1)


def verify(verifier, target, draft, d: np.ndarray, batched: bool, rng):
    """(token int64, accepted bool), 0-d or (B,), on the device: :func:`draw` after the checks."""
    p, q, at = _checked(verifier, target, draft, d)
    seeds = check.row_seeds(rng, d.shape[0])
    uniforms = _device.to_device(_device.row_uniforms(seeds, uniforms_per_row(verifier)), at.device)
    token, accepted = draw(verifier, p, q, at, uniforms)
    return (token, accepted) if batched else (token[0], accepted[0])

"""Single-draft speculative sampling (``"sps"``) wholly on the tensors' device.

Its law given the draft d needs no compressed problem (docs/design/device-path.md, Section 9):
accept d with probability a = min(1, p(d) / q(d)), else draw from the residual (p - q)^+, or from p
where the residual vanishes (p == q up to rounding), exactly the law the core writes. Every term is
an O(V) elementwise pass or a row sum on the device, so a draft law of any support (a full softmax,
RDK's proposal M^T q') costs the host one read of the refusal flags, where the compressed problem
would copy the whole support.
"""
from __future__ import annotations

import numpy as np

from . import _device
from . import _validation as check


def _torch():
    import torch  # only reached with a tensor in hand

    return torch


def _terms(target, draft, d):
    """(a (B,), the residual's weights (B, V), their row sums (B,), the drafts on the device (B,))
    after the call's one host read, which refuses bad laws and drafts of q = 0."""
    torch = _torch()
    p = target.values / target.scale.unsqueeze(-1)
    q = draft.values[:, 0] / draft.scale[:, :1]
    at = _device.to_device(d[:, 0], p.device)
    p_d, q_d = p.gather(1, at[:, None])[:, 0], q.gather(1, at[:, None])[:, 0]
    flags = _device.to_host(torch.stack([target.bad, draft.bad, (q_d <= 0).any()]))
    if flags[0]:
        target.refuse()
    if flags[1]:
        draft.refuse()
    if flags[2]:  # the core's message for an undrawable draft
        raise ValueError("'drafts' has probability zero under the draft scheme (q = 0 at a draft)")
    residual = (p - q).clamp(min=0.0)
    mass = _device.row_sums(residual)
    has_residual = (mass > 0).unsqueeze(-1)
    weights = torch.where(has_residual, residual, p)
    return (p_d / q_d).clamp(max=1.0), weights, torch.where(has_residual[:, 0], mass, _device.row_sums(p)), at


def transport(target, draft, d: np.ndarray, batched: bool):
    """The law a delta_d + (1 - a) weights / their sum: (V,) or (B, V) float64 on the device."""
    accept, weights, mass, at = _terms(target, draft, d)
    law = ((1.0 - accept) / mass).unsqueeze(-1) * weights
    law.scatter_add_(1, at[:, None], accept[:, None])
    return law if batched else law[0]


def verify(target, draft, d: np.ndarray, batched: bool, rng):
    """(token int64, accepted bool), 0-d or (B,), on the device: accepted iff u1 < a, else the
    inverse CDF of the residual's weights at u2, with (u1, u2) the first two of the row's
    :func:`_device.row_uniforms`."""
    torch = _torch()
    accept, weights, _, at = _terms(target, draft, d)
    uniforms = _device.to_device(_device.row_uniforms(check.row_seeds(rng, d.shape[0]), 2), at.device)
    accepted = uniforms[:, 0] < accept
    token = torch.where(accepted, at, _device.inverse_cdf_at(weights, uniforms[:, 1:])[:, 0])
    return (token, accepted) if batched else (token[0], accepted[0])

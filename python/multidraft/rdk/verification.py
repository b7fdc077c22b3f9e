"""Verification with a proposal over the target vocabulary ([OOV]): speculative sampling with TLI,
RDK or first-order RDK proposals, draft blocks, and the masked baseline's lossless discard sampler."""
from __future__ import annotations

from typing import Union

import numpy as np

from .. import _core, _device
from .. import _validation as check
from ..verifiers import verifier
from . import _on_device
from ._common import MASK_RULE, _rows, _unbatch, check_block_shape, check_mask_shape


def transport(p, proposal, drafts) -> np.ndarray:
    """Exact output law of speculative sampling with ``proposal`` as the draft law: (V,) or (B, V).

    Accept ratio min(1, p(d) / proposal(d)), residual (p - proposal)^+ over the whole target
    vocabulary. ``drafts``: (1,) or (B, 1). Lossless: sum_d proposal(d) transport(p, proposal, d) = p.
    """
    return verifier("sps").transport(p, proposal, drafts)


def verify(p, proposal, drafts, rng: check.RngLike = None):
    """One verified token per row with ``proposal`` (TLI, RDK p', first-order RDK) used everywhere.

    ``p``, ``proposal`` (V,) or (B, V); ``drafts`` (1,) or (B, 1), drawn from ``proposal``.
    Returns ``(token, accepted)`` like :meth:`multidraft.Verifier.verify` (the ``"sps"`` verifier).
    """
    return verifier("sps").verify(p, proposal, drafts, rng)


@_device.tensor_route()
def verify_block(p, proposals, drafts, rng: check.RngLike = None) -> np.ndarray:
    """Verify one draft block of lookahead L: the emitted tokens (between 1 and L + 1), int64.

    ``p`` (L + 1, V): the target at the L + 1 positions of the drafted block (from one target
    forward pass); ``proposals`` (L, V): the proposal each draft was sampled from; ``drafts`` (L,).
    Drafts are verified in order by speculative sampling with the proposal; the first rejection
    emits a residual token and ends the block; if all L are accepted the bonus token is drawn
    from p[L] ([OOV] Algorithm 4). Torch tensors give an int64 tensor on their device.
    """
    if _device.on_device(p, proposals, drafts):
        return _on_device.verify_block(p, proposals, drafts, rng, verify)
    p = check.probabilities(p, "p", ndims=(2,))
    proposals = check.probabilities(proposals, "proposals", ndims=(2,))
    L = proposals.shape[0]
    check_block_shape(p.shape, L, proposals.shape[1])
    drafts = check.tokens(drafts, p.shape[1], L, ndims=(1,))
    seeds = check.row_seeds(rng, L + 1)
    emitted = []
    for j in range(L):
        token, accepted = verify(p[j], proposals[j], drafts[j:j + 1], int(seeds[j]))
        emitted.append(token)
        if not accepted:
            return np.array(emitted, dtype=np.int64)
    bonus = _core.sample_rows(p[L:], seeds[L:])
    return np.array(emitted + [int(bonus[0])], dtype=np.int64)


def _discard_extension(p, q_mask):
    """The masked baseline as plain speculative sampling over V + 1 tokens: the extra token V holds
    the dropped drafter mass 1 - q(I) and has target probability 0, so drafting it is always a
    rejection and the residual is (p - q_mask)^+ (the "discard" scheme of [OOV] Section 1).

    Returns ``(p_ext, q_ext)`` as (B, V + 1) (tensors on their device for tensors off the CPU) and
    whether the caller passed a batch."""
    if _device.on_device(p, q_mask):
        return _on_device.discard_extension(p, q_mask)
    p2, batched = _rows(p, "p")
    q = check.as_array(q_mask, "q_mask")[0]  # a CPU torch tensor too, like p
    check_mask_shape(q.shape, p2.shape if batched else p2.shape[1:])
    q2 = np.asarray(q, dtype=np.float64).reshape(p2.shape)
    if not np.all(np.isfinite(q2)) or np.any(q2 < 0) or np.any(q2.sum(axis=1) > 1 + check.SUM_TOLERANCE):
        raise ValueError(MASK_RULE)
    dropped = np.maximum(1.0 - q2.sum(axis=1, keepdims=True), 0.0)
    q_ext = np.hstack([q2, dropped])
    q_ext /= q_ext.sum(axis=1, keepdims=True)  # only rescales round-off above 1
    return np.hstack([p2, np.zeros((p2.shape[0], 1))]), q_ext, batched


def _discard_drafts(drafts, V: int, batched: bool) -> np.ndarray:
    """Drafts of the discard sampler on the host, with -1 (a dropped drafter token) as the extra token V."""
    d = _device.to_host(drafts) if _device.takes(drafts) else np.asarray(drafts)
    if d.ndim != (2 if batched else 1) or d.shape[-1] != 1:
        raise ValueError(f"'drafts' must be {'(B, 1)' if batched else '(1,)'}, got shape {d.shape}")
    return check.tokens(np.where(d == -1, V, d), V + 1, 1, ndims=(d.ndim,))


@_device.tensor_route()
def masked_transport(p, q_mask, drafts) -> np.ndarray:
    """Exact output law of the masked baseline's discard sampler: (V,) or (B, V).

    ``q_mask`` = :meth:`VocabularyMap.masked` (sums to q(I) <= 1); a draft is a shared target id,
    or -1 when the unpruned drafter drew a token outside I (probability 1 - q(I)), which is an
    immediate rejection. Residual (p - q_mask)^+; acceptance sum min(p, q_mask). Torch tensors
    give tensors on their device, computed there (as every masked function).
    """
    p_ext, q_ext, batched = _discard_extension(p, q_mask)
    V = p_ext.shape[1] - 1
    d = _discard_drafts(drafts, V, batched)
    laws = verifier("sps").transport(p_ext, q_ext, d.reshape(-1, 1))
    return _unbatch(laws[:, :V], batched)


@_device.tensor_route()
def masked_verify(p, q_mask, drafts, rng: check.RngLike = None):
    """One verified token per row of the masked baseline (see :func:`masked_transport`)."""
    p_ext, q_ext, batched = _discard_extension(p, q_mask)
    d = _discard_drafts(drafts, p_ext.shape[1] - 1, batched)
    token, accepted = verifier("sps").verify(p_ext, q_ext, d.reshape(-1, 1), rng)
    if batched:
        return token, accepted
    return (token[0], accepted[0]) if _device.takes(token) else (int(token[0]), bool(accepted[0]))


@_device.tensor_route()
def masked_acceptance(p, q_mask) -> Union[float, np.ndarray]:
    """alpha_mask = sum min(p, q_mask) (q_mask not renormalised): float or (B,)."""
    p_ext, q_ext, batched = _discard_extension(p, q_mask)
    if _device.takes(p_ext):
        alpha = _device.row_sums(_device.torch_module().minimum(p_ext, q_ext))
        return alpha if batched else alpha[0]
    alpha = np.minimum(p_ext, q_ext).sum(axis=1)
    return alpha if batched else float(alpha[0])

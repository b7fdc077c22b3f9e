"""RDK's per-position functions ([OOV]) for torch tensors on an accelerator, computed there.

Each function here is the device body of a public one in :mod:`multidraft.rdk` and follows the NumPy
path's rules and messages: laws are checked and divided by their row sums as
:class:`multidraft._device.Law` does, row sums are :func:`multidraft._device.row_sums` (a row gives
the same numbers alone as in a batch), and only O(1) flags and O(n) token ids per row cross to the
host. CPU tensors take the NumPy path instead (:data:`multidraft._device.CPU_ON_HOST`).
"""
from __future__ import annotations

from .. import _device
from .. import _validation as check
from ._common import MASK_RULE, _nonnegative_vector, check_block_shape, check_mask_shape, effective_size, \
    no_shared_mass


def _torch():
    import torch  # only reached with a tensor in hand

    return torch


def project(vocabulary, q, renormalise: bool):
    """``VocabularyMap._project`` of a tensor: (q on I as target-width rows (B, T), q(I) (B,), batched).

    With ``renormalise`` (TLI, [OOV] Eq. (1)) the rows are divided by q(I) and a row with q(I) = 0
    is refused."""
    torch = _torch()
    _device.begin_call()
    device = _device.call_device(q=q)
    law = _device.Law(q, "q", device, (1, 2))
    vocabulary._check_width(law.raw.shape[-1])
    columns, targets = vocabulary._index_on(device)
    rows = law.rows()
    out = torch.zeros((rows.shape[0], vocabulary.target_size), dtype=torch.float64, device=device)
    out[:, targets] = rows[:, columns]
    mass = _device.row_sums(out)
    empty = (mass <= 0).any() if renormalise else torch.zeros((), dtype=torch.bool, device=device)
    refused, no_mass = _device.to_host(torch.stack([law.bad, empty]))
    if refused:
        law.refuse()
    if no_mass:
        raise no_shared_mass(int(_device.to_host(torch.nonzero(mass <= 0)[0])[0]))
    if renormalise:
        out = out / mass.unsqueeze(-1)
    return out, mass, law.raw.dim() == 2


def _prior(x, size: int, device):
    """``x`` as first-order RDK's prior (size,), float64 on ``device``, and a 0-d bool tensor set
    when it breaks the NumPy path's rules (1-D numeric of length ``size``, finite, >= 0): read with
    the call's other flag, then the NumPy path's own check explains."""
    torch = _torch()
    vector = _device.as_tensor(x, "prior", device)
    numeric = vector.dtype.is_floating_point or _device.host_integer(vector.dtype)
    if vector.dim() != 1 or vector.shape[0] != size or not numeric:
        return vector, torch.ones((), dtype=torch.bool, device=device)
    vector = vector.to(torch.float64)
    return vector, (~torch.isfinite(vector) | (vector < 0)).any()


def taylor(q_prime, prior, n_eff):
    """:func:`multidraft.rdk.taylor_proposal` of tensors, [OOV] Eq. (3): (B, V) rows and batched."""
    torch = _torch()
    _device.begin_call()
    device = _device.call_device(q_prime=q_prime, prior=prior)
    law = _device.Law(q_prime, "q_prime", device, (1, 2))
    V = law.raw.shape[-1]
    prior, prior_bad = _prior(prior, V, device)
    refused, prior_refused = _device.to_host(torch.stack([law.bad, prior_bad]))
    if refused:
        law.refuse()
    if prior_refused:
        _nonnegative_vector(prior.cpu(), "prior", V)  # raises the NumPy path's message
    n_eff = effective_size(n_eff, V)
    rows = law.rows()
    theta = _device.row_sums(rows * prior).unsqueeze(-1)  # pi^T q'
    tilde = (n_eff * rows + theta * prior) / (n_eff + prior)
    return tilde / _device.row_sums(tilde).unsqueeze(-1), law.raw.dim() == 2


def sample(matrix, q_prime, n: int, rng):
    """:meth:`AffinityMatrix.sample` of a tensor: (B, n) int64 on its device and batched.

    Stage 1, i ~ q', and stage 2, j ~ M[i, :], both by inverse CDF on the device (stage 2 over M's
    CSR rows, copied to each device once); the host reads the refusal flag only. Row b's 2n
    uniforms are ``_device.row_uniforms``: the first n for stage 1, the next n for stage 2."""
    _device.begin_call()
    device = _device.call_device(q_prime=q_prime)
    law = _device.Law(q_prime, "q_prime", device, (1, 2))
    _device.refuse_failed(law)
    matrix._check_width(law.raw.shape[-1])
    rows = law.rows()
    uniforms = _device.to_device(_device.row_uniforms(check.row_seeds(rng, rows.shape[0]), 2 * n), device)
    first = _device.inverse_cdf_at(rows, uniforms[:, :n])
    second = matrix._row_draws(first.reshape(-1), uniforms[:, n:].reshape(-1))
    return second.reshape(-1, n), law.raw.dim() == 2


def verify_block(p, proposals, drafts, rng, verify):
    """:func:`multidraft.rdk.verify_block` of tensors: the emitted tokens, int64 on their device.

    ``verify`` is the one-position verification (the ``"sps"`` verifier's, whose device path this
    calls); each position's acceptance is read on the host (it decides whether the block goes on)."""
    torch = _torch()
    _device.begin_call()
    device = _device.call_device(p=p, proposals=proposals, drafts=drafts)
    target = _device.Law(p, "p", device, (2,))
    law = _device.Law(proposals, "proposals", device, (2,))
    _device.refuse_failed(target, law)
    L, V = law.raw.shape
    check_block_shape(target.raw.shape, L, V)
    d = _device.host_tokens(drafts, V, L, (1,))
    seeds = check.row_seeds(rng, L + 1)
    emitted = []
    for j in range(L):
        token, accepted = verify(target.raw[j], law.raw[j], d[j:j + 1], int(seeds[j]))
        emitted.append(token.reshape(1))
        if not _device.to_host(accepted):
            return torch.cat(emitted)
    bonus = _device.sample_rows(target.rows()[L:], seeds[L:])  # all L accepted: the bonus token from p[L]
    return torch.cat(emitted + [bonus])


def discard_extension(p, q_mask):
    """The masked baseline's extension over V + 1 tokens (``verification._discard_extension``) of
    tensors: ``(p_ext, q_ext)`` (B, V + 1) float64 on their device and batched."""
    torch = _torch()
    _device.begin_call()
    device = _device.call_device(p=p, q_mask=q_mask)
    target = _device.Law(p, "p", device, (1, 2))
    q = _device.as_tensor(q_mask, "q_mask", device)
    check_mask_shape(q.shape, target.raw.shape)
    q = q.reshape(-1, q.shape[-1]).to(torch.float64)
    mass = _device.row_sums(q)
    bad = ~torch.isfinite(mass).all() | (q.amin() < 0) | (mass > 1 + check.SUM_TOLERANCE).any()
    refused, q_bad = _device.to_host(torch.stack([target.bad, bad]))
    if refused:
        target.refuse()
    if q_bad:
        raise ValueError(MASK_RULE)
    q_ext = torch.cat([q, (1.0 - mass).clamp(min=0.0).unsqueeze(-1)], -1)
    q_ext = q_ext / _device.row_sums(q_ext).unsqueeze(-1)  # only rescales round-off above 1
    p_rows = target.rows()
    p_ext = torch.cat([p_rows, torch.zeros_like(p_rows[:, :1])], -1)
    return p_ext, q_ext, target.raw.dim() == 2

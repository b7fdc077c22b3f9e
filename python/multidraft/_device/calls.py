"""The device bodies of the public entry points (``Verifier.verify``, ``transport``, ``draft``,
``acceptance``, ``rho``, :func:`multidraft.acceptance_rate`, :func:`multidraft.optimal_subset`):
laws validated on the device, compressed problems (or closed forms) solved, results back on the
call's device. The public functions reach them through :func:`multidraft._device.tensor_route`,
which hands each its host body."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .. import _validation as check
from . import checked, closed_form, host_body, host_view, on_device, takes
from .._plans import draft_kind
from .tensors import begin_call, call_device, row_sums, to_device, torch_module
from .laws import Law, laws, refuse_failed
from .sampling import draw_outside
from .compressed import Compressed, drawn_on_host, host_tokens, kept_outside, solver_groups, verified_on_host


def call_laws(verifier, p, q, drafts):
    """The validated laws of a transport or verify call (:func:`laws`; flags not read yet), the
    drafts on the host, (B, n), and whether the call is batched."""
    begin_call()
    device = call_device(p=p, q=q, drafts=drafts)
    n = verifier._draft_count(drafts, q)
    target, draft, n, batched = laws(p, q, n, verifier.scheme_kind, device)
    d = host_tokens(drafts, draft.values.shape[-1], n, (2,) if batched else (1,)).reshape(-1, n)
    if d.shape[0] != draft.values.shape[0]:
        raise ValueError(f"'drafts' has batch size {d.shape[0]}, but 'p' has {draft.values.shape[0]}")
    return target, draft, d, batched


def _inputs(verifier, p, q, drafts):
    """The validated, compressed rows of a transport or verify call, and the drafts on the host."""
    target, draft, d, batched = call_laws(verifier, p, q, drafts)
    return Compressed(target, draft, kept_outside(verifier)), d, batched


def transport(verifier, p, q, drafts):
    """:meth:`Verifier.transport` of tensors: (V,) or (B, V) float64 on their device."""
    if verifier.name in closed_form.NAMES:
        return closed_form.transport(verifier, checked.Call(verifier, p, q, drafts))
    compressed, d, batched = _inputs(verifier, p, q, drafts)
    independent = verifier.scheme_kind == "independent"
    laws_c = np.zeros((d.shape[0], compressed.ids.shape[1] + 1))
    for rows, k, solver, p_c, q_c in solver_groups(verifier, compressed, independent):
        laws_c[rows, :k + 1] = host_body(solver.transport)(p_c, q_c, compressed.drafts(d, rows, k))
    laws_full = compressed.spread(laws_c)
    return laws_full if batched else laws_full[0]


def verify(verifier, p, q, drafts, rng=None):
    """:meth:`Verifier.verify` of tensors: (token int64, accepted bool), 0-d or (B,), on their device, in
    ONE host read (:mod:`multidraft._device.checked`; Section 11): the closed forms on the device, the
    other verifiers from their compressed problems. ``"khisti"`` with the independent scheme or a
    truncation takes the checked call below (a read of the drafts, one of the counts and checks,
    one of the compressed rows)."""
    if verifier.name in closed_form.NAMES:
        return closed_form.verify(verifier, checked.Call(verifier, p, q, drafts), rng)
    if checked.compressible(verifier):
        return checked.verify_compressed(verifier, p, q, drafts, rng)
    compressed, d, batched = _inputs(verifier, p, q, drafts)
    seeds = check.row_seeds(rng, d.shape[0])
    tokens, accepted, outside = verified_on_host(verifier, compressed, d, seeds)
    device = compressed.ids.device
    token = to_device(tokens, device)
    if outside.any():
        rows = np.flatnonzero(outside)
        token[to_device(rows, device)] = draw_outside(compressed, rows, seeds[rows])
    hit = to_device(accepted, device)
    return (token, hit) if batched else (token[0], hit[0])


def acceptance(verifier, p, q, n=None):
    """:meth:`Verifier.acceptance` of tensors: 0-d or (B,) float64 on their device."""
    return _solved_per_row(verifier, "acceptance", p, q, n)


def rho(verifier, p, q, n):
    """``"spectr"``'s :meth:`rho` of tensors: 0-d or (B,) float64 on their device."""
    return _solved_per_row(verifier, "rho", p, q, n)


def _solved_per_row(verifier, method: str, p, q, n):
    """``verifier.<method>(p, q, n)`` of tensors, one number per row from the compressed rows."""
    begin_call()
    device = call_device(p=p, q=q)
    if n is None and method == "acceptance" and verifier.scheme_kind != "independent":
        n = verifier.fixed_n or 1  # the default of Verifier.acceptance
    if n is not None:
        verifier._check_n(check.count(n))
    target, draft, n, batched = laws(p, q, verifier.fixed_n or n, verifier.scheme_kind, device)
    compressed = Compressed(target, draft, kept_outside(verifier))
    values = np.zeros(draft.values.shape[0])
    for rows, k, solver, p_c, q_c in solver_groups(verifier, compressed, verifier.scheme_kind == "independent"):
        values[rows] = host_body(getattr(solver, method))(p_c, q_c, n)
    out = to_device(values, device)
    return out if batched else out[0]


def _draft_law(verifier, q, device) -> Law:
    """The validated draft law of one row of :meth:`Verifier.draft` and ``draft_probability``, in the
    layout of :class:`Compressed`: (1, rows, V)."""
    draft = Law(q, "q", device, (2,) if verifier.scheme_kind == "independent" else (1,))
    draft.values = draft.values.reshape(1, -1, draft.raw.shape[-1])
    return draft


def _draws(verifier, draft: Law, n: int, rngs: Sequence) -> np.ndarray:
    """(B, n) int64 token ids on the host: row b drawn as ``verifier.draft`` draws it from its
    compressed law with ``rngs[b]`` (one compression and one host read for all rows)."""
    return drawn_on_host(verifier, Compressed(None, draft), n, rngs)


def draft(verifier, q, n, rng=None):
    """:meth:`Verifier.draft` of a tensor ``q``: (n,) int64 on its device."""
    begin_call()
    device = call_device(q=q)
    return to_device(_draws(verifier, _draft_law(verifier, q, device), n, [rng])[0], device)


def draft_rows(verifier, q, n: int, seeds: Sequence[int]) -> np.ndarray:
    """(N, n) int64 draft ids on the host: row i drawn as ``verifier.draft(q[i], n, seeds[i])``
    draws it, for the N laws of ``q`` (N, V) (a tensor or an array) in one call: on a device one
    validation, one compression and one host read of the compressed laws for all rows (the
    generation loop draws every node of a depth this way); on the host, row by row."""
    if not on_device(q):
        rows = host_view(q, "q") if takes(q) else q
        return np.stack([np.asarray(host_body(verifier.draft)(rows[i], n, seed)) for i, seed in enumerate(seeds)])
    begin_call()
    draft = Law(q, "q", call_device(q=q), (2,))
    draft.values, draft.scale = draft.raw.unsqueeze(1), draft.sums.unsqueeze(1)
    return _draws(verifier, draft, n, [int(seed) for seed in seeds])


def draft_probability(verifier, q, drafts):
    """:meth:`Verifier.draft_probability` of tensors: a 0-d float64 tensor on their device."""
    begin_call()
    device = call_device(q=q, drafts=drafts)
    compressed = Compressed(None, _draft_law(verifier, q, device))
    k = int(compressed.count[0])
    _, q_c = compressed.problem(np.array([0]), k, verifier.scheme_kind == "independent")
    d = host_tokens(drafts, compressed.support.shape[-1], None, (1,))
    value = host_body(verifier.draft_probability)(q_c[0], compressed.drafts(d.reshape(1, -1), np.array([0]), k)[0])
    return to_device(np.array(value, dtype=np.float64), device)


def acceptance_rate(p, q):
    """:func:`multidraft.acceptance_rate` of tensors, on their device: sum_i min(p_i, q_i)."""
    torch = torch_module()
    begin_call()
    device = call_device(p=p, q=q)
    target, draft, _, batched = laws(p, q, 1, "iid", device)
    refuse_failed(target, draft)
    out = row_sums(torch.minimum(target.values / target.scale.unsqueeze(-1),
                                 draft.values[:, 0] / draft.scale[:, :1]))
    return out if batched else out[0]


def optimal_subset(p, q, n=None, *, scheme=None, host):
    """:func:`multidraft.optimal_subset` of tensors: ``(alpha, H)`` on their device. H* lies inside S (a
    token of draft mass 0 only adds target mass to psi), so the compressed minimiser, scattered back,
    is the full one. ``host``: the NumPy body (:func:`multidraft._device.tensor_route` passes it)."""
    kind = draft_kind(p, q, scheme)
    begin_call()
    device = call_device(p=p, q=q)
    target, draft, n, batched = laws(p, q, n, kind, device)
    compressed = Compressed(target, draft)
    B, K = compressed.ids.shape
    alpha, in_H = np.zeros(B), np.zeros((B, K + 1))
    for rows, k in compressed.groups():
        p_c, q_c = compressed.problem(rows, k, kind == "independent")
        alpha[rows], subset = host(p_c, q_c, n, scheme=kind)
        in_H[rows, :k + 1] = subset
    H = compressed.spread(in_H) > 0  # the outside column is never in H*: spread gives it 0 there
    values = to_device(alpha, device)
    return (values, H) if batched else (values[0], H[0])

"""Probability laws and logits on a device: a call's ``p`` and ``q`` validated with the rules and
messages of :mod:`multidraft._validation` (:class:`Law`: flags computed on the device, read with the
call's other small numbers, explained on the host), and the softmax of logits
(docs/design/device-path.md, Sections 1 and 10)."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from .. import _validation as check
from .tensors import begin_call, call_device, row_sums, to_device, to_host, torch_module


def as_tensor(x, name: str, device):
    """``x`` as a tensor on ``device``: a tensor itself, a NumPy array or list copied there."""
    if isinstance(x, torch_module().Tensor):
        return x.detach()
    array, _ = check.as_array(x, name)
    if array.dtype == object or array.dtype.kind not in "iuf":
        raise ValueError(f"'{name}' must be a float16, float32 or float64 array or a torch tensor of floats, "
                         f"got dtype {array.dtype}")
    return to_device(array, device)


class Law:
    """One probability argument on its device: ``values``, its entries as passed (no O(V) copy: the
    gathered entries are converted to float64 and divided by their row's float64 sum, ``scale``, the
    law :func:`_validation.probabilities` returns), and ``bad``, a 0-d bool tensor set when a rule
    of that function fails (read with the call's other small numbers, then :meth:`refuse` explains).
    With ``measure=False`` the shapes are checked only: the caller sums the law with others
    (:meth:`measured`) and applies the rules on the host to what it reads (:meth:`failed`), without
    ``bad``."""

    def __init__(self, x, name: str, device, ndims: Sequence[int], measure: bool = True):
        torch = torch_module()
        tensor = as_tensor(x, name, device)
        if tensor.dtype == torch.bool or tensor.is_complex() or tensor.is_quantized:
            raise ValueError(f"'{name}' must be a float16, float32 or float64 array or a torch tensor of floats, "
                             f"got dtype {tensor.dtype}")
        if tensor.dim() not in ndims:
            expected = " or ".join(f"{d}-D" for d in ndims)
            raise ValueError(f"'{name}' must be {expected}, got shape {tuple(tensor.shape)}")
        if tensor.numel() == 0:
            raise ValueError(f"'{name}' is empty (shape {tuple(tensor.shape)})")
        self.name, self.stored, self.raw = name, tensor.dtype, tensor
        self.tolerance = check.sum_tolerance(tensor.dtype, tensor.shape[-1])
        self.values = tensor
        if not measure:  # a public call's laws: summed together, checked with its one read (checked.Call)
            return
        self.sums = row_sums(tensor)
        # a NaN or an infinite entry makes its row's sum NaN or infinite: two reductions check all
        self.bad = ~torch.isfinite(self.sums).all() | (tensor.amin() < 0) \
            | ((self.sums - 1.0).abs() > self.tolerance).any()
        self.scale = self.sums

    def measured(self, sums) -> None:
        """Take the row sums (one per row of :attr:`values`, float64 on the device) of a law made with
        ``measure=False`` (summed with others: :func:`stacked_row_sums`)."""
        self.sums = sums.reshape(self.raw.shape[:-1])
        self.scale = sums.reshape(self.values.shape[:-1])

    def failed(self, sums: np.ndarray, minima: np.ndarray) -> bool:
        """The rule of :attr:`bad` on the host, from this law's row sums and row minima read there: a
        row sum not finite (a NaN or an infinite entry), a negative entry, or a row sum off 1 by more
        than the tolerance."""
        return bool(not np.isfinite(sums).all() or (minima < 0).any() or (np.abs(sums - 1.0) > self.tolerance).any())

    def rows(self):
        """The whole law as (B, V) float64 rows divided by their sums: an O(V) copy, for the calls
        whose result is a law over the vocabulary."""
        return self.raw.reshape(-1, self.raw.shape[-1]).to(torch_module().float64) / self.sums.reshape(-1, 1)

    def refuse(self) -> None:
        """Raise the ValueError of :func:`_validation.probabilities` for this (refused) argument."""
        torch = torch_module()
        values = self.raw.to(torch.float64)
        for failed, what in ((~torch.isfinite(values), "is not finite"), (values < 0, "has a negative entry")):
            where = torch.nonzero(failed)
            if where.shape[0]:
                index = tuple(int(i) for i in to_host(where[0]))
                raise ValueError(f"'{self.name}' {what} at index {index}")
        off = torch.nonzero(((self.sums - 1.0).abs() > self.tolerance).reshape(self.sums.shape))
        row = tuple(int(i) for i in to_host(off[0])) if off.shape[0] else ()
        total = float(to_host(self.sums.reshape(-1)[0] if not row else self.sums[row]))
        where = "" if self.raw.dim() == 1 else f" in row {row[0] if len(row) == 1 else row}"
        raise ValueError(f"'{self.name}' must sum to 1 within {self.tolerance:.3g} (the tolerance for {self.stored} "
                         f"at V = {self.raw.shape[-1]}), but sums to {total!r}{where}")


def refuse_failed(*laws: Law) -> None:
    """Read the laws' refusal flags in one host read; the first law that failed explains itself."""
    torch = torch_module()
    for law, failed in zip(laws, to_host(torch.stack([law.bad for law in laws]))):
        if failed:
            law.refuse()


def laws(p, q, n: Optional[int], kind: str, device, measure: bool = True):
    """Validated laws of a call, in the layout of :func:`schemes.batched_inputs`:
    ``(p Law (B, V), q Law (B, rows, V), n, batched)``; ``p`` may be None (draft-only calls).
    ``measure=False``: the laws' shapes checked, their sums left to the caller (:meth:`Law.measured`)."""
    target = Law(p, "p", device, (1, 2), measure) if p is not None else None
    rank = target.raw.dim() if target is not None else None
    if kind == "independent":
        draft = Law(q, "q", device, (rank + 1,) if rank else (2, 3), measure)
        if n is not None and check.count(n) != draft.raw.shape[-2]:
            raise ValueError(f"'n' = {n} does not match the {draft.raw.shape[-2]} draft rows of 'q'")
        n = draft.raw.shape[-2]
        batched = draft.raw.dim() == 3
    else:
        draft = Law(q, "q", device, (rank,) if rank else (1, 2), measure)
        if n is None:
            raise ValueError("'n' (the number of drafts) is required unless 'q' holds one row per draft model")
        n = check.count(n)
        batched = draft.raw.dim() == 2
    if target is not None:
        check.same_vocabulary(target.raw.shape[-1], draft.raw, "q")
        if batched and draft.raw.shape[0] != target.raw.shape[0]:
            raise ValueError(f"'q' has batch size {draft.raw.shape[0]}, but 'p' has {target.raw.shape[0]}")
    V = draft.raw.shape[-1]
    B = draft.raw.shape[0] if batched else 1
    if target is not None:
        target.values = target.raw.reshape(B, V)
    draft.values = draft.raw.reshape(B, -1, V)
    if measure:
        for law in (target, draft):
            if law is not None:
                law.measured(law.sums)
    return target, draft, n, batched


# ----------------------------------------------------------------------------- softmax

def softmax(logits, temperature: float = 1.0):
    """:func:`multidraft.softmax` of a tensor: float64 on its device, the same rules and messages."""
    probs, flags = softmax_deferred(logits, temperature)
    if to_host(flags).any():
        refuse_logits(logits)
    return probs


def softmax_deferred(logits, temperature: float = 1.0, normalise: bool = True):
    """(:func:`softmax` of a tensor, its refusal flag: a 0-d bool tensor on the device, set for the
    logits :func:`refuse_logits` refuses) without reading the flag: a caller that reads the host
    anyway reads it there (the generation loop: :class:`multidraft._device.loop.Checks`).
    ``normalise=False`` leaves out the division by the row sums (each row's largest entry is 1): for
    a caller that renormalises anyway (the loop's top-k cut of a draft law)."""
    check.temperature(temperature)
    torch = torch_module()
    begin_call()
    call_device(logits=logits)
    x = logits.detach()
    if x.dtype == torch.bool or x.is_complex():
        raise ValueError(f"'logits' must be an array of floats, got dtype {x.dtype}")
    if x.dim() not in (1, 2) or x.shape[-1] == 0:
        raise ValueError(f"'logits' must be (V,) or (B, V) with V >= 1, got shape {tuple(x.shape)}")
    x = x.to(torch.float64)
    top = x.amax(-1, keepdim=True)
    # NaN or +inf anywhere makes a row's maximum NaN or +inf; an all -inf row has maximum -inf
    refused = ~torch.isfinite(top).all()
    shifted = x - top if temperature == 1.0 else (x - top) / float(temperature)
    probs = shifted.exp()  # every exponent <= 0, the sum >= 1
    return (probs / row_sums(probs).unsqueeze(-1) if normalise else probs), refused


def refuse_logits(logits) -> None:
    """Raise the ValueError of :func:`softmax` for refused logits (NaN, +inf, a row all -inf)."""
    torch = torch_module()
    x = logits.detach().to(torch.float64)
    refused = torch.isnan(x) | (x == torch.inf)
    where = torch.nonzero(refused)
    if where.shape[0]:
        index = tuple(int(i) for i in to_host(where[0]))
        raise ValueError(f"'logits' has {float(to_host(x[index]))} at index {index}: logits must be finite or -inf")
    empty = torch.nonzero((x.amax(-1) == -torch.inf).reshape(-1))
    row = int(to_host(empty[0])[0])
    raise ValueError(f"'logits' row {row} is all -inf: no token has a positive probability")

"""Next-token laws of the target and the draft: what the verifier sees and what drafts are drawn from.

A law maps logits (N, V) and, when it needs them, the N token prefixes they follow to float64
probabilities (N, V), a tensor on the logits' device: the loop keeps laws where the models are.
:func:`warp_probabilities` (temperature, top-k, top-p) serves :func:`multidraft.hf.generate`;
transformers' logits processors (``_processors``) serve :func:`multidraft.hf.decode`. The SAME law
is applied to the target and the draft logits at every position, with the position's own prefix
(the draft tokens before it included). Also here: the draft law's top-k cut (:func:`truncate_draft`).
"""
from __future__ import annotations

import numbers
from typing import Callable, List, Optional, Sequence

import numpy as np
import torch

from .. import _device
from .. import _validation as check
from .._device import leading, row_sums
from ..logits import softmax


def warp_probabilities(logits, temperature: float = 1.0, top_k: Optional[int] = None,
                       top_p: Optional[float] = None):
    """Sampling distributions from logits: temperature, then top-k, then top-p, in float64.

    ``logits`` (..., V): a NumPy array (or nested list), which gives a float64 NumPy array, or a
    torch tensor, which gives a float64 tensor on its device (computed there). ``temperature == 0``
    gives the one-hot distribution of the argmax (first index on ties), i.e. greedy decoding.
    ``top_k`` keeps the k largest logits (ties at the k-th value kept); ``top_p`` keeps the smallest
    set of most probable tokens whose mass reaches ``top_p`` (the token that crosses it included).
    Rows sum to 1.
    """
    temperature, top_k, top_p = sampling_options(temperature, top_k, top_p)
    if isinstance(logits, torch.Tensor):
        return _warp(logits.detach(), temperature, top_k, top_p)
    return _warp(torch.from_numpy(np.array(logits, dtype=np.float64)), temperature, top_k, top_p).numpy()


def _nan_logits() -> None:
    raise ValueError("'logits' contains NaN")


def _warp(logits: torch.Tensor, temperature: float, top_k: Optional[int], top_p: Optional[float],
          checks=None, normalise: bool = True) -> torch.Tensor:
    """:func:`warp_probabilities` of a tensor, with checked options: a float64 tensor on its device.
    With ``checks`` (a :class:`multidraft._device.loop.Checks`), the refusals are read with the
    caller's next host read instead of now. ``normalise=False``: the law up to a factor per row
    (:func:`deferred_softmax`), for a caller that renormalises it anyway."""
    x = logits.to(torch.float64)
    if x.dim() == 0 or x.shape[-1] == 0:
        raise ValueError(f"'logits' must have a non-empty last (vocabulary) axis, got shape {tuple(x.shape)}")
    if temperature == 0.0 or top_k is not None:  # read x before the softmax, whose checks refuse NaN otherwise
        if checks is None:
            if bool(torch.isnan(x).any()):
                _nan_logits()
        else:
            checks.add(torch.isnan(x).any(), _nan_logits)
    if temperature == 0.0:
        return one_hot_argmax(x)
    if top_k is not None:  # ties at the k-th value as transformers sees them: after the temperature
        x = torch.where(top_k_mask(x / temperature, top_k), x, -torch.inf)
    nucleus = top_p is not None and top_p < 1.0  # its cut reads the normalised mass
    probs = deferred_softmax(x.reshape(-1, x.shape[-1]), temperature, checks, normalise or nucleus).reshape(x.shape)
    if nucleus:
        sorted_probs, order = torch.sort(probs, dim=-1, descending=True, stable=True)  # ties: lowest id first
        mass_before = sorted_probs.cumsum(-1) - sorted_probs
        keep = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, order, mass_before < top_p)
        probs = normalised(torch.where(keep, probs, 0.0))
    return probs


def deferred_softmax(x: torch.Tensor, temperature: float, checks, normalise: bool = True) -> torch.Tensor:
    """:func:`multidraft.softmax` of (N, V) logits; on a device with ``checks``, its refusal is read
    with the caller's next host read, and ``normalise=False`` leaves out the division by the row
    sums (the law up to a factor per row, largest entry 1)."""
    if checks is None or not _device.on_device(x):
        return softmax(x, temperature)
    probs, refused = _device.softmax_deferred(x, temperature, normalise)
    checks.add(refused, lambda: _device.refuse_logits(x))
    return probs


def normalised(x: torch.Tensor) -> torch.Tensor:
    """Rows divided by their sums, added in an order that does not depend on the batch
    (:func:`multidraft._device.row_sums`), so a position's law is the same in any batch."""
    return x / row_sums(x).unsqueeze(-1)


def one_hot_argmax(x: torch.Tensor) -> torch.Tensor:
    """float64 one-hot rows at each row's largest entry (the first on ties)."""
    return torch.zeros(x.shape, dtype=torch.float64, device=x.device).scatter_(-1, x.argmax(-1, keepdim=True), 1.0)


def top_k_mask(x: torch.Tensor, k: int) -> torch.Tensor:
    """True at the k largest entries of each row (ties at the k-th value kept)."""
    if k >= x.shape[-1]:
        return torch.ones(x.shape, dtype=torch.bool, device=x.device)
    return x >= x.topk(k, dim=-1).values[..., -1:]


#: ``draft_top_k="auto"``: keep the most probable draft tokens until their mass reaches this...
AUTO_DRAFT_MASS = 0.995
#: ... but never more than this many (the exact verifiers' cost grows with the draft support).
AUTO_DRAFT_TOKENS = 32


def support_bound(draft_top_k) -> Optional[int]:
    """The most tokens a draft law of the loop holds after :func:`truncate_draft` with
    ``draft_top_k`` (None: no bound)."""
    return AUTO_DRAFT_TOKENS if draft_top_k == "auto" else draft_top_k


def truncate_draft(q, k):
    """The draft law (N, V) restricted to its k most probable tokens ([GR] App. N), renormalised;
    ``k="auto"``: per row, the fewest most probable tokens whose mass reaches
    :data:`AUTO_DRAFT_MASS`, at most :data:`AUTO_DRAFT_TOKENS`; None: q. Exactly that many tokens
    are kept: ties at the cut go to the lower token ids, so the support is bounded (a model in
    bfloat16 ties often) and the same on every device. A float64 NumPy array gives one, a tensor
    gives a float64 tensor on its device."""
    if k is None:
        return q
    if not isinstance(q, torch.Tensor):
        return truncate_draft(torch.from_numpy(np.asarray(q, dtype=np.float64)), k).numpy()
    if k == "auto":
        k = min(AUTO_DRAFT_TOKENS, q.shape[-1])
        top = q.topk(k, dim=-1).values  # (N, k) descending
        count = (top.cumsum(-1) < AUTO_DRAFT_MASS * row_sums(q).unsqueeze(-1)).sum(-1, keepdim=True).clamp(max=k - 1)
        keep = leading(q, top.gather(-1, count), count + 1)
        top = torch.where(torch.arange(k, device=q.device) <= count, top, 0.0)
    elif k >= q.shape[-1]:
        return normalised(q)
    else:
        top = q.topk(k, dim=-1).values
        keep = leading(q, top[..., -1:], k)
    # the kept entries are the top values (tied entries are equal): their sum over k numbers, not V
    return torch.where(keep, q, 0.0) / row_sums(top).unsqueeze(-1)


def draft_top_k_option(value):
    """``draft_top_k`` as given: None, "auto" or a count >= 1 (ValueError otherwise)."""
    if value is None or isinstance(value, str) and value == "auto":
        return value
    if isinstance(value, str):
        raise ValueError(f"'draft_top_k' must be an int >= 1, 'auto' or None, got {value!r}")
    return check.count(value, "draft_top_k")


def sampling_options(temperature, top_k, top_p):
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real) \
            or not np.isfinite(temperature) or temperature < 0:
        raise ValueError(f"'temperature' must be a finite number >= 0, got {temperature!r}")
    if top_k is not None:
        top_k = check.count(top_k, "top_k")
    if top_p is not None:
        if isinstance(top_p, bool) or not isinstance(top_p, numbers.Real) or not 0.0 < top_p <= 1.0:
            raise ValueError(f"'top_p' must be in (0, 1], got {top_p!r}")
        top_p = float(top_p)
    return float(temperature), top_k, top_p


class Law:
    """``law(logits (N, V) tensor, prefixes, owners, checks=None, normalise=True) -> (N, V) float64
    tensor`` on the logits' device (``checks``, ``normalise``: see :func:`_warp`). ``prefixes``: N
    lists of token ids (the full row as transformers sees it, left padding included), built only
    when ``uses_prefixes`` (some processors read them; temperature/top-k/top-p do not);
    ``owners``: the batch row of each of the N positions (processors may keep per-row state)."""

    def __init__(self, function: Callable, uses_prefixes: bool):
        self.function, self.uses_prefixes = function, uses_prefixes

    def __call__(self, logits: torch.Tensor, prefixes: Optional[Sequence[List[int]]],
                 owners: Sequence[int], checks=None, normalise: bool = True) -> torch.Tensor:
        return self.function(logits, prefixes, owners, checks, normalise)


def warp_law(temperature: float, top_k: Optional[int], top_p: Optional[float]) -> Law:
    """The law of :func:`warp_probabilities` with options already checked (:func:`sampling_options`)."""
    return Law(lambda logits, _prefixes, _owners, checks, normalise: _warp(logits, temperature, top_k, top_p, checks,
                                                                          normalise),
               uses_prefixes=False)

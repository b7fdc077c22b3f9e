"""Next-token laws of the target and the draft: what the verifier sees and what drafts are drawn from.

A law maps logits (N, V) and, when it needs them, the N token prefixes they follow to float64
probabilities (N, V), a tensor on the logits' device: the loop keeps laws where the models are.
:func:`warp_probabilities` (temperature, top-k, top-p) serves :func:`multidraft.hf.generate`;
transformers' logits processors serve :func:`multidraft.hf.decode`. The SAME law is applied to the target and the draft logits at every position, with the position's
own prefix (the draft tokens before it included).
"""
from __future__ import annotations

import inspect
import itertools
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
    (:func:`_softmax`), for a caller that renormalises it anyway."""
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
    probs = _softmax(x.reshape(-1, x.shape[-1]), temperature, checks, normalise or nucleus).reshape(x.shape)
    if nucleus:
        sorted_probs, order = torch.sort(probs, dim=-1, descending=True, stable=True)  # ties: lowest id first
        mass_before = sorted_probs.cumsum(-1) - sorted_probs
        keep = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, order, mass_before < top_p)
        probs = normalised(torch.where(keep, probs, 0.0))
    return probs


def _softmax(x: torch.Tensor, temperature: float, checks, normalise: bool = True) -> torch.Tensor:
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
    tensor`` on the logits' device (``checks``, ``normalise``: see :func:`_warp`). ``prefixes``: N lists of token ids (the full row as transformers sees it, left padding
    included), built only when ``uses_prefixes`` (processors read them; temperature/top-k/top-p do not); ``owners``: the
    batch row of each of the N positions (processors may keep per-row state)."""

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


#: Processors whose ``__call__`` never reads ``input_ids``, not even its shape (transformers'
#: logits_process.py): the scores alone give their output, so one call takes every position.
_ID_FREE = ("TemperatureLogitsWarper", "TopKLogitsWarper", "TopPLogitsWarper", "MinPLogitsWarper",
            "TypicalLogitsWarper", "EpsilonLogitsWarper", "EtaLogitsWarper", "TopHLogitsWarper",
            "SuppressTokensLogitsProcessor", "InfNanRemoveLogitsProcessor")
#: Processors whose ``__call__`` reads only the length of the ids (``input_ids.shape[-1]``): they
#: need rectangles of equal prefix length, but no ids on the device.
_LENGTH_ONLY = ("MinLengthLogitsProcessor", "MinNewTokensLengthLogitsProcessor", "SuppressTokensAtBeginLogitsProcessor",
                "ExponentialDecayLengthPenalty")
#: Processors whose output row depends on that row's ids and scores only: any batch will do.
_ROW_WISE = _ID_FREE + _LENGTH_ONLY + ("NoRepeatNGramLogitsProcessor", "NoBadWordsLogitsProcessor",
                                       "SequenceBiasLogitsProcessor")


def _id_free(processor) -> bool:
    """Whether ``processor`` ignores the ids (:data:`_ID_FREE`): it needs no prefixes at all."""
    return type(processor).__name__ in _ID_FREE


def _row_wise(processor) -> bool:
    """Whether ``processor``'s output row depends on that row's ids and scores only (:data:`_ROW_WISE`)."""
    name = type(processor).__name__
    if name == "RepetitionPenaltyLogitsProcessor":  # per-row prompt padding lengths are batch state
        return not isinstance(processor.prompt_ignore_length, torch.Tensor)
    return name in _ROW_WISE


def processor_law(processors, greedy: bool, rows: int) -> Law:
    """The law transformers samples from: the processors on float32 logits, in their order, then
    argmax (greedy) or softmax. A run of processors that ignore the ids is one call over all
    positions. The others take rectangles, so positions are processed in groups of equal prefix
    length (:class:`_Groups`); a processor that may keep per-row state (e.g. the repetition
    penalty's prompt padding of a left-padded batch) gets batches of exactly ``rows`` rows, each
    position in its own row (the other rows repeat one of them and are discarded)."""
    stages = _stages(processors)
    reading = [p for p in processors if not _id_free(p)]
    row_wise = all(_row_wise(p) for p in reading)
    ids_read = any(type(p).__name__ not in _LENGTH_ONLY for p in reading)

    def law(logits: torch.Tensor, prefixes, owners, checks, normalise) -> torch.Tensor:
        groups = _Groups(prefixes, owners, None if row_wise else rows, logits.device, ids_read) if reading else None
        scores = groups.ordered(logits) if groups is not None else logits.detach().to(torch.float32, copy=True)
        for reads_ids, apply in stages:
            if reads_ids:
                scores = groups.apply(apply, scores)
            else:  # ids of the right batch size, never read: an allocation, no copy from the host
                scores = apply(torch.empty((scores.shape[0], 0), dtype=torch.long, device=scores.device), scores)
        if groups is not None:
            scores = groups.restored(scores)
        return one_hot_argmax(scores) if greedy else _softmax(scores, 1.0, checks, normalise)

    return Law(law, uses_prefixes=bool(reading))


def _stages(processors) -> List[tuple]:
    """``[(reads_ids, apply), ...]``: the processors cut into maximal runs that all read the ids or
    all ignore them, in order, so each run of the second kind is one call over every position."""
    runs: List[tuple] = []
    for processor in processors:
        reads_ids = not _id_free(processor)
        if runs and runs[-1][0] == reads_ids:
            runs[-1][1].append(processor)
        else:
            runs.append((reads_ids, [processor]))
    return [(reads_ids, _applier(run)) for reads_ids, run in runs]


def _applier(processors) -> Callable:
    """``processors(ids, scores)`` without its per-call cost: transformers' list inspects every
    processor's signature on every call (a third of the law's time here), so that check is made
    once. A processor that wants extra arguments is left to the list, which refuses it as it
    would in ``generate``."""
    if any(len(inspect.signature(p.__call__).parameters) > 2 for p in processors):
        from transformers import LogitsProcessorList

        return LogitsProcessorList(processors)

    def apply(ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        for processor in processors:
            scores = processor(ids, scores)
        return scores

    return apply


class _Groups:
    """The positions of one law call grouped for the processors that read ids (:func:`_calls`),
    the groups laid consecutively: the scores are put in group order once (a gather, none when
    the order is already the identity, as in a chain or one row's tree), each group is a slice of
    them, and one gather puts them back. What the device needs from the host comes in at most ONE
    upload (:func:`_upload`): each group's prefixes as a rectangle (unless ``ids_read`` is False:
    every processor reads their length only, :data:`_LENGTH_ONLY`, and gets an allocation of that
    shape), the order and its inverse unless it is the identity, and with ``rows`` (a batch of
    exactly that many rows per call) the owners."""

    def __init__(self, prefixes: Sequence[List[int]], owners: Sequence[int], rows: Optional[int], device,
                 ids_read: bool = True):
        groups = _calls(prefixes, owners, rows is None)
        order = [i for group in groups for i in group]
        self.rows, self.identity = rows, order == list(range(len(order)))
        shapes = [(len(group), len(prefixes[group[0]])) for group in groups]
        parts = [np.fromiter(itertools.chain.from_iterable(prefixes[i] for i in group), dtype=np.int64)
                 for group in groups] if ids_read else []
        if not self.identity:
            parts += [np.asarray(order, dtype=np.int64), np.argsort(order)]  # a permutation's argsort: its inverse
        if rows is not None:
            parts += [np.asarray([owners[i] for i in group], dtype=np.int64) for group in groups]
        views = iter(_upload(parts, device) if parts else ())  # read in the order the parts were laid
        self.ids = [next(views).view(shape) if ids_read else torch.empty(shape, dtype=torch.long, device=device)
                    for shape in shapes]
        self.order, self.inverse = (None, None) if self.identity else (next(views), next(views))
        self.owners = [next(views) if rows is not None else None for _ in groups]
        ends = list(itertools.accumulate(len(group) for group in groups))
        self.bounds = [(end - len(group), end) for group, end in zip(groups, ends)]

    def ordered(self, logits: torch.Tensor) -> torch.Tensor:
        """The processors' own float32 copy of the logits, in group order."""
        if self.identity:
            return logits.detach().to(torch.float32, copy=True)
        return logits.detach().index_select(0, self.order).to(torch.float32)  # the gather copied already

    def restored(self, scores: torch.Tensor) -> torch.Tensor:
        """Group-ordered scores back in the positions' order."""
        return scores if self.identity else scores.index_select(0, self.inverse)

    def apply(self, processors: Callable, scores: torch.Tensor) -> torch.Tensor:
        """``processors`` on each group's slice of the group-ordered scores, joined by one ``cat``."""
        out = []
        for (start, stop), ids, where in zip(self.bounds, self.ids, self.owners):
            part = scores[start:stop]
            out.append(processors(ids, part) if where is None else _in_rows(processors, ids, part, where, self.rows))
        return out[0] if len(out) == 1 else torch.cat(out)


def _upload(parts: List[np.ndarray], device) -> List[torch.Tensor]:
    """The int64 host arrays ``parts`` on ``device``, as views of ONE copy: each copy call costs the
    host a fixed time on a GPU, so a law call makes one, not one per group."""
    flat = _device.to_device(np.concatenate(parts), device)
    ends = itertools.accumulate(len(part) for part in parts)
    return [flat[end - len(part):end] for part, end in zip(parts, ends)]


def _in_rows(processors: Callable, ids: torch.Tensor, scores: torch.Tensor, where: torch.Tensor,
             rows: int) -> torch.Tensor:
    """``processors`` on a group of positions with distinct owners ``where``, each in its owner's
    row of a batch of exactly ``rows`` rows (the other rows repeat the first position and are
    discarded), for a processor whose per-row state expects the whole batch."""
    batch_ids, batch_scores = ids[:1].repeat(rows, 1), scores[:1].repeat(rows, 1)
    batch_ids[where], batch_scores[where] = ids, scores
    return processors(batch_ids, batch_scores)[where]


def _calls(prefixes: Sequence[List[int]], owners: Sequence[int], row_wise: bool) -> List[List[int]]:
    """Groups of positions processed by one call: equal prefix lengths, and unless ``row_wise``
    at most one position per batch row."""
    groups: dict = {}
    for i, prefix in enumerate(prefixes):
        layers = groups.setdefault(len(prefix), [])
        layer = next((g for g in layers if row_wise or all(owners[k] != owners[i] for k in g)), None)
        if layer is None:
            layers.append([i])
        else:
            layer.append(i)
    return [group for layers in groups.values() for group in layers]

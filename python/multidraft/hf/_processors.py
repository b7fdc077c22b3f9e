"""transformers' logits processors as a law of :mod:`multidraft.hf` (:func:`processor_law`), for
:func:`multidraft.hf.decode`: each position's law is the processors applied to its own prefix and
scores, as ``generate`` applies them, computed for all positions of a call with few device
operators and at most one copy of ids to the device (docs/benchmarks/launches.md)."""
from __future__ import annotations

import ast
import functools
import inspect
import itertools
import textwrap
from typing import Callable, List, Optional, Sequence

import numpy as np
import torch

from .. import _device
from ._laws import Law, deferred_softmax, one_hot_argmax


#: Processors whose output row depends on that row's scores, their settings and at most the ids'
#: length (transformers' logits_process.py, 5.0 to 5.24): whether a call reads the ids at all, or
#: their length only, is read from the installed version's source of ``__call__`` (:func:`_ids_use`),
#: so a release that starts reading the ids' values takes the general path instead of wrong ids.
_STATELESS = ("TemperatureLogitsWarper", "TopKLogitsWarper", "TopPLogitsWarper", "MinPLogitsWarper",
              "TypicalLogitsWarper", "EpsilonLogitsWarper", "EtaLogitsWarper", "TopHLogitsWarper",
              "SuppressTokensLogitsProcessor", "InfNanRemoveLogitsProcessor", "MinLengthLogitsProcessor",
              "MinNewTokensLengthLogitsProcessor", "SuppressTokensAtBeginLogitsProcessor",
              "ExponentialDecayLengthPenalty")
#: Processors whose output row depends on that row's ids and scores only: any batch will do.
_ROW_WISE = _STATELESS + ("NoRepeatNGramLogitsProcessor", "NoBadWordsLogitsProcessor", "SequenceBiasLogitsProcessor")


def _ids_use(processor) -> str:
    """How ``processor`` uses its ids: ``"none"`` (one call takes every position, no prefixes
    needed), ``"length"`` (only ``ids.shape[-1]``: rectangles of equal prefix length, no ids on the
    device) or ``"values"``. The first two only for a class of :data:`_STATELESS` whose ``__call__``
    source says so."""
    cls = type(processor)
    return _call_reads(cls.__call__) if cls.__name__ in _STATELESS else "values"


@functools.lru_cache(maxsize=None)
def _call_reads(function) -> str:
    """``"none"``, ``"length"`` or ``"values"``: the uses of ``function``'s second parameter (the
    ids) in its body, from its source; ``"values"`` whenever the source cannot tell (not found, a
    wrapper, no such parameter)."""
    try:
        if hasattr(function, "__wrapped__"):  # getsource would show the wrapped function, not the wrapper
            return "values"
        definition = ast.parse(textwrap.dedent(inspect.getsource(function))).body[0]
    except (OSError, TypeError, SyntaxError):
        return "values"
    if not isinstance(definition, ast.FunctionDef):
        return "values"
    parameters = definition.args.posonlyargs + definition.args.args
    if len(parameters) < 2:
        return "values"
    ids = parameters[1].arg
    body = [node for statement in definition.body for node in ast.walk(statement)]
    uses = sum(isinstance(node, ast.Name) and node.id == ids for node in body)
    lengths = sum(_is_length_of(node, ids) for node in body)
    return "none" if uses == 0 else "length" if uses == lengths else "values"


def _is_length_of(node, ids: str) -> bool:
    """Whether ``node`` is ``ids.shape[-1]``."""
    if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape"
            and isinstance(node.value.value, ast.Name) and node.value.value.id == ids):
        return False
    try:
        return ast.literal_eval(node.slice) == -1
    except ValueError:
        return False


def _id_free(processor) -> bool:
    """Whether ``processor`` ignores the ids: it needs no prefixes at all."""
    return _ids_use(processor) == "none"


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
    ids_read = not all(_ids_use(p) == "length" for p in reading)

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
        return one_hot_argmax(scores) if greedy else deferred_softmax(scores, 1.0, checks, normalise)

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
    every processor reads their length only, :func:`_ids_use`, and gets an allocation of that
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

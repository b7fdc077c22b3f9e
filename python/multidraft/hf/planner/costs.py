"""The cost model of the shape search: :func:`round_seconds` (a shape's predicted wall time from
cost curves, the cost arrays it reads) and :func:`measure_costs` (a model's cost curve, measured).
What is ours and in no paper is written up in docs/design/tree-search.md; the code cites its sections.
"""
from __future__ import annotations

import statistics
import time
from typing import Callable, Sequence, Union

import numpy as np

from ... import _validation as check
from ..._device import synchronize
from .._cache import cache_keyword
from .checks import _check_parents, _check_verify_cost
from .tokens import _groups, expected_tokens

Cost = Union[Sequence[float], np.ndarray, Callable[[int], float]]


# ----------------------------------------------------------------------------- costs

def _cost_array(cost: Cost, first: int, last: int, name: str, positive: bool) -> np.ndarray:
    """(last + 1,) float64 costs at indices first..last (entries below ``first`` are 0)."""
    out = np.zeros(last + 1)
    if callable(cost):
        for i in range(first, last + 1):
            out[i] = float(cost(i))
    else:
        try:
            array = np.asarray(cost, dtype=np.float64)
        except (TypeError, ValueError) as error:
            raise ValueError(f"'{name}' must be a 1-D array of seconds or a callable: {error}") from None
        if array.ndim != 1:
            raise ValueError(f"'{name}' must be a 1-D array of seconds, got shape {array.shape}")
        if array.size < last + 1:
            raise ValueError(f"'{name}' has {array.size} entries but {name}[{last}] is needed "
                             f"(indices {first}..{last})")
        out[first:] = array[first:last + 1]
    bad = np.flatnonzero(~np.isfinite(out[first:]) | (out[first:] <= 0 if positive else out[first:] < 0))
    if bad.size:
        i = first + bad[0]
        raise ValueError(f"{name}[{i}] = {float(out[i])} must be a finite number of seconds "
                         f"{'> 0' if positive else '>= 0'}")
    return out


def _pass_widths(parents: np.ndarray) -> np.ndarray:
    """Nodes with children at each depth 0..D-1 (depth 0 = the root): the draft passes' widths."""
    if parents.size == 0:
        return np.zeros(0, np.int64)
    _, _, depth = _groups(parents)
    has_children = np.zeros(parents.size, bool)
    has_children[parents[parents >= 0]] = True
    widths = np.bincount(depth[has_children], minlength=int(depth.max()))
    widths[0] = 1  # the root's pass reads the new token
    return widths


def round_seconds(parents, target_cost: Cost, draft_cost: Cost, verify_cost: float = 0.0,
                  acceptance=None, positional: bool = False) -> float:
    """Predicted wall time (seconds) of one round with tree ``parents`` (M nodes, depth D).

    target_cost[m]: seconds of one target pass over m + 1 tokens (the new token and m nodes),
    an array indexed by m (length >= M + 1) or a callable m -> seconds (> 0).
    draft_cost[w]: seconds of one draft pass over w tokens, w >= 1 (an array's entry 0 is not
    used) or a callable (>= 0). The draft runs once per depth j = 0..D-1 over the nodes of depth
    j that have children (j = 0: the root's pass, one token).
    verify_cost: seconds of loop work per output token (verifying the accepted path and drawing
    the last token), times expected_tokens, which needs ``acceptance`` (and ``positional``).
    Returns target_cost[M] + sum_j draft_cost[width_j] + verify_cost * expected_tokens.
    """
    parents = _check_parents(parents)
    verify_cost = _check_verify_cost(verify_cost)
    widths = _pass_widths(parents)
    target = _cost_array(target_cost, 0, parents.size, "target_cost", positive=True)
    draft = _cost_array(draft_cost, 1, int(widths.max(initial=1)), "draft_cost", positive=False)
    tokens = 0.0
    if verify_cost > 0:
        if acceptance is None:
            raise ValueError("verify_cost > 0 needs acceptance (the loop verifies expected_tokens per round)")
        tokens = expected_tokens(parents, acceptance, positional)
    return float(target[parents.size] + draft[widths].sum() + verify_cost * tokens)


# ----------------------------------------------------------------------------- measurement

def measure_costs(model, context_ids, sizes, repeats: int = 3, cache=None) -> np.ndarray:
    """Seconds of one forward pass of a causal LM over m new tokens after a cached context.

    model: a transformers causal LM. context_ids: (T,) or (B, T) token ids (B rows are timed
    together). sizes: (S,) token counts m >= 1. repeats: timed passes per size (after one
    untimed warm-up pass), of which the median is returned. cache: optional DynamicCache that
    already holds exactly the context (T positions); otherwise one is built from context_ids.
    Each pass feeds m tokens at positions T..T+m-1 with ``use_cache=True`` and the cache is
    cropped back to T after it, so it is left as it was. Returns (S,) float64 seconds.
    """
    import torch
    from transformers import DynamicCache

    ids = torch.as_tensor(context_ids)
    if ids.dim() == 1:
        ids = ids[None]
    if ids.dim() != 2 or ids.shape[1] < 1 or ids.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"'context_ids' must be (T,) or (B, T) integer token ids with T >= 1, got "
                         f"{tuple(ids.shape)} {ids.dtype}")
    sizes = np.asarray(sizes)
    if sizes.ndim != 1 or sizes.size == 0 or not np.issubdtype(sizes.dtype, np.integer) or sizes.min() < 1:
        raise ValueError(f"'sizes' must be a non-empty 1-D array of token counts >= 1, got {sizes!r}")
    repeats = check.count(repeats, "repeats", 1)
    device = next(model.parameters()).device
    ids = ids.to(device=device, dtype=torch.long)
    B, T = ids.shape
    costs = np.empty(sizes.size)
    keyword = cache_keyword(model)
    with torch.inference_mode():
        if cache is None:
            cache = DynamicCache()
            model(input_ids=ids, use_cache=True, **{keyword: cache})
        if cache.get_seq_length() != T:
            raise ValueError(f"'cache' holds {cache.get_seq_length()} positions but context_ids has {T}")
        for index, m in enumerate(sizes.tolist()):
            new = ids[:, torch.arange(m, device=device) % T]  # token values do not change the time
            positions = torch.arange(T, T + m, device=device).expand(B, m)
            mask = torch.ones(B, T + m, dtype=torch.long, device=device)
            times = []
            for repeat in range(repeats + 1):
                synchronize(device)
                start = time.perf_counter()
                model(input_ids=new, position_ids=positions, attention_mask=mask, use_cache=True, **{keyword: cache})
                synchronize(device)
                if repeat:  # the first pass warms up kernels for this shape
                    times.append(time.perf_counter() - start)
                cache.crop(-m)  # negative: remove the m new positions
            costs[index] = statistics.median(times)
        if cache.get_seq_length() != T:
            raise RuntimeError(f"cache.crop left {cache.get_seq_length()} positions instead of {T}")
    return costs

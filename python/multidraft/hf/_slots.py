"""A round's model inputs as cache slots (see ``_tree``): the tokens each model has not read yet,
and the draft chains laid out chain-major."""
from __future__ import annotations

from typing import List

import numpy as np
import torch

from ._tree import TreeCache


def pending_slots(pending: List[List[int]], cache: TreeCache, pad_id: int):
    """The pending tokens of every row, left-padded: ids, valid, position ids, chain (-1), (B, W)."""
    B, device = len(pending), cache.device
    width = max(1, max(len(t) for t in pending))
    ids = torch.full((B, width), pad_id, dtype=torch.long)
    valid = torch.zeros((B, width), dtype=torch.bool)
    pos = torch.zeros((B, width), dtype=torch.long)
    seen = (cache.valid & (cache.chain < 0)).sum(1).cpu()
    for b, tokens in enumerate(pending):
        if tokens:
            ids[b, width - len(tokens):] = torch.tensor(tokens)
            valid[b, width - len(tokens):] = True
            pos[b, width - len(tokens):] = seen[b] + torch.arange(len(tokens))
    return ids.to(device), valid.to(device), pos.to(device), torch.full((B, width), -1, device=device)


def chain_slots(drafts: np.ndarray, active: List[int], B: int, start: torch.Tensor, levels: slice, limits,
                device, pad_id: int):
    """Draft chains as slots (B, n * l): chain-major, levels ``levels`` of every chain, position
    ids ``start[b] + level``; rows not ``active`` and levels at or past a row's limit get padding
    slots."""
    n = drafts.shape[1]
    chosen = drafts[:, :, levels]
    l = chosen.shape[2]
    ids = torch.full((B, n, l), pad_id, dtype=torch.long)
    ids[active] = torch.as_tensor(chosen)
    level = torch.arange(levels.start or 0, (levels.start or 0) + l)
    valid = torch.zeros((B, n, l), dtype=torch.bool)
    valid[active] = (level[None, :] < torch.tensor(limits)[:, None])[:, None, :]
    pos = start.cpu()[:, None, None] + level[None, None, :]
    chain = torch.arange(n)[None, :, None].expand(B, n, l)
    flat = lambda x: x.reshape(B, n * l).to(device)
    return flat(ids), flat(valid), flat(pos.expand(B, n, l).clone()), flat(chain.clone())

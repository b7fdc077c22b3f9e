"""A round's model inputs as cache slots (see ``_tree``): the tokens each model has not read yet,
and draft nodes of the rows' trees (``_round``) with their true positions and ancestry."""
from __future__ import annotations

from typing import List, Sequence

import numpy as np
import torch

from .._device import to_host
from ._round import RoundTree
from ._tree import TreeCache


def pending_slots(pending: List[List[int]], cache: TreeCache, pad_id: int):
    """The pending tokens of every row, left-padded: ids, valid, position ids, node (0), (B, W)."""
    B, device = len(pending), cache.device
    width = max(1, max(len(t) for t in pending))
    ids = torch.full((B, width), pad_id, dtype=torch.long)
    valid = torch.zeros((B, width), dtype=torch.bool)
    pos = torch.zeros((B, width), dtype=torch.long)
    seen = torch.from_numpy(to_host(cache.committed()))
    for b, tokens in enumerate(pending):
        if tokens:
            ids[b, width - len(tokens):] = torch.tensor(tokens)
            valid[b, width - len(tokens):] = True
            pos[b, width - len(tokens):] = seen[b] + torch.arange(len(tokens))
    return ids.to(device), valid.to(device), pos.to(device), torch.zeros((B, width), dtype=torch.long, device=device)


def node_slots(trees: Sequence[RoundTree], active: List[int], B: int, root_pos: torch.Tensor,
               nodes: Sequence[Sequence[int]], device, pad_id: int):
    """The draft nodes ``nodes[r]`` of active row r's tree as slots (B, W), W the most of any row:
    ids, valid, position ids (``root_pos[b]`` + the node's depth) and node ids; rows not active and
    the rest of each row are padding slots."""
    width = max(1, max(len(n) for n in nodes))
    ids = torch.full((B, width), pad_id, dtype=torch.long)
    valid = torch.zeros((B, width), dtype=torch.bool)
    depth = torch.zeros((B, width), dtype=torch.long)
    node = torch.zeros((B, width), dtype=torch.long)
    for tree, b, chosen in zip(trees, active, nodes):
        k = len(chosen)
        if k:
            ids[b, :k] = torch.tensor([tree.tokens[i] for i in chosen])
            valid[b, :k] = True
            depth[b, :k] = torch.tensor([tree.depths[i] for i in chosen])
            node[b, :k] = torch.tensor(chosen)
    pos = torch.from_numpy(to_host(root_pos))[:, None] + depth
    return ids.to(device), valid.to(device), pos.to(device), node.to(device)


def ancestor_tables(trees: Sequence[RoundTree], active: List[int], B: int, width: int, device) -> torch.Tensor:
    """(B, width + 1, width + 1) bool: :meth:`RoundTree.ancestors` of each active row (rows not
    active: the committed tokens and each slot itself only)."""
    table = np.zeros((B, width + 1, width + 1), dtype=bool)
    table[:, :, 0] = True
    table[:, np.arange(width + 1), np.arange(width + 1)] = True
    for tree, b in zip(trees, active):
        table[b] = tree.ancestors(width)
    return torch.from_numpy(table).to(device)

"""A round's model inputs as cache slots (see ``_cache``): the tokens each model has not read yet,
and draft nodes of the rows' trees (``_round``) with their true positions and ancestry.

Slots are built on the host, in NumPy, from what the loop knows (the tokens, the trees and the
cache's host mirrors): a read of a device value would be a synchronisation with the device.
:meth:`TreeCache.forward` copies them to the device, with the mask, in one copy."""
from __future__ import annotations

from typing import List, NamedTuple, Sequence

import numpy as np

from ._round import RoundTree
from ._cache import TreeCache


class Slots(NamedTuple):
    """Slots (B, W) of every row, host arrays: token ids (int64), valid (bool: False for padding),
    position ids (int64) and node ids (int64: 0 for a committed token, i for draft node i)."""
    ids: np.ndarray
    valid: np.ndarray
    pos: np.ndarray
    node: np.ndarray

    def then(self, later: "Slots") -> "Slots":
        """These slots followed by ``later``'s in each row, (B, W + W')."""
        return Slots(*(np.concatenate(pair, axis=1) for pair in zip(self, later)))


def _empty(B: int, width: int, pad_id: int) -> Slots:
    """(B, width) padding slots."""
    return Slots(np.full((B, width), pad_id, dtype=np.int64), np.zeros((B, width), dtype=bool),
                 np.zeros((B, width), dtype=np.int64), np.zeros((B, width), dtype=np.int64))


def pending_slots(pending: List[List[int]], cache: TreeCache, pad_id: int) -> Slots:
    """The pending tokens of every row, left-padded, (B, W): their positions follow the committed
    tokens of the row in ``cache``; node 0."""
    width = max(1, max(len(t) for t in pending))
    slots = _empty(len(pending), width, pad_id)
    seen = cache.committed()
    for b, tokens in enumerate(pending):
        if tokens:
            slots.ids[b, width - len(tokens):] = tokens
            slots.valid[b, width - len(tokens):] = True
            slots.pos[b, width - len(tokens):] = seen[b] + np.arange(len(tokens))
    return slots


def node_slots(trees: Sequence[RoundTree], active: List[int], B: int, root_pos: np.ndarray,
               nodes: Sequence[Sequence[int]], pad_id: int) -> Slots:
    """The draft nodes ``nodes[r]`` of active row r's tree as slots (B, W), W the most of any row:
    ids, valid, position ids (``root_pos[b]`` (B,) + the node's depth) and node ids; rows not
    active and the rest of each row are padding slots (at position ``root_pos[b]``)."""
    slots = _empty(B, max(1, max(len(n) for n in nodes)), pad_id)
    depth = np.zeros(slots.pos.shape, dtype=np.int64)
    for tree, b, chosen in zip(trees, active, nodes):
        k = len(chosen)
        if k:
            slots.ids[b, :k] = [tree.tokens[i] for i in chosen]
            slots.valid[b, :k] = True
            depth[b, :k] = [tree.depths[i] for i in chosen]
            slots.node[b, :k] = chosen
    slots.pos[:] = np.asarray(root_pos)[:, None] + depth
    return slots


def ancestor_tables(trees: Sequence[RoundTree], active: List[int], B: int, width: int) -> np.ndarray:
    """(B, width + 1, width + 1) bool, on the host: :meth:`RoundTree.ancestors` of each active row
    (rows not active: the committed tokens and each slot itself only)."""
    table = np.zeros((B, width + 1, width + 1), dtype=bool)
    table[:, :, 0] = True
    table[:, np.arange(width + 1), np.arange(width + 1)] = True
    for tree, b in zip(trees, active):
        table[b] = tree.ancestors(width)
    return table

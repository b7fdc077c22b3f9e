"""Step 2 of a round: ONE target forward pass over every row's new token and draft nodes; the
target laws computed when verification reaches them."""
from __future__ import annotations

from typing import List

import torch

from ._laws import Law
from ._round import RoundTree
from ._setup import Setup
from ._slots import ancestor_tables, node_slots, pending_slots
from ._cache import TreeCache


def score_round(s: Setup, cache: TreeCache, pending, active, rows, trees: List[RoundTree], V: int,
                checks) -> "TargetLaws":
    """Target logits at the root and at every draft node, in ONE forward pass; their laws on demand."""
    B = len(pending)
    chunk = pending_slots(pending, cache, s.pad_token_id)
    nodes = [list(range(1, len(t.tokens))) for t in trees]
    slots = node_slots(trees, active, B, chunk.pos[:, -1], nodes, s.pad_token_id)
    width = slots[0].shape[1]
    ancestors = ancestor_tables(trees, active, B, width)
    logits = cache.forward(*chunk.then(slots), ancestors, keep=width + 1)[active]
    if logits.shape[-1] != V:
        raise ValueError(f"the target returned {logits.shape[-1]} logits, its LM head has {V} rows")
    return TargetLaws(s.law, logits, rows, active, trees, checks)


class TargetLaws:
    """``laws(r, node)``: the target law (V,) after draft node ``node`` of active row r's tree (0:
    the root), computed when verification reaches it. Verification stops at the first rejection,
    so the laws after it (most of the tree) are never computed; each law is the one plain sampling
    would draw from at that prefix."""

    def __init__(self, law: Law, logits: torch.Tensor, rows, active, trees: List[RoundTree], checks):
        self.law, self.logits, self.rows, self.active, self.trees = law, logits, rows, active, trees
        self.checks = checks  # the laws' refusals, read with the loop's next host read

    def __call__(self, r: int, node: int) -> torch.Tensor:
        return self.batch([(r, node)])[0]

    def batch(self, pairs) -> torch.Tensor:
        """The laws (len(pairs), V) after each (active row r, node) of ``pairs``, in one call of the
        law (a row's law is the same in any batch: docs/design/device-path.md, Section 7)."""
        rows, nodes = [r for r, _ in pairs], [node for _, node in pairs]
        batch = [self.active[r] for r in rows]
        # kept logits: the last pending slot (the root), then node i at slot i
        prefixes = [self.rows[b] + self.trees[r].path(node) for b, r, node in zip(batch, rows, nodes)] \
            if self.law.uses_prefixes else None
        return self.law(self.logits[rows, nodes], prefixes, batch, self.checks)

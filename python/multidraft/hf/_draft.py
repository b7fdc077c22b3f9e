"""Step 1 of a round: each row's draft tree, drawn depth by depth with ONE draft-model pass per
depth for all rows and nodes; each node's children drawn jointly by the verifier's scheme."""
from __future__ import annotations

from typing import List, Optional

import torch

from ._laws import truncate_draft
from ._round import RoundTree
from ._setup import Setup
from ._shape import Tree
from ._slots import ancestor_tables, node_slots, pending_slots
from ._tree import TreeCache


def draft_round(s: Setup, shape: Tree, cache: TreeCache, pending, active, rows, rngs, V: int,
                limits: List[int]) -> List[RoundTree]:
    """The draft trees of the active rows (``limits[r]``: row r's depth limit).

    The draft model first reads each row's pending tokens, which gives the root's law; then, for
    depth d = 1, 2, ..., it reads the depth-d nodes that have children to draw, all rows at once.
    """
    trees = [RoundTree(shape, limit, s.group_cap) for limit in limits]
    chunk = pending_slots(pending, cache, s.pad_token_id)
    root_pos = chunk[2][:, -1]
    B = len(pending)
    logits = cache.forward(*chunk, ancestor_tables((), [], B, 0, cache.device), keep=1)[active, -1]
    prefixes = None if not s.law.uses_prefixes else [rows[b] for b in active]
    laws = _draft_law(s, logits, prefixes, active, V)
    for tree, q, rng in zip(trees, laws, rngs):
        tree.draw(0, s.verifier, q, rng)
    depth = 1
    while True:
        parents = [[i for i in range(1, len(t.tokens)) if t.depths[i] == depth and t.child_slots(i)] for t in trees]
        if not any(parents):
            return trees
        slots = node_slots(trees, active, B, root_pos, parents, cache.device, s.pad_token_id)
        width = max(t.size for t in trees)
        logits = cache.forward(*slots, ancestor_tables(trees, active, B, width, cache.device), keep=slots[0].shape[1])
        picked = [(r, b, k) for r, b in enumerate(active) for k in range(len(parents[r]))]
        flat = logits[[b for _, b, _ in picked], [k for _, _, k in picked]]
        prefixes = None if not s.law.uses_prefixes else \
            [rows[b] + trees[r].path(parents[r][k]) for r, b, k in picked]
        laws = _draft_law(s, flat, prefixes, [b for _, b, _ in picked], V)
        for (r, _, k), q in zip(picked, laws):
            trees[r].draw(parents[r][k], s.verifier, q, rngs[r])
        depth += 1


def _draft_law(s: Setup, logits: torch.Tensor, prefixes: Optional[List[List[int]]], owners, V: int) -> torch.Tensor:
    """The laws (N, V) the drafts are drawn from and the verifier is given, on the models' device:
    the sampling law of the draft logits laid over the target ids, RDK's proposal for an
    out-of-vocabulary draft, top-k cut."""
    return truncate_draft(s.vocabulary.proposal(s.law(s.vocabulary.logits(logits, V), prefixes, owners)),
                          s.draft_top_k)

"""Step 1 of a round: each row's draft tree, drawn depth by depth with ONE draft-model pass per
depth for all rows and nodes; each node's children drawn jointly by the verifier's scheme."""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import torch

from .._device.loop import Checks, draft_all
from ..schemes import draft_seed
from ._laws import support_bound, truncate_draft
from ._round import RoundTree
from ._setup import Setup
from ._shape import Tree
from ._slots import ancestor_tables, node_slots, pending_slots
from ._cache import TreeCache


def draft_round(s: Setup, shape: Tree, cache: TreeCache, pending, active, rows, rngs, V: int,
                limits: List[int], checks: Checks) -> List[RoundTree]:
    """The draft trees of the active rows (``limits[r]``: row r's depth limit; ``checks``: the
    refusals of the laws, read with each depth's one host read).

    The draft model first reads each row's pending tokens, which gives the root's law; then, for
    depth d = 1, 2, ..., it reads the depth-d nodes that have children to draw, all rows at once.
    """
    trees = [RoundTree(shape, limit, s.group_cap) for limit in limits]
    chunk = pending_slots(pending, cache, s.pad_token_id)
    root_pos = chunk[2][:, -1]
    B = len(pending)
    logits = cache.forward(*chunk, ancestor_tables((), [], B, 0), keep=1)[active, -1]
    prefixes = None if not s.law.uses_prefixes else [rows[b] for b in active]
    _draw(s, trees, [(r, 0) for r in range(len(trees))], _draft_law(s, logits, prefixes, active, V, checks), rngs,
          checks)
    depth = 1
    while True:
        parents = [[i for i in range(1, len(t.tokens)) if t.depths[i] == depth and t.child_slots(i)] for t in trees]
        if not any(parents):
            return trees
        slots = node_slots(trees, active, B, root_pos, parents, s.pad_token_id)
        width = max(t.size for t in trees)
        logits = cache.forward(*slots, ancestor_tables(trees, active, B, width), keep=slots[0].shape[1])
        picked = [(r, b, k) for r, b in enumerate(active) for k in range(len(parents[r]))]
        flat = logits[[b for _, b, _ in picked], [k for _, _, k in picked]]
        prefixes = None if not s.law.uses_prefixes else \
            [rows[b] + trees[r].path(parents[r][k]) for r, b, k in picked]
        laws = _draft_law(s, flat, prefixes, [b for _, b, _ in picked], V, checks)
        _draw(s, trees, [(r, parents[r][k]) for r, _, k in picked], laws, rngs, checks)
        depth += 1


def _draw(s: Setup, trees: List[RoundTree], nodes: List[Tuple[int, int]], laws: torch.Tensor, rngs,
          checks: Checks) -> None:
    """Draw the groups of the (row, node) pairs ``nodes`` from their draft laws ``laws`` (N, V):
    one batched draw per verifier and group size, all of them from one host read on a device
    (``_device.loop.draft_all``). Each node's seed comes from its row's generator in node order, as
    drawing them one by one would take it, so the drafts do not depend on the batching."""
    plans = [trees[r].group_verifier(node, s.verifier) for r, node in nodes]
    seeds = [draft_seed(verifier.scheme_kind, rngs[r]) for (r, _), (verifier, _) in zip(nodes, plans)]
    calls: Dict[Tuple[int, int], List[int]] = {}
    for i, (verifier, k) in enumerate(plans):
        calls.setdefault((id(verifier), k), []).append(i)
    indices = list(calls.values())
    drawn = draft_all([(plans[index[0]][0], laws[index] if len(index) < len(nodes) else laws, plans[index[0]][1],
                        [seeds[i] for i in index]) for index in indices], support_bound(s.draft_top_k), checks)
    for index, drafts in zip(indices, drawn):
        for i, row in zip(index, drafts):
            r, node = nodes[i]
            trees[r].add_group(node, plans[i][0], laws[i], row)


def _draft_law(s: Setup, logits: torch.Tensor, prefixes: Optional[List[List[int]]], owners, V: int,
               checks: Checks) -> torch.Tensor:
    """The laws (N, V) the drafts are drawn from and the verifier is given, on the models' device:
    the sampling law of the draft logits laid over the target ids, RDK's proposal for an
    out-of-vocabulary draft, top-k cut. The cut renormalises, so a law it cuts directly is left
    unnormalised (RDK's proposal takes normalised laws)."""
    cut_directly = s.draft_top_k is not None and s.vocabulary.proposal_is_identity
    law = s.law(s.vocabulary.logits(logits, V), prefixes, owners, checks, normalise=not cut_directly)
    return truncate_draft(s.vocabulary.proposal(law), s.draft_top_k)

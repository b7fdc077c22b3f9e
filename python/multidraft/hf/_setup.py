"""One call's setup: the caller's arguments checked and gathered in :class:`Setup`, the record
the loop (``_loop``) reads; :func:`multidraft.hf.generate` and :func:`multidraft.hf.decode` build it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple, Union

import numpy as np
import torch

from .. import _validation as check
from ..verifiers import Verifier, verifier as make_verifier
from ._laws import Law, support_bound
from ._oov import DraftVocabulary
from ._shape import Tree
from ._stats import GenerationStats
from .planner import AutoTree, check_group, largest_group, read_budget

# The default verifier and the options of verifiers given by name (documented where the package
# exports them, multidraft.hf.DEFAULT_VERIFIER and multidraft.hf.NAMED_OPTIONS).
DEFAULT_VERIFIER = "global_resolution"
NAMED_OPTIONS: Dict[str, Dict[str, object]] = {}


def resolve_verifier(verifier: Union[str, Verifier], shape: Optional[Tree]) -> Verifier:
    """The verifier a call names (by name with :data:`NAMED_OPTIONS`, or given), refused when the loop
    cannot run it on the draft tree ``shape`` (groups of drafts from one draft model; None: any
    shape the planner of tree="auto" picks, within the verifier's largest group)."""
    v = make_verifier(verifier, **NAMED_OPTIONS.get(verifier, {})) if isinstance(verifier, str) else verifier
    if not isinstance(v, Verifier):
        raise ValueError(f"'verifier' must be a name of multidraft.verifier_names() or a Verifier, got {verifier!r}")
    if v.scheme_kind == "independent":
        raise ValueError(f"verifier {v!r} needs one draft model per draft ('independent' scheme); "
                         "multidraft.hf drafts all sequences from one draft model")
    root, widest = (v.fixed_n, v.fixed_n) if shape is None else (len(shape.children[-1]), shape.widest_group())
    if v.fixed_n is not None and (root != v.fixed_n or widest > v.fixed_n):
        raise ValueError(f"verifier {v.name!r} takes exactly {v.fixed_n} draft(s) per group: 'num_drafts' must be "
                         f"{v.fixed_n} (or a tree whose root has {v.fixed_n} children and no node more), got {root} "
                         f"root children and at most {widest} per node")
    return v


def row_generators(seed, rows: int) -> List[np.random.Generator]:
    """One generator per prompt: ``md.row_seeds(seed, rows)`` (an int seed alone seeds a single
    prompt directly), so row b of a batch equals a one-prompt call with ``seed=row_seeds[b]``."""
    return [np.random.default_rng(int(s)) for s in check.row_seeds(seed, rows)]


def read_prompts(input_ids, attention_mask) -> Tuple[torch.Tensor, List[List[int]]]:
    """(input_ids as (B, T) int64 on the CPU, the real tokens of each row)."""
    ids = torch.as_tensor(input_ids)
    if ids.ndim == 1:
        ids = ids[None]
    if ids.ndim != 2 or ids.shape[0] == 0 or ids.dtype.is_floating_point:
        raise ValueError(f"'input_ids' must be a (B, T) integer tensor, got shape {tuple(ids.shape)} {ids.dtype}")
    ids = ids.to(torch.long).cpu()
    mask = torch.ones_like(ids) if attention_mask is None else torch.as_tensor(attention_mask).reshape(ids.shape[0], -1)
    if mask.shape != ids.shape:
        raise ValueError(f"'attention_mask' must have the shape of 'input_ids' {tuple(ids.shape)}, got {tuple(mask.shape)}")
    prompts = [ids[b][mask[b].cpu() != 0].tolist() for b in range(ids.shape[0])]
    if any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token (a row of 'attention_mask' is all zeros)")
    return ids, prompts


def token_ids(ids, name: str) -> List[int]:
    """An id or a sequence of ids (``eos_token_id``) as a list of non-negative ints."""
    values = [ids] if isinstance(ids, (int, np.integer)) else list(ids)
    for i in values:
        check.count(i, name, minimum=0)
    return [int(i) for i in values]


@dataclass
class Setup:
    """Everything one call of the loop needs (built by :func:`generate` or :func:`decode`, always
    with keywords: the fields are many and several share a type)."""

    target: object
    draft: object
    ids: torch.Tensor                  # (B, T) as given, padding included: the rows processors see
    prompts: List[List[int]]           # real tokens of each row (what the models are fed)
    law: Law
    stopping: Callable                 # StoppingCriteriaList: (input_ids, scores) -> (rows,) bool
    shape: Tree                        # the draft tree of every round (the first one with a planner)
    verifier: Verifier
    draft_top_k: Union[None, int, str]  # None, a count or "auto" (see _laws.truncate_draft)
    seed: object
    pad_token_id: int
    max_length: Optional[int] = None   # rows end there: later draft positions would be wasted
    streamer: object = None
    kv_cache: bool = True
    vocabulary: DraftVocabulary = DraftVocabulary(None, None)  # draft logits -> proposal over target ids
    node_budget: Optional[int] = None  # tree="auto": the most draft nodes of a round
    planner: Optional[Callable] = None  # tree="auto": (stats) -> the next round's Tree (set by start)
    group_cap: Optional[int] = None    # the most drafts drawn at one node (set by start)

    def start(self, V: int) -> None:
        """Before any forward pass: set ``group_cap``, the most drafts the verifier draws at one
        node (see ``planner.budget``), after a ValueError for a shape whose verification would stall;
        with ``tree="auto"`` build the planner (its cost curves are measured on first use)."""
        support = V if self.draft_top_k is None else min(V, support_bound(self.draft_top_k))
        if self.node_budget is None:
            self.group_cap = check_group(self.verifier, support, self.shape.widest_group())
        else:
            self.group_cap = largest_group(self.verifier, support)
            self.planner = AutoTree(self.target, self.draft, self.verifier, self.node_budget, self.group_cap,
                                    self.prompts[0])

    def new_stats(self) -> GenerationStats:
        return GenerationStats(len(self.shape.children[-1]), self.shape.depth, self.verifier.name, self.shape.parents)

    def shape_for_round(self, stats: GenerationStats) -> Tree:
        """The round's draft tree: ``shape``, or the planner's choice from the statistics so far."""
        if self.planner is not None:
            self.shape = self.planner(stats)
            stats.tree, stats.num_drafts = self.shape.parents, len(self.shape.children[-1])
            stats.draft_length = max(stats.draft_length, self.shape.depth)
        return self.shape


def read_tree(tree, num_drafts, draft_length, node_budget=None) -> Tuple[Tree, Optional[int]]:
    """(the shape a call asks for, the node budget of ``tree="auto"`` or None): ``tree`` (a
    :class:`Tree`, branching widths or "auto") or chains of ``num_drafts`` x ``draft_length``
    (defaults 2 and 4); ValueError when both are given. For "auto" the shape is a placeholder
    until the planner's first choice."""
    auto, budget = read_budget(tree, node_budget)
    if tree is None:
        n = 2 if num_drafts is None else check.count(num_drafts, "num_drafts")
        L = 4 if draft_length is None else check.count(draft_length, "draft_length")
        return Tree.chains(n, L), None
    if num_drafts is not None or draft_length is not None:
        raise ValueError("give either 'tree' or 'num_drafts'/'draft_length' (chains), not both")
    if auto:
        return Tree.chains(1, 1), budget
    if isinstance(tree, str):
        raise ValueError(f"'tree' must be branching widths, a multidraft.hf.Tree or 'auto', got {tree!r}")
    return (tree if isinstance(tree, Tree) else Tree.branching(tree)), None

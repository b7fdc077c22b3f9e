"""``tree="auto"``: each round's draft tree chosen for the most expected tokens per second, from
the run's own acceptance statistics (``acceptance``) and the models' measured cost curves
(``costs``), searched by ``search`` (docs/design/tree-search.md).

The cost curves (seconds of a target pass over m + 1 tokens, of a draft pass over w tokens) are
measured once per model, device and dtype on the first call and kept for the process; what the
call's rounds spend beyond them (the tree mask, the draft laws and draws) is charged per draft
node, and the verification per output token, both from the call's own timings; the acceptance by
group size starts from the estimator's prior and learns from every verified group.
The tree is re-planned after rounds 1, 2, 4, 8, ... (per call), so the search costs little
against the rounds it shapes. The shape only decides which drafts are drawn: every round is
verified exactly whatever the shape, so the output law is the target's.
"""
from __future__ import annotations

import threading
import weakref
from typing import Dict, Optional, Tuple

import numpy as np

from .._shape import Tree
from .._stats import GenerationStats
from .acceptance import AcceptanceEstimate
from .costs import measure_costs, round_seconds
from .search import choose_tree

#: Node budget of ``tree="auto"`` when ``node_budget`` is not given.
DEFAULT_NODE_BUDGET = 16
#: Deepest tree ``tree="auto"`` considers.
MAX_AUTO_DEPTH = 8
#: Root nodes per call at which the verifier's exact acceptance for every group size is observed
#: (it teaches the estimate the whole curve at once; later groups are counted as they come).
EXACT_OBSERVATIONS = 4

_COSTS: "weakref.WeakKeyDictionary[object, Dict[tuple, np.ndarray]]" = weakref.WeakKeyDictionary()
_COSTS_LOCK = threading.Lock()


def cost_curve(model, context, largest: int) -> np.ndarray:
    """(largest + 1,) seconds of one pass of ``model`` over 1..largest tokens after ``context``
    (entry 0 copies entry 1), measured at powers of two and interpolated linearly; kept per
    model, device and dtype."""
    parameter = next(model.parameters())
    key = (str(parameter.device), str(parameter.dtype), largest)
    with _COSTS_LOCK:
        known = _COSTS.setdefault(model, {}).get(key)
    if known is None:
        sizes = sorted({1, largest} | {2 ** i for i in range(1, largest.bit_length()) if 2 ** i < largest})
        measured = measure_costs(model, context, np.array(sizes))
        known = np.interp(np.arange(largest + 1), sizes, measured)
        known[0] = known[1]
        with _COSTS_LOCK:
            _COSTS[model][key] = known
    return known


class AutoTree:
    """The planner of ``tree="auto"``: ``planner(stats) -> Tree`` for the next round."""

    def __init__(self, target, draft, verifier, budget: int, group_cap: Optional[int], context):
        self.budget, self.depth = budget, min(MAX_AUTO_DEPTH, budget)
        self.widest = budget if group_cap is None else min(budget, group_cap)
        # top-k drafts (any verifier with the "topk" scheme) are positional, the other schemes exchangeable
        self.verifier, self.positional = verifier, verifier.scheme_kind == "topk"
        self.exact_left = EXACT_OBSERVATIONS if verifier.cheap_acceptance else 0
        self.target_costs = cost_curve(target, context, budget + 1)[1:]  # [m]: a pass over m + 1 tokens
        self.draft_costs = cost_curve(draft, context, max(1, budget // 2))
        self.estimate = AcceptanceEstimate()
        self.seen = (np.zeros(0, np.int64), np.zeros(0, np.int64))
        self.next_plan, self.shape = 0, None
        self.shape_seconds = 0.0  # the passes' predicted seconds of one round of ``shape``
        self.model_seconds = 0.0  # the passes' predicted seconds of the rounds run so far

    def __call__(self, stats: GenerationStats) -> Tree:
        if self.shape is None or stats.row_rounds >= self.next_plan:
            self._learn(stats)
            verify = stats.verify_seconds / stats.new_tokens if stats.new_tokens else 0.0
            target = self.target_costs + self._node_overhead(stats) * np.arange(len(self.target_costs))
            choice = choose_tree(self.estimate.curve(self.widest), target, self.draft_costs, self.budget,
                                 self.depth, self.positional, verify)
            self.shape = Tree(choice.parents)
            self.shape_seconds = round_seconds(choice.parents, self.target_costs, self.draft_costs)
            self.next_plan = max(1, 2 * stats.row_rounds)
        self.model_seconds += self.shape_seconds
        return self.shape

    @property
    def observing(self) -> bool:
        """Whether :meth:`observe_root` still learns from roots (the loop computes their laws only then)."""
        return self.exact_left > 0

    def observe_root(self, p: np.ndarray, q: np.ndarray) -> None:
        """At the first :data:`EXACT_OBSERVATIONS` roots verified: the verifier's exact acceptance
        alpha(k) at that root (target law ``p``, draft law ``q``) for every group size."""
        if not self.observing:
            return
        self.exact_left -= 1
        for k in range(1, (self.verifier.fixed_n or self.widest) + 1):
            if self.verifier.fixed_n in (None, k):
                self.estimate.observe_exact(k, float(self.verifier.acceptance(p, q, k)))

    def _node_overhead(self, stats: GenerationStats) -> float:
        """Seconds per draft node that the rounds so far spent beyond the models' measured passes
        (the attention mask, the draft laws and draws): added to the cost of scoring m nodes."""
        if not stats.tree_nodes:
            return 0.0
        extra = stats.draft_seconds + stats.target_seconds - self.model_seconds
        return max(0.0, extra / stats.tree_nodes)

    def _learn(self, stats: GenerationStats) -> None:
        """Feed the groups verified since the last plan to the estimate."""
        reached, accepted = self._since(stats.group_reached, 0), self._since(stats.group_accepted, 1)
        for k in range(1, len(reached)):
            self.estimate.observe_counts(k, int(reached[k]), int(accepted[k]))
        self.seen = (stats.group_reached.copy(), stats.group_accepted.copy())

    def _since(self, counts: np.ndarray, which: int) -> np.ndarray:
        before = self.seen[which]
        return counts - np.pad(before, (0, len(counts) - len(before)))


def read_budget(tree, node_budget) -> Tuple[bool, Optional[int]]:
    """(whether the call asks for ``tree="auto"``, its node budget); ValueError for a budget
    without ``tree="auto"``."""
    from ... import _validation as check

    auto = isinstance(tree, str) and tree == "auto"
    if node_budget is not None and not auto:
        raise ValueError("'node_budget' applies to tree='auto' only")
    if not auto:
        return False, None
    return True, DEFAULT_NODE_BUDGET if node_budget is None else check.count(node_budget, "node_budget")

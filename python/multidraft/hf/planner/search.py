"""The shape search: :func:`best_trees` (the best shape for every node count and depth limit, a
dynamic programme over subtree sizes) and :func:`choose_tree` (the most expected tokens per second
over that table, timed by the cost model). What is ours and in no paper is written up in
docs/design/tree-search.md; the code cites its sections.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Tuple

import numpy as np

from ... import _validation as check
from .checks import _check_acceptance, _check_verify_cost
from .costs import Cost, _cost_array

# A relative tolerance for "equally fast": ties go to the smaller, then shallower tree.
_TIE = 1e-12
# Limits that keep the programme's time O(depth * budget^3) and memory O(depth * budget^2 +
# budget * depth^2) bounded; a round of more nodes or more sequential draft passes serves no hardware.
_MAX_BUDGET = 1024
_MAX_DEPTH = 64


# ----------------------------------------------------------------------------- the programme

def _knapsack_buffer(size: int) -> Tuple[np.ndarray, np.ndarray]:
    """A buffer [-inf] * size + h and its read-only (size, size) view window[s, t] = h[s - t],
    which is -inf for t > s: a max-plus convolution then needs no gather and no mask."""
    padded = np.full(2 * size, -np.inf)
    step = padded.strides[0]
    window = np.lib.stride_tricks.as_strided(padded[size:], shape=(size, size), strides=(step, -step),
                                             writeable=False)
    return padded, window


def _scaled(c, values: np.ndarray) -> np.ndarray:
    """c * values with -inf (no such subtree) kept -inf even where c = 0 (c broadcasts)."""
    return np.where(np.isfinite(values), c * np.where(np.isfinite(values), values, 0.0), -np.inf)


def _add_child(padded: np.ndarray, window: np.ndarray, child: np.ndarray) -> np.ndarray:
    """One knapsack step on h = padded[size:]: h[s] <- max over t of h[s - t] + child[t], in
    place; returns the maximising t (the new child's size, the first on ties)."""
    total = window + child
    t = total.argmax(axis=1)
    padded[child.size:] = total[np.arange(child.size), t]
    return t


@dataclass
class _Level:
    """The DP at one depth limit d, for every subtree size n = 0..N + 1 (its root included)."""
    value: np.ndarray      # (N + 2,) best value of a subtree of n nodes within depth d, -inf if none
    groups: np.ndarray     # (N + 2,) its root's group size, indexed by the children's total size s = n - 1
    last: np.ndarray       # (K + 1, N + 2) size of the k-th child in the best split of s among k children


def _next_level(below: _Level, coef: np.ndarray, scale: np.ndarray) -> _Level:
    """Subtrees of depth <= d from subtrees of depth <= d - 1 (docs/design/tree-search.md, "The programme").

    Children are added one at a time, child k weighted by coef[k]; a root with k children is
    worth 1 + scale[k] * (their weighted sum). Exchangeable: coef = 1, scale = alpha(k)/k;
    positional: coef = alpha(k) - alpha(k-1), scale = 1.
    """
    size = below.value.size
    K = coef.size - 1
    children = _scaled(coef[:, None], below.value[None, :])  # (K + 1, size): child k's weighted values
    padded, window = _knapsack_buffer(size)
    padded[size] = 0.0  # no children yet: total size 0, value 0
    h = padded[size:]
    best, best_k = h.copy(), np.zeros(size, np.int64)
    last = np.zeros((K + 1, size), np.int64)
    for k in range(1, K + 1):
        last[k] = _add_child(padded, window, children[k])
        candidate = scale[k] * h if scale[k] > 0 else _scaled(0.0, h)
        best_k = np.where(candidate > best, k, best_k)  # ties keep the smaller group
        best = np.maximum(best, candidate)
    value = np.full(size, -np.inf)
    value[1:] = 1.0 + best[:-1]
    return _Level(value, best_k, last)


@dataclass
class TreeTable:
    """The best shapes for every node count m = 0..budget and depth limit d = 0..max_depth.

    values: (budget + 1, max_depth + 1) maximal expected tokens per round, -inf where no tree has
    m nodes within depth d and groups of at most K = len(acceptance) children; :meth:`tree`
    gives one tree achieving values[m, d].
    widths: (budget + 1, max_depth + 1, max_depth) ints: widths[m, d, j] = nodes at depth j (the
    root is depth 0) of tree(m, d) that have children, i.e. the width of its draft pass j.
    """
    acceptance: np.ndarray
    positional: bool
    values: np.ndarray
    widths: np.ndarray
    _levels: list = field(repr=False)

    def tree(self, m: int, d: int) -> Tuple[int, ...]:
        """One best tree with m nodes and depth <= d, as parents in breadth-first order.

        Nodes are numbered depth by depth, children in group order (positional: the most
        probable slot first), so parents[i] < i and every depth is a contiguous run.
        """
        m = check.count(m, "m", 0)
        d = check.count(d, "d", 0)
        if m >= self.values.shape[0] or d >= self.values.shape[1]:
            raise ValueError(f"(m, d) = ({m}, {d}) is outside the table (m <= {self.values.shape[0] - 1}, "
                             f"d <= {self.values.shape[1] - 1})")
        if not np.isfinite(self.values[m, d]):
            raise ValueError(f"no tree has {m} nodes within depth {d} and groups of at most "
                             f"{self.acceptance.size} children")
        parents, queue = [], [(-1, d, m + 1)]
        for node, level, size in queue:  # breadth first: the queue grows while it is read
            for child_size in self._split(level, size - 1):
                parents.append(node)
                queue.append((len(parents) - 1, level - 1, child_size))
        return tuple(parents)

    def _split(self, level: int, s: int) -> list:
        """Sizes of the children of a root whose subtree is the best at ``level`` with s descendants."""
        if s == 0:
            return []
        chosen = self._levels[level]
        sizes = []
        for k in range(int(chosen.groups[s]), 0, -1):
            t = int(chosen.last[k][s])
            sizes.append(t)
            s -= t
        return sizes[::-1]


def best_trees(acceptance, budget: int, max_depth: int, positional: bool = False) -> TreeTable:
    """Maximal expected tokens, and a tree achieving it, for every m <= budget nodes and depth <= d.

    acceptance: (K,) nondecreasing alpha(k); budget: the most draft nodes (1..1024); max_depth:
    the deepest depth limit (1..64). Exact for both position models: a subtree's value is 1 + sum over
    its children c_i of w_i(k) * value(c_i), maximised over the split of its size by a max-plus
    knapsack per depth (docs/design/tree-search.md, "The programme"). Time O(max_depth * K' * budget^2),
    K' = min(K, budget), vectorised over sizes; memory O(max_depth * K' * budget).
    """
    alpha = _check_acceptance(acceptance)
    budget = check.count(budget, "budget", 1, _MAX_BUDGET)
    max_depth = check.count(max_depth, "max_depth", 1, _MAX_DEPTH)
    K = min(alpha.size, budget)
    ks = np.arange(1, K + 1)
    if positional:
        coef = np.concatenate([[0.0], np.diff(alpha[:K], prepend=0.0)])
        scale = np.ones(K + 1)
    else:
        coef = np.ones(K + 1)
        scale = np.concatenate([[0.0], alpha[:K] / ks])
    size = budget + 2  # subtree sizes 0..budget + 1 (the implicit root included)
    leaf = np.full(size, -np.inf)
    leaf[1] = 1.0
    levels = [_Level(leaf, np.zeros(size, np.int64), np.zeros((K + 1, size), np.int64))]
    for _ in range(max_depth):
        levels.append(_next_level(levels[-1], coef, scale))
    values = np.stack([level.value[1:] for level in levels], axis=1)
    return TreeTable(alpha, bool(positional), values, _pass_profiles(levels, max_depth), levels)


def _pass_profiles(levels: list, max_depth: int) -> np.ndarray:
    """(budget + 1, max_depth + 1, max_depth) widths of every table tree, without building it.

    A subtree's nodes-with-children by relative depth are its root (if it has children) plus its
    children's profiles one depth down; the children's sizes are read off the DP's choices for
    all sizes at once, largest group first.
    """
    size = levels[0].value.size
    rows = np.arange(size)
    below = np.zeros((size, max_depth), np.int64)
    profiles = [below]
    for level in levels[1:]:
        remaining, summed = rows.copy(), np.zeros_like(below)
        for k in range(int(level.groups.max()), 0, -1):
            active = level.groups >= k
            t = level.last[k][remaining]
            summed += np.where(active[:, None], below[t], 0)
            remaining = np.where(active, remaining - t, remaining)
        below = np.zeros_like(summed)
        below[1:, 1:] = summed[:-1, :-1]
        below[2:, 0] = 1
        below[~np.isfinite(level.value)] = 0
        profiles.append(below)
    return np.stack([profile[1:] for profile in profiles], axis=1)


# ----------------------------------------------------------------------------- the choice

@dataclass
class TreeChoice:
    """The shape :func:`choose_tree` picked and what it predicts.

    parents: the tree (breadth-first, see :meth:`TreeTable.tree`); nodes, depth: its M and D
    (D = the number of draft passes);
    tokens: expected tokens per round; seconds: predicted seconds per round; tokens_per_second:
    their ratio; gap_bound: a certified bound, the best tree of the search space is at most
    (1 + gap_bound) times as fast as this pick under the same model (0 when draft passes cost
    the same at every width; docs/design/tree-search.md, "Tokens per second"); table: the
    :class:`TreeTable` it was chosen from.
    """
    parents: Tuple[int, ...]
    nodes: int
    depth: int
    tokens: float
    seconds: float
    tokens_per_second: float
    gap_bound: float
    table: TreeTable = field(repr=False)


def _rate_bound(values: np.ndarray, target: np.ndarray, cheapest_pass: float, verify_cost: float) -> float:
    """An upper bound on the tokens per second of EVERY tree within the budget and depth limit.

    A tree with m >= 1 nodes and depth D has E <= values[m, D], pays target[m] and D draft
    passes of at least ``cheapest_pass``, and E / (C + v E) grows with E
    (docs/design/tree-search.md, "Tokens per second").
    """
    tokens = np.where(np.isfinite(values), values, 0.0)[1:, 1:]
    depth = np.arange(1, values.shape[1])
    rate = tokens / (target[1:, None] + depth * cheapest_pass + verify_cost * tokens)
    return float(rate.max())


def choose_tree(acceptance, target_cost: Cost, draft_cost: Cost, budget: int, max_depth: int = 8,
                positional: bool = False, verify_cost: float = 0.0) -> TreeChoice:
    """The tree with the most expected tokens per second among the best tree of every
    (m, d), 1 <= m <= budget, 1 <= d <= max_depth (:func:`best_trees`), timed by :func:`round_seconds`.

    acceptance: (K,) nondecreasing alpha(k). target_cost: (>= budget + 1,) seconds of a target
    pass over m + 1 tokens, or a callable. draft_cost: (>= max(1, budget // 2) + 1,) seconds of a
    draft pass over w tokens (entry 0 unused), or a callable. verify_cost: seconds per output
    token. Ties (within a relative 1e-12) go to fewer nodes, then to a shallower limit, so a
    flat cost curve gives the largest tree that still adds tokens.
    """
    table = best_trees(acceptance, budget, max_depth, positional)
    verify_cost = _check_verify_cost(verify_cost)
    target = _cost_array(target_cost, 0, budget, "target_cost", positive=True)
    widest = max(1, budget // 2)  # a node with children has a child of its own: 2 w <= m
    draft = _cost_array(draft_cost, 1, widest, "draft_cost", positive=False)
    tokens = np.where(np.isfinite(table.values), table.values, 0.0)
    seconds = target[:, None] + draft[table.widths].sum(axis=2) + verify_cost * tokens  # draft[0] = 0: no pass
    rate = np.where(np.isfinite(table.values), tokens / seconds, -np.inf)
    rate[0, :] = rate[:, 0] = -np.inf  # at least one node (m = 0 is plain decoding)
    best = rate.max()
    m, d = (int(i) for i in np.argwhere(rate >= best * (1 - _TIE))[0])  # row-major: fewest nodes, shallowest
    upper = _rate_bound(table.values, target, float(draft[1:].min()), verify_cost)
    return TreeChoice(parents=table.tree(m, d), nodes=m, depth=int(np.count_nonzero(table.widths[m, d])),
                      tokens=float(tokens[m, d]), seconds=float(seconds[m, d]),
                      tokens_per_second=float(rate[m, d]), gap_bound=max(0.0, upper / rate[m, d] - 1.0),
                      table=table)

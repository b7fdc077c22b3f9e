"""The shape search behind ``tree="auto"``: which token tree gives the most tokens per second.

A tree shape is a tuple ``parents`` of length M (the draft nodes; the root, the last committed
token, is implicit): ``parents[i]`` is node i's parent, -1 for the root, and ``parents[i] < i``.
The children of a node, in index order, are one group of k drafts drawn jointly and verified
together; at most one of them is accepted and the round continues in its subtree.

Acceptance model, after [Sequoia] (Chen et al. 2024, "Sequoia: scalable, robust and
hardware-aware speculative decoding"): ``acceptance[k-1] = alpha(k)`` = P(one of a group of k
children is accepted | its parent is reached), the same at every node. Two position models:
exchangeable (i.i.d. draft schemes: each of the k slots is the accepted one with probability
alpha(k)/k) and positional (top-k drafts, most probable first: child i is accepted with
probability alpha(i) - alpha(i-1) whatever k). A round outputs 1 + (accepted nodes) tokens, so
E[tokens] = 1 + sum over nodes of P(reach node).

Steps, each a function: :func:`expected_tokens` (one shape), :func:`best_trees` (the best shape
for every node count and depth limit, a dynamic programme over subtree sizes),
:func:`round_seconds` (a shape's predicted wall time from cost curves), :func:`choose_tree`
(tokens per second over the table), :class:`AcceptanceEstimate` (alpha from the run's
statistics) and :func:`measure_costs` (a model's cost curve). What is ours and in no paper is
written up in docs/design/tree-search.md; the code cites its sections.
"""
from __future__ import annotations

import math
import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence, Tuple, Union

import numpy as np

Cost = Union[Sequence[float], np.ndarray, Callable[[int], float]]

# A relative tolerance for "equally fast": ties go to the smaller, then shallower tree.
_TIE = 1e-12
# Limits that keep the programme's time O(depth * budget^3) and memory O(depth * budget^2 +
# budget * depth^2) bounded; a round of more nodes or more sequential draft passes serves no hardware.
_MAX_BUDGET = 1024
_MAX_DEPTH = 64


# ----------------------------------------------------------------------------- input checks

def _check_acceptance(acceptance) -> np.ndarray:
    """(K,) float64 alpha(1..K); ValueError unless finite, in [0, 1] and nondecreasing."""
    try:
        alpha = np.asarray(acceptance, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"acceptance must be a 1-D array of probabilities: {error}") from None
    if alpha.ndim != 1 or alpha.size == 0:
        raise ValueError(f"acceptance must be a non-empty 1-D array alpha(1..K), got shape {alpha.shape}")
    bad = np.flatnonzero(~np.isfinite(alpha) | (alpha < 0) | (alpha > 1))
    if bad.size:
        raise ValueError(f"acceptance[{bad[0]}] = {float(alpha[bad[0]])} is not a probability in [0, 1]")
    drop = np.flatnonzero(np.diff(alpha) < 0)
    if drop.size:
        i = drop[0]
        raise ValueError(f"acceptance must be nondecreasing in the group size: acceptance[{i + 1}] = "
                         f"{float(alpha[i + 1])} < acceptance[{i}] = {float(alpha[i])}")
    return alpha


def _check_int(name: str, value, minimum: int, maximum: Optional[int] = None) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return int(value)


def _check_parents(parents) -> np.ndarray:
    """(M,) int64 parents; ValueError unless parents[i] in [-1, i - 1] for every i."""
    try:
        array = np.asarray(parents)
    except (TypeError, ValueError) as error:
        raise ValueError(f"parents must be a sequence of integers: {error}") from None
    if array.ndim != 1 or (array.size and not np.issubdtype(array.dtype, np.integer)):
        raise ValueError(f"parents must be a 1-D sequence of integers, got {parents!r}")
    array = array.astype(np.int64)
    bad = np.flatnonzero((array < -1) | (array >= np.arange(array.size)))
    if bad.size:
        i = bad[0]
        raise ValueError(f"parents[{i}] = {array[i]} must be -1 (the root) or an earlier node in [0, {i - 1}]")
    return array


# ----------------------------------------------------------------------------- one shape

def _groups(parents: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per node: the size of its group, its position in the group (0-based) and its depth (root child = 1)."""
    M = parents.size
    slot = parents + 1  # the root is slot 0
    sizes = np.bincount(slot, minlength=M + 1)
    position = np.zeros(M, np.int64)
    taken = np.zeros(M + 1, np.int64)
    depth = np.zeros(M, np.int64)
    for i in range(M):
        position[i] = taken[slot[i]]
        taken[slot[i]] += 1
        depth[i] = 1 if parents[i] < 0 else depth[parents[i]] + 1
    return sizes[slot], position, depth


def _child_weight(alpha: np.ndarray, k: np.ndarray, position: np.ndarray, positional: bool) -> np.ndarray:
    """P(child accepted | parent reached) for children at ``position`` of groups of size ``k``."""
    if positional:  # [Sequoia]'s top-k model: the i-th child adds alpha(i) - alpha(i-1)
        previous = np.where(position > 0, alpha[np.maximum(position - 1, 0)], 0.0)
        return alpha[position] - previous
    return alpha[k - 1] / k  # exchangeable slots share alpha(k) equally


def expected_tokens(parents, acceptance, positional: bool = False) -> float:
    """Expected tokens one round outputs with tree ``parents``: 1 + sum of P(reach node).

    parents: (M,) ints, parents[i] = parent node of node i or -1 (root), parents[i] < i.
    acceptance: (K,) nondecreasing alpha(k) = P(a group of k children has an accepted child).
    positional: False = exchangeable slots (alpha(k)/k each); True = top-k slots (alpha(i) - alpha(i-1)).
    Returns tokens per round (a float in [1, M + 1]). ValueError for a group larger than K.
    """
    alpha = _check_acceptance(acceptance)
    parents = _check_parents(parents)
    if parents.size == 0:
        return 1.0
    k, position, _ = _groups(parents)
    if k.max() > alpha.size:
        node = int(np.argmax(k))
        raise ValueError(f"node {node}'s group has {k.max()} children, but acceptance covers groups of "
                         f"at most {alpha.size}")
    weight = _child_weight(alpha, k, position, positional)
    reach = np.empty(parents.size)
    for i, parent in enumerate(parents):  # parents come first, so one pass suffices
        reach[i] = weight[i] * (reach[parent] if parent >= 0 else 1.0)
    return float(1.0 + reach.sum())


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
        m = _check_int("m", m, 0)
        d = _check_int("d", d, 0)
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
    budget = _check_int("budget", budget, 1, _MAX_BUDGET)
    max_depth = _check_int("max_depth", max_depth, 1, _MAX_DEPTH)
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
            raise ValueError(f"{name} must be a 1-D array of seconds or a callable: {error}") from None
        if array.ndim != 1:
            raise ValueError(f"{name} must be a 1-D array of seconds, got shape {array.shape}")
        if array.size < last + 1:
            raise ValueError(f"{name} has {array.size} entries but {name}[{last}] is needed "
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


def _check_verify_cost(verify_cost) -> float:
    try:
        value = float(verify_cost)
    except (TypeError, ValueError):
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"verify_cost must be finite seconds >= 0, got {verify_cost!r}")
    return value


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
    return _seconds(widths, target[parents.size], draft, verify_cost * tokens)


def _seconds(widths: np.ndarray, target_pass: float, draft: np.ndarray, verify: float) -> float:
    """One target pass, one draft pass per width, and the verification work."""
    return float(target_pass + draft[widths].sum() + verify)


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


# ----------------------------------------------------------------------------- the estimator

def _family(k: np.ndarray, a: np.ndarray, gamma: np.ndarray) -> np.ndarray:
    """alpha(k) = 1 - (1 - a)^(k^gamma), broadcast over a, gamma and k."""
    return 1.0 - np.power(1.0 - a, np.power(k, gamma))


def _isotonic(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Weighted least-squares nondecreasing fit (pool adjacent violators)."""
    blocks = []  # [mean, weight, count]
    for v, w in zip(values, weights):
        blocks.append([v, w, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            v2, w2, c2 = blocks.pop()
            v1, w1, c1 = blocks.pop()
            blocks.append([(v1 * w1 + v2 * w2) / (w1 + w2), w1 + w2, c1 + c2])
    return np.concatenate([np.full(c, v) for v, _, c in blocks])


class AcceptanceEstimate:
    """alpha(k) learnt while generating, with a prior for group sizes never seen.

    State: per group size k, the verified groups n_k and their accepted count s_k (an exact
    observation adds its alpha to s_k and 1 to n_k). :meth:`curve` fits the family
    1 - (1 - a)^(k^gamma) to all sizes (MAP on a grid; prior: a ~ Beta with mean prior[0] and
    weight prior_weight, gamma ~ Normal(prior[1], 0.5)), shrinks each size's rate s_k / n_k
    towards the fit with prior_weight pseudo-groups, and makes the result nondecreasing by
    weighted isotonic regression (docs/design/tree-search.md, "The estimator"). With no data the
    curve is the prior 1 - (1 - prior[0])^(k^prior[1]).

    The loop makes one per generate call; a lock still makes every method safe from several threads.
    """

    def __init__(self, prior: Tuple[float, float] = (0.5, 0.5), prior_weight: float = 2.0):
        a0, gamma0 = (float(x) for x in prior)
        if not (0.0 < a0 < 1.0) or not (0.0 <= gamma0 <= 2.0):
            raise ValueError(f"prior must be (a, gamma) with 0 < a < 1 and 0 <= gamma <= 2, got {prior!r}")
        if not (math.isfinite(float(prior_weight)) and prior_weight > 0):
            raise ValueError(f"prior_weight must be a finite number > 0, got {prior_weight!r}")
        self.prior = (a0, gamma0)
        self.prior_weight = float(prior_weight)
        self._groups = np.zeros(0)
        self._accepted = np.zeros(0)
        self._fit = (a0, gamma0)
        self._stale = False
        self._lock = threading.Lock()

    def _add(self, k: int, accepted: float, groups: float = 1.0) -> None:
        with self._lock:
            if k > self._groups.size:
                self._groups = np.pad(self._groups, (0, k - self._groups.size))
                self._accepted = np.pad(self._accepted, (0, k - self._accepted.size))
            self._groups[k - 1] += groups
            self._accepted[k - 1] += accepted
            self._stale = True

    def observe(self, k: int, accepted: bool) -> None:
        """One verified group of k children; ``accepted``: whether one of them was accepted."""
        k = _check_int("k", k, 1)
        if not isinstance(accepted, (bool, np.bool_, int, np.integer)) or accepted not in (0, 1):
            raise ValueError(f"accepted must be a bool, got {accepted!r}")
        self._add(k, float(accepted))

    def observe_counts(self, k: int, groups: int, accepted: int) -> None:
        """``groups`` verified groups of k children, ``accepted`` of them accepted (as many
        :meth:`observe` calls)."""
        k = _check_int("k", k, 1)
        groups = _check_int("groups", groups, 0)
        accepted = _check_int("accepted", accepted, 0)
        if accepted > groups:
            raise ValueError(f"accepted ({accepted}) must be at most groups ({groups})")
        if groups:
            self._add(k, float(accepted), float(groups))

    def observe_exact(self, k: int, alpha: float) -> None:
        """The verifier's exact P(accept) at a visited node with a group of k children (lower variance)."""
        k = _check_int("k", k, 1)
        value = float(alpha)
        if not (0.0 <= value <= 1.0):
            raise ValueError(f"alpha must be a probability in [0, 1], got {alpha!r}")
        self._add(k, value)

    def counts(self) -> Tuple[np.ndarray, np.ndarray]:
        """(groups, accepted): (K_seen,) float64 per group size 1..K_seen (accepted may be fractional)."""
        with self._lock:
            return self._groups.copy(), self._accepted.copy()

    def _fit_family(self, groups: np.ndarray, accepted: np.ndarray) -> Tuple[float, float]:
        """MAP (a, gamma) of the family on a grid, refined once around the coarse optimum."""
        seen = np.flatnonzero(groups > 0)
        k = (seen + 1.0)[None, None, :]
        a0, gamma0 = self.prior
        a_grid, gamma_grid = np.linspace(0.01, 0.99, 99), np.linspace(0.0, 2.0, 51)
        for _ in range(2):
            a, gamma = a_grid[:, None, None], gamma_grid[None, :, None]
            alpha = np.clip(_family(k, a, gamma), 1e-12, 1 - 1e-12)
            score = (accepted[seen] * np.log(alpha) + (groups[seen] - accepted[seen]) * np.log1p(-alpha)).sum(axis=2)
            score += self.prior_weight * (a0 * np.log(a[..., 0]) + (1 - a0) * np.log1p(-a[..., 0]))
            score -= (gamma[..., 0] - gamma0) ** 2 / (2 * 0.5 ** 2)
            i, j = np.unravel_index(np.argmax(score), score.shape)
            a_best, gamma_best = a_grid[i], gamma_grid[j]
            a_grid = np.clip(np.linspace(a_best - 0.01, a_best + 0.01, 21), 1e-4, 1 - 1e-4)
            gamma_grid = np.clip(np.linspace(gamma_best - 0.04, gamma_best + 0.04, 21), 0.0, 2.0)
        return float(a_best), float(gamma_best)

    def curve(self, K: int) -> np.ndarray:
        """(K,) nondecreasing estimate of alpha(1..K), in [0, 1]."""
        K = _check_int("K", K, 1)
        with self._lock:
            groups, accepted = self._groups.copy(), self._accepted.copy()
            if self._stale:
                self._fit = self._fit_family(groups, accepted) if groups.sum() > 0 else self.prior
                self._stale = False
            a, gamma = self._fit
        n = np.zeros(K)
        s = np.zeros(K)
        n[:min(K, groups.size)] = groups[:K]
        s[:min(K, groups.size)] = accepted[:K]
        fitted = _family(np.arange(1.0, K + 1), a, gamma)
        c = self.prior_weight
        return np.clip(_isotonic((s + c * fitted) / (n + c), n + c), 0.0, 1.0)


# ----------------------------------------------------------------------------- measurement

def _synchronize(device) -> None:
    import torch
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


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
        raise ValueError(f"context_ids must be (T,) or (B, T) integer token ids with T >= 1, got "
                         f"{tuple(ids.shape)} {ids.dtype}")
    sizes = np.asarray(sizes)
    if sizes.ndim != 1 or sizes.size == 0 or not np.issubdtype(sizes.dtype, np.integer) or sizes.min() < 1:
        raise ValueError(f"sizes must be a non-empty 1-D array of token counts >= 1, got {sizes!r}")
    repeats = _check_int("repeats", repeats, 1)
    device = next(model.parameters()).device
    ids = ids.to(device=device, dtype=torch.long)
    B, T = ids.shape
    costs = np.empty(sizes.size)
    with torch.inference_mode():
        if cache is None:
            cache = DynamicCache()
            model(input_ids=ids, past_key_values=cache, use_cache=True)
        if cache.get_seq_length() != T:
            raise ValueError(f"cache holds {cache.get_seq_length()} positions but context_ids has {T}")
        for index, m in enumerate(sizes.tolist()):
            new = ids[:, torch.arange(m, device=device) % T]  # token values do not change the time
            positions = torch.arange(T, T + m, device=device).expand(B, m)
            mask = torch.ones(B, T + m, dtype=torch.long, device=device)
            times = []
            for repeat in range(repeats + 1):
                _synchronize(device)
                start = time.perf_counter()
                model(input_ids=new, past_key_values=cache, position_ids=positions, attention_mask=mask,
                      use_cache=True)
                _synchronize(device)
                if repeat:  # the first pass warms up kernels for this shape
                    times.append(time.perf_counter() - start)
                cache.crop(-m)  # negative: remove the m new positions
            costs[index] = statistics.median(times)
        if cache.get_seq_length() != T:
            raise RuntimeError(f"cache.crop left {cache.get_seq_length()} positions instead of {T}")
    return costs

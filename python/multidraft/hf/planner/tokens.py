"""One shape's expected tokens per round (:func:`expected_tokens`), under the acceptance model
of the shape search (docs/design/tree-search.md).

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
"""
from __future__ import annotations

from typing import Tuple

import numpy as np

from .checks import _check_acceptance, _check_parents


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

"""One row's draft tree in one round: the nodes drawn so far, with identical prefixes merged.

Node 0 is the root (the row's last committed token, already in both caches); nodes 1, 2, ... are
the round's draft tokens in the order they were drawn, which is also their order as model input
slots. Each node stands for one or more slots of the :class:`~._shape.Tree` (several when draws
below one node coincide); its group is the concatenation of its slots' children in the shape,
drawn jointly from the draft law at the node (see ``_shape``).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np
import torch

from ..verifiers import Verifier, verifier as make_verifier
from ._shape import Tree

#: Verifier of a group of one draft under a verifier that takes another fixed number of drafts.
_SINGLE = make_verifier("sps")


def group_verifier(v: Verifier, group_size: int, cap: Optional[int]) -> Tuple[Verifier, int]:
    """(the verifier of a group of ``group_size`` child slots, how many drafts it draws): ``v``
    with all of them up to ``cap`` (the rest stay empty, see ``planner.budget``), but ``"sps"`` for a
    single slot under a verifier that takes a fixed n > 1 (``"spechub"``)."""
    if v.fixed_n is not None and group_size < v.fixed_n:
        return _SINGLE, 1
    return v, group_size if cap is None else min(group_size, cap)


class Group:
    """The drafts drawn at one node: ``drafts`` (k,) int64 on the host, the ``verifier`` that drew
    them, the draft law ``q`` (V,) they were drawn from (a tensor on the models' device) and
    ``children`` (token -> child node)."""

    __slots__ = ("drafts", "verifier", "q", "children")

    def __init__(self, drafts: np.ndarray, verifier: Verifier, q: torch.Tensor):
        self.drafts, self.verifier, self.q = drafts, verifier, q
        self.children: Dict[int, int] = {}


class RoundTree:
    """The draft nodes of one row in one round (module docstring)."""

    def __init__(self, shape: Tree, depth_limit: int, group_cap: Optional[int] = None):
        self.shape, self.depth_limit, self.group_cap = shape, depth_limit, group_cap
        self.tokens: List[int] = [-1]          # node -> its token (-1: the root)
        self.parents: List[int] = [-1]
        self.depths: List[int] = [0]
        self.slots: List[List[int]] = [[-1]]   # node -> the shape slots it stands for
        self.groups: List[Optional[Group]] = [None]

    @property
    def size(self) -> int:
        """Draft nodes (the root not counted)."""
        return len(self.tokens) - 1

    def child_slots(self, node: int) -> List[int]:
        """The shape slots drawn at ``node``: its slots' children, none at the depth limit."""
        if self.depths[node] >= self.depth_limit:
            return []
        return [c for slot in self.slots[node] for c in self.shape.children[slot]]

    def group_verifier(self, node: int, v: Verifier) -> Tuple[Verifier, int]:
        """(the verifier that draws ``node``'s group under the loop's ``v``, how many drafts)."""
        return group_verifier(v, len(self.child_slots(node)), self.group_cap)

    def add_group(self, node: int, verifier: Verifier, q: torch.Tensor, drafts: np.ndarray) -> None:
        """Set ``node``'s group: ``drafts`` (k,) on the host, drawn by ``verifier`` from the draft
        law ``q`` (V,) on the models' device; one child per distinct token (slots that drew the
        same token are one node)."""
        group = self.groups[node] = Group(drafts, verifier, q)
        for slot, token in zip(self.child_slots(node), drafts.tolist()):
            child = group.children.get(token)
            if child is None:
                child = group.children[token] = len(self.tokens)
                self.tokens.append(token)
                self.parents.append(node)
                self.depths.append(self.depths[node] + 1)
                self.slots.append([])
                self.groups.append(None)
            self.slots[child].append(slot)

    def path(self, node: int) -> List[int]:
        """The tokens from the root to ``node`` (the root excluded)."""
        tokens = []
        while node > 0:
            tokens.append(self.tokens[node])
            node = self.parents[node]
        return tokens[::-1]

    def ancestors(self, width: int) -> np.ndarray:
        """(width + 1, width + 1) bool: [i, j] is True when node j is node i or one of its
        ancestors; column 0 (the committed tokens) is True for every node. Rows and columns past
        the last node are padding (False but [i, 0] and [i, i])."""
        table = np.zeros((width + 1, width + 1), dtype=bool)
        table[:, 0] = True
        np.fill_diagonal(table, True)
        for node in range(1, len(self.tokens)):
            table[node] |= table[self.parents[node]]
        return table

"""The shape of a round's draft tree: which draft slots exist and which slot each one follows.

A shape has M draft nodes (the root, the last committed token, is implicit): ``parents[i]`` is the
parent of node i, -1 for the root, and every parent comes before its children. The children of a
node are the drafts drawn jointly at that node as ONE group (the verifier's scheme with n = the
number of children), verified together; the output continues the child it equals. Chains
(``num_drafts=n, draft_length=L``) are the shape whose root has n children, each the head of a
path of L nodes.

In a round, draft slots that receive the same token below the same node are one node (identical
prefixes are scored once by both models); such a merged node draws the children of all its slots
as one group. See docs/model-generate.md, "Token trees".
"""
from __future__ import annotations

import numbers
from typing import Dict, Sequence, Tuple

#: Most draft nodes a shape may have: a round's tree is one target pass; larger trees only
#: cost (the attention mask alone is quadratic in the nodes).
MAX_NODES = 1024


class Tree:
    """A draft-tree shape. ``Tree(parents)``: ``parents[i]`` is the parent of node i (-1: the root)
    with ``parents[i] < i``; :meth:`branching` and :meth:`chains` build the common shapes.

    Attributes: ``parents`` (tuple of M ints), ``size`` M, ``depth`` (the deepest node's depth; a
    root child has depth 1), ``depths`` (M,), ``children`` (dict: node or -1 -> tuple of its
    children in index order).
    """

    def __init__(self, parents: Sequence[int]):
        parents = tuple(parents) if not isinstance(parents, (str, bytes)) else None
        if not parents:
            raise ValueError(f"a tree needs at least one draft node: 'parents' must be a non-empty sequence of ints, "
                             f"got {parents!r}")
        if len(parents) > MAX_NODES:
            raise ValueError(f"a tree has at most {MAX_NODES} draft nodes, got {len(parents)}")
        for i, parent in enumerate(parents):
            if isinstance(parent, bool) or not isinstance(parent, numbers.Integral) or not -1 <= parent < i:
                raise ValueError(f"'parents[{i}]' must be -1 (the root) or an earlier node's index in [0, {i}), "
                                 f"got {parent!r}")
        self.parents: Tuple[int, ...] = tuple(int(p) for p in parents)
        children: Dict[int, list] = {-1: []}
        depths = []
        for i, parent in enumerate(self.parents):
            children.setdefault(i, [])
            children[parent].append(i)
            depths.append(1 if parent < 0 else depths[parent] + 1)
        self.children: Dict[int, Tuple[int, ...]] = {node: tuple(c) for node, c in children.items()}
        self.depths: Tuple[int, ...] = tuple(depths)
        self.size = len(self.parents)
        self.depth = max(depths)

    @classmethod
    def branching(cls, widths: Sequence[int]) -> "Tree":
        """The balanced shape with ``widths[d]`` children for every node of depth d (the root: d = 0),
        e.g. ``(2, 2)``: 2 root children with 2 children each (6 nodes)."""
        widths = tuple(widths) if not isinstance(widths, (str, bytes)) else ()
        if not widths or any(isinstance(b, bool) or not isinstance(b, numbers.Integral) or b < 1 for b in widths):
            raise ValueError(f"'tree' as branching must be a non-empty sequence of ints >= 1 (children per node at "
                             f"each depth), got {widths!r}")
        size, level = 0, 1
        for b in widths:
            level *= int(b)
            size += level
            if size > MAX_NODES:
                raise ValueError(f"tree={widths!r} has more than {MAX_NODES} draft nodes")
        parents, previous = [], [-1]
        for b in widths:
            current = []
            for parent in previous:
                for _ in range(int(b)):
                    current.append(len(parents))
                    parents.append(parent)
            previous = current
        return cls(parents)

    @classmethod
    def chains(cls, n: int, length: int) -> "Tree":
        """n chains of ``length`` nodes below the root (``num_drafts=n, draft_length=length``)."""
        parents = []
        for _ in range(n):
            parents += [-1] + [len(parents) + j for j in range(length - 1)]
        return cls(parents)

    def widest_group(self) -> int:
        """The most children any node has (the largest group of drafts drawn at one node)."""
        return max(len(c) for c in self.children.values())

    def widest_level(self) -> int:
        """The most nodes of one depth: the largest group a merged node can draw (when every
        slot of the depth above drew the same tokens)."""
        return max(self.depths.count(d) for d in set(self.depths))

    def __eq__(self, other) -> bool:
        return isinstance(other, Tree) and other.parents == self.parents

    def __hash__(self) -> int:
        return hash(self.parents)

    def __repr__(self) -> str:
        return f"multidraft.hf.Tree(parents={list(self.parents)})"

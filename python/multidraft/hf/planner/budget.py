"""What a generation call may cost per verified node, checked before the first forward pass.

The network-based exact verifiers solve a max-flow over draft subsets: with a group of n drafts
over a draft support of k tokens there are sum_{j <= n} C(k, j) of them, and the solve grows
faster than that count (4 drafts over 64 tokens, 680 thousand subsets, take tens of seconds).
Global Resolution sums its terms without enumerating them for groups of up to 6 drafts at any
support ([GR] Section 6); larger groups enumerate subsets. Each verifier says what it enumerates
(:meth:`multidraft.Verifier.node_subsets`).
So each verifier has a largest group it verifies at loop speed: a shape with a node of more
children is refused at once, saying what to change (Global Resolution, the default, draws that
many there instead, so the defaults serve any number of drafts), and a merged node whose slots add
up to more draws only that many drafts (the other slots stay empty; every group is still verified
exactly).
"""
from __future__ import annotations

from typing import Optional

from ...verifiers import Verifier
from .._shape import MAX_NODES

#: Most draft subsets a verifier may enumerate at one node (a few milliseconds of max-flow).
MAX_NODE_SUBSETS = 5000


def largest_group(v: Verifier, support: int) -> Optional[int]:
    """The most drafts ``v`` verifies at one node at loop speed over ``support`` draft tokens: its
    fixed n, else the largest n whose :meth:`~multidraft.Verifier.node_subsets` stay within
    :data:`MAX_NODE_SUBSETS`, else unbounded (None: within it for every group a tree can have)."""
    if v.fixed_n is not None:
        return v.fixed_n
    widest = min(support, MAX_NODES)  # no group is larger than the support or a tree's nodes
    n = 1
    while n < widest and v.node_subsets(support, n + 1) <= MAX_NODE_SUBSETS:
        n += 1
    return None if n >= widest else n


def check_group(v: Verifier, support: int, widest: int) -> Optional[int]:
    """:func:`largest_group`, after a ValueError when a node of the shape has more children
    (``widest``) than that, unless ``v.caps_wide_groups`` (Global Resolution: such a node draws
    that many; docs/model-generate.md)."""
    cap = largest_group(v, support)
    if cap is not None and widest > cap and not v.caps_wide_groups:
        raise ValueError(
            f"verifier {v.name!r} verifies at most {cap} draft(s) per node at loop speed over a draft support of "
            f"{support} tokens (a larger group meets more than {MAX_NODE_SUBSETS} draft subsets: seconds per token), "
            f"but a node of this tree has {widest} children: pass draft_top_k='auto' or a smaller draft_top_k, "
            f"fewer drafts per node, or verifier='spectr' / 'rrs_without_replacement' (any group size)")
    return cap

"""What a generation call may cost per verified node, checked before the first forward pass.

The network-based exact verifiers solve a max-flow over draft subsets: with a group of n drafts
over a draft support of k tokens there are sum_{j <= n} C(k, j) of them, and the solve grows
faster than that count (4 drafts over 64 tokens, 680 thousand subsets, take tens of seconds).
Global Resolution sums its terms without enumerating them for groups of up to
:data:`GR_SUMMED_GROUP` drafts at any support ([GR] Section 6); larger groups enumerate subsets.
So each verifier has a largest group it verifies at loop speed: a shape with a node of more
children is refused at once, saying what to change (Global Resolution, the default, draws that
many there instead, so the defaults serve any number of drafts), and a merged node whose slots add
up to more draws only that many drafts (the other slots stay empty; every group is still verified
exactly).
"""
from __future__ import annotations

from math import comb
from typing import Optional

from ..verifiers import Verifier

#: Most draft subsets a network-based verifier may face at one node (a few milliseconds).
MAX_NODE_SUBSETS = 5000
#: Largest group Global Resolution sums without enumerating subsets.
GR_SUMMED_GROUP = 6


def draft_subsets(support: int, group: int) -> int:
    """Non-empty draft subsets of at most ``group`` tokens over ``support`` tokens."""
    return sum(comb(support, j) for j in range(1, min(group, support) + 1))


def largest_group(v: Verifier, support: int) -> Optional[int]:
    """The most drafts ``v`` verifies at one node at loop speed over ``support`` draft tokens: its
    fixed n, else (network-based verifiers) the largest group within :data:`MAX_NODE_SUBSETS`
    subsets (Global Resolution: any up to :data:`GR_SUMMED_GROUP`), else unbounded (None)."""
    if v.fixed_n is not None:
        return v.fixed_n
    if v.name == "khisti":  # pairwise selection weights ([CD] Remark 3): any group size
        return None if draft_subsets(support, 2) <= MAX_NODE_SUBSETS else 1
    if v.name not in ("otlp", "global_resolution"):
        return None
    if draft_subsets(support, support) <= MAX_NODE_SUBSETS:  # every subset of the support: any group
        return None
    group = GR_SUMMED_GROUP if v.name == "global_resolution" else 1
    while draft_subsets(support, group + 1) <= MAX_NODE_SUBSETS:
        group += 1
    return group


def check_group(v: Verifier, support: int, widest: int) -> Optional[int]:
    """:func:`largest_group`, after a ValueError when a node of the shape has more children
    (``widest``) than that; Global Resolution instead draws at most that many at such a node
    (its acceptance has all but stopped growing by then, see docs/model-generate.md)."""
    cap = largest_group(v, support)
    if cap is not None and widest > cap and v.name != "global_resolution":
        raise ValueError(
            f"verifier {v.name!r} verifies at most {cap} draft(s) per node at loop speed over a draft support of "
            f"{support} tokens (a larger group meets more than {MAX_NODE_SUBSETS} draft subsets: seconds per token), "
            f"but a node of this tree has {widest} children: pass draft_top_k='auto' or a smaller draft_top_k, "
            f"fewer drafts per node, or verifier='spectr' / 'rrs_without_replacement' (any group size)")
    return cap

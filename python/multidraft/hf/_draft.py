"""Step 1 of a round: the draft model drafts ``n`` sequences of up to ``L`` tokens per row, each
position's tokens drawn jointly within each group of sequences that share a prefix."""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np
import torch

from ..verifiers import Verifier, verifier as make_verifier
from ._laws import truncate_draft
from ._setup import Setup
from ._slots import chain_slots, pending_slots
from ._tree import TreeCache

#: Verifier used for groups that the chosen verifier cannot take (see the package docstring).
_SINGLE = make_verifier("sps")


#: groups[j] maps the tuple of draft indices sharing a prefix at position j to (drawn tokens, verifier).
Groups = List[Dict[Tuple[int, ...], Tuple[np.ndarray, Verifier]]]


def draft_round(s: Setup, cache: TreeCache, pending, active, rows, rngs, V: int, limits: List[int]):
    """Draw n draft sequences of ``limits[r]`` tokens per active row, grouped by prefix (package
    docstring).

    Returns ``drafts`` (R, n, L) int64 (L the largest limit; zeros past a row's limit), ``q``
    (R, n, L, V) float64 (the draft law each token was drawn from) and ``groups`` (per row, see
    :data:`Groups`).
    """
    R, n, L = len(active), s.n, max(limits)
    chunk = pending_slots(pending, cache, s.pad_token_id)
    logits = cache.forward(*chunk, keep=1)[active, -1]  # (R, V): level 0 is shared by every chain
    start = chunk[2][:, -1] + 1  # position of level 0
    drafts = np.zeros((R, n, L), dtype=np.int64)
    q = np.zeros((R, n, L, V))
    groups: List[Groups] = [[] for _ in range(R)]
    owners = [b for b in active for _ in range(n)]  # the batch row of each (row, chain)
    for j in range(L):
        if j == 0:
            prefixes = None if not s.law.uses_prefixes else [rows[b] for b in active]
            q[:, :, 0] = _draft_law(s, logits, prefixes, active, V)[:, None]
        else:
            slots = chain_slots(drafts, active, len(pending), start, slice(j - 1, j), limits, cache.device,
                                s.pad_token_id)
            logits = cache.forward(*slots, keep=n)[active].reshape(R * n, -1)
            q[:, :, j] = _draft_law(s, logits, _prefixes(s, rows, active, drafts, j), owners, V).reshape(R, n, V)
        for r in range(R):
            if j < limits[r]:
                groups[r].append(_draw_level(s.verifier, drafts[r], q[r, :, j], j, rngs[r]))
    return drafts, q, groups


def _draft_law(s: Setup, logits: torch.Tensor, prefixes, owners, V: int) -> np.ndarray:
    """The law the drafts are drawn from and the verifier is given: the sampling law of the draft
    logits laid over the target ids, RDK's proposal for an out-of-vocabulary draft, top-k cut."""
    return truncate_draft(s.vocabulary.proposal(s.law(s.vocabulary.logits(logits, V), prefixes, owners)),
                          s.draft_top_k)


def _draw_level(v: Verifier, drafts: np.ndarray, q_j: np.ndarray, j: int, rng) -> Dict:
    """Draw level j of one row's n drafts (n, L) in place, jointly within each prefix group."""
    by_prefix: Dict[Tuple[int, ...], List[int]] = {}
    for m in range(drafts.shape[0]):
        by_prefix.setdefault(tuple(drafts[m, :j]), []).append(m)
    level = {}
    for members in by_prefix.values():
        law = q_j[members[0]]
        scheme = group_verifier(v, len(members))
        drawn = scheme.draft(law, len(members), rng)
        drafts[members, j] = drawn
        level[tuple(members)] = (drawn, scheme)
    return level


def group_verifier(v: Verifier, group_size: int) -> Verifier:
    """The verifier of a group of ``group_size`` drafts: ``v``, or ``"sps"`` for a group of one
    under a verifier that takes another fixed number of drafts."""
    return _SINGLE if v.fixed_n is not None and group_size != v.fixed_n else v


def _prefixes(s: Setup, rows, active, drafts: np.ndarray, j: int) -> Optional[List[List[int]]]:
    """Prefixes of level ``j`` of every chain (active row-major, chain-minor), or None if the
    law does not read them."""
    if not s.law.uses_prefixes:
        return None
    return [rows[b] + drafts[r, m, :j].tolist() for r, b in enumerate(active) for m in range(drafts.shape[1])]

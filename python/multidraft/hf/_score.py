"""Step 2 of a round: ONE target forward pass over every draft prefix; the target laws computed
when verification reaches them."""
from __future__ import annotations

from typing import List

import numpy as np
import torch

from ._laws import Law
from ._setup import Setup
from ._slots import chain_slots, pending_slots
from ._tree import TreeCache


def score_round(s: Setup, cache: TreeCache, pending, active, rows, drafts: np.ndarray, V: int,
                limits: List[int]) -> "TargetLaws":
    """Target logits after each draft prefix, in ONE forward pass; their laws on demand."""
    R, n, L = drafts.shape
    chunk = pending_slots(pending, cache, s.pad_token_id)
    start = chunk[2][:, -1] + 1
    slots = chain_slots(drafts, active, len(pending), start, slice(0, L), limits, cache.device, s.pad_token_id)
    logits = cache.forward(*(torch.cat(pair, dim=1) for pair in zip(chunk, slots)), keep=n * L + 1)[active]
    if logits.shape[-1] != V:
        raise ValueError(f"the target returned {logits.shape[-1]} logits, its LM head has {V} rows")
    return TargetLaws(s.law, logits, rows, active, drafts)


class TargetLaws:
    """``laws(r, m, j)``: the target law (V,) after the first j draft tokens of chain m of active
    row r, computed when verification reaches it. Verification stops at the first rejection, so
    the laws after it (most of the tree: acceptance is about a half per position) are never
    computed; each law is the one plain sampling would draw from at that prefix."""

    def __init__(self, law: Law, logits: torch.Tensor, rows, active, drafts: np.ndarray):
        self.law, self.logits, self.rows, self.active, self.drafts = law, logits, rows, active, drafts

    def __call__(self, r: int, m: int, j: int) -> np.ndarray:
        b = self.active[r]
        slot = 0 if j == 0 else 1 + m * self.drafts.shape[2] + j - 1  # slots are chain-major (see chain_slots)
        prefixes = [self.rows[b] + self.drafts[r, m, :j].tolist()] if self.law.uses_prefixes else None
        return self.law(self.logits[r, slot][None], prefixes, [b])[0]

"""What a generation call reports: its statistics, and the two forms of its result."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np
import torch
from transformers.generation import GenerateDecoderOnlyOutput


@dataclass
class GenerationStats:
    """Statistics of one generation call (all rows of the batch together).

    ``new_tokens``: tokens kept in the output; ``row_rounds``: (row, round) pairs, i.e. the target
    forward passes a one-prompt-at-a-time run makes; ``target_calls``: batched target forward
    calls; ``target_positions`` / ``draft_positions``: token positions each model computed (its
    forward passes' real input tokens); ``tree_nodes``: draft nodes scored by the target (merged
    nodes once); ``reached[j]`` / ``accepted[j]``: how often a group of drafts at depth j + 1 was
    verified / accepted (its node at depth j reached); ``group_reached[k]`` /
    ``group_accepted[k]``: the same by group size k (index 0 unused); ``tree``: the shape's
    parents (the last one used, for ``tree="auto"``); ``draft_seconds``, ``target_seconds``,
    ``verify_seconds``: wall time of drafting (draft model, draft laws and draft sampling), of
    the target forward passes and of verification (with the target laws it reaches, computed
    lazily); ``host_bytes``: bytes the loop copied from tensors to the host (draft ids, verified
    tokens, the compressed problems of verification on a device, cache bookkeeping; laws and
    logits stay where the models are, see :attr:`host_bytes_per_round`).
    """

    num_drafts: int                    # drafts drawn at the root (the shape's root children)
    draft_length: int                  # the shape's depth
    verifier: str
    tree: Tuple[int, ...] = ()
    new_tokens: int = 0
    row_rounds: int = 0
    target_calls: int = 0
    target_positions: int = 0
    draft_positions: int = 0
    tree_nodes: int = 0
    reached: Optional[np.ndarray] = None
    accepted: Optional[np.ndarray] = None
    draft_seconds: float = 0.0
    target_seconds: float = 0.0
    verify_seconds: float = 0.0
    group_reached: Optional[np.ndarray] = None
    group_accepted: Optional[np.ndarray] = None
    host_bytes: int = 0

    def __post_init__(self):
        widest = 1 + max(self.num_drafts, 1)
        for name, size in (("reached", self.draft_length), ("accepted", self.draft_length),
                           ("group_reached", widest), ("group_accepted", widest)):
            if getattr(self, name) is None:
                setattr(self, name, np.zeros(size, np.int64))

    def record(self, depth: int, group_size: int, accepted: bool) -> None:
        """Count one verified group of ``group_size`` drafts at a node of depth ``depth``."""
        for name, index, hit in (("reached", depth, True), ("accepted", depth, accepted),
                                 ("group_reached", group_size, True), ("group_accepted", group_size, accepted)):
            counts = getattr(self, name)
            if index >= len(counts):  # tree="auto" may grow the shape
                counts = np.append(counts, np.zeros(index + 1 - len(counts), np.int64))
                setattr(self, name, counts)
            counts[index] += bool(hit)

    @property
    def nodes_per_round(self) -> float:
        """Draft nodes the target scored per (row, round) pair."""
        return self.tree_nodes / max(self.row_rounds, 1)

    @property
    def tokens_per_target_pass(self) -> float:
        """Generated tokens per target forward pass (per prompt): 1 for plain sampling."""
        return self.new_tokens / max(self.row_rounds, 1)

    @property
    def acceptance_per_position(self) -> np.ndarray:
        """(L,) P(a draft at depth j + 1 accepted | its parent reached); NaN where never reached."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.accepted / self.reached

    @property
    def host_bytes_per_round(self) -> float:
        """Bytes copied to the host per round (per batched target call): O(nodes x k) numbers,
        whatever the vocabulary. Models on the CPU have their laws read in place by the core, so
        there this counts the loop's own reads only."""
        return self.host_bytes / max(self.target_calls, 1)

    @property
    def total_seconds(self) -> float:
        return self.draft_seconds + self.target_seconds + self.verify_seconds


@dataclass
class GenerationResult:
    """``sequences`` (B, T + N) int64 torch tensor: the prompts as given (with their padding)
    followed by the new tokens, N the most any row generated (``pad_token_id`` after a row
    stopped, as transformers pads); ``stats``: :class:`GenerationStats`."""

    sequences: torch.Tensor
    stats: GenerationStats


@dataclass
class MultiDraftOutput(GenerateDecoderOnlyOutput):
    """What ``model.generate(..., custom_generate=decode, return_dict_in_generate=True)`` returns:
    transformers' ``GenerateDecoderOnlyOutput`` (``sequences``) plus ``multidraft``, the
    :class:`GenerationStats` of the call."""

    multidraft: Optional[GenerationStats] = None

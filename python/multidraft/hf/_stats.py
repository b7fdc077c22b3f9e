"""What a generation call reports: its statistics, and the two forms of its result."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch
from transformers.generation import GenerateDecoderOnlyOutput


@dataclass
class GenerationStats:
    """Statistics of one generation call (all rows of the batch together).

    ``new_tokens``: tokens kept in the output; ``row_rounds``: (row, round) pairs, i.e. the target
    forward passes a one-prompt-at-a-time run makes; ``target_calls``: batched target forward
    calls; ``target_positions`` / ``draft_positions``: token positions each model computed (its
    forward passes' real input tokens); ``reached[j]`` / ``accepted[j]``: how often draft
    position j was verified / accepted; ``draft_seconds``, ``target_seconds``,
    ``verify_seconds``: wall time of drafting (draft model, draft laws and draft sampling), of
    the target forward passes and of verification (with the target laws it reaches, computed
    lazily).
    """

    num_drafts: int
    draft_length: int
    verifier: str
    new_tokens: int = 0
    row_rounds: int = 0
    target_calls: int = 0
    target_positions: int = 0
    draft_positions: int = 0
    reached: Optional[np.ndarray] = None
    accepted: Optional[np.ndarray] = None
    draft_seconds: float = 0.0
    target_seconds: float = 0.0
    verify_seconds: float = 0.0

    def __post_init__(self):
        self.reached = np.zeros(self.draft_length, np.int64) if self.reached is None else self.reached
        self.accepted = np.zeros(self.draft_length, np.int64) if self.accepted is None else self.accepted

    @property
    def tokens_per_target_pass(self) -> float:
        """Generated tokens per target forward pass (per prompt): 1 for plain sampling."""
        return self.new_tokens / max(self.row_rounds, 1)

    @property
    def acceptance_per_position(self) -> np.ndarray:
        """(L,) P(draft position j accepted | position j verified); NaN where never reached."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.accepted / self.reached

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

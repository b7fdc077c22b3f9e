"""Exact verification of a serving engine's draft chains, on the engine's tensors and device.

An engine such as vLLM hands its rejection sampler the drafts of every running request flattened
into one sequence (request r owns ``num_draft_tokens[r]`` consecutive positions), the target's law
at each of them, the law each draft was drawn from, and one bonus token per request. This module
verifies all positions in ONE batched call of a multidraft verifier (each position with its own
seed) and then keeps, per request, the leading accepted drafts, the token of the first rejected
position, or the bonus token when every draft was accepted. A position after a rejection is never
output, so its draw is simply unused and the law is that of verifying the chain in order
([GR] Section 2, one draft per step); docs/design/serving-chains.md has the argument and the
mapping of the engine's placeholders below.

Torch only: nothing here imports vLLM.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

PLACEHOLDER = -1  # an engine's "no draft here" id (vLLM's PLACEHOLDER_TOKEN_ID)


def positions_of(num_draft_tokens: Sequence[int], device):
    """(request of each position (N,), its offset in the request's chain (N,), chain lengths (B,)),
    int64 tensors on ``device``: the flattened layout of the engine's drafts."""
    import torch

    counts = torch.tensor(list(num_draft_tokens), dtype=torch.int64, device=device)
    request = torch.repeat_interleave(torch.arange(counts.shape[0], device=device), counts)
    starts = torch.cumsum(counts, 0) - counts
    return request, torch.arange(request.shape[0], device=device) - starts[request], counts


def per_position(values, num_draft_tokens: Sequence[int]):
    """A per-request tensor (B, ...) repeated for each of the request's draft positions (N, ...)."""
    import torch

    counts = torch.tensor(list(num_draft_tokens), dtype=torch.int64, device=values.device)
    return torch.repeat_interleave(values, counts, dim=0)


def draft_laws(q, drafts, width: int):
    """(drafts usable by a verifier (N, 1) int64, their laws (N, width), whether each is a real draw).

    ``q`` (N, width) is the law each draft was drawn from, or None for deterministic drafts (a
    point mass at the draft). A placeholder id, an id outside the vocabulary, or a draft of
    probability 0 under ``q`` cannot have been drawn from ``q``: that position is given the
    point mass at a valid id instead, under which every lossless verifier outputs a draw of the
    target law p ([NH]: the coupling of p with a point mass), and it ends its chain.
    """
    import torch

    drafts = drafts.to(torch.int64)
    real = (drafts >= 0) & (drafts < width)
    safe = torch.where(real, drafts, torch.zeros_like(drafts))[:, None]
    if q is None:
        return safe, torch.zeros((drafts.shape[0], width), device=drafts.device).scatter_(1, safe, 1.0), real
    at_draft = q.gather(1, safe)[:, 0]
    real = real & (at_draft > 0)
    # q on the real rows, the point mass at the draft on the others: one pass over (N, width)
    laws = (q * real[:, None]).scatter_(1, safe, torch.where(real, at_draft, torch.ones_like(at_draft))[:, None])
    return safe, laws, real


def verify_chains(verifier, p, q, drafts, num_draft_tokens: Sequence[int], bonus, seeds: np.ndarray):
    """Verified tokens per request, int32 (B, max chain + 1), padded with -1.

    ``p`` (N, V): the target's law at each draft position (sampling parameters applied);
    ``q`` (N, V) or None: each draft's law (None: deterministic drafts); ``drafts`` (N,) ids;
    ``num_draft_tokens`` (B,) chain lengths (0 allowed); ``bonus`` (B, 1) a draw of the target's
    law after each request's last draft; ``seeds`` (N,) uint64, one per position. ``verifier`` is a
    one-draft multidraft verifier (``md.verifier("sps")``, ...). Row r holds the accepted drafts,
    then the token of the first position that was not accepted, or the bonus token.
    """
    import torch

    device = p.device
    width = max(num_draft_tokens, default=0)
    request, offset, counts = positions_of(num_draft_tokens, device)
    B = counts.shape[0]
    tokens = torch.full((B, width + 1), PLACEHOLDER, dtype=torch.int64, device=device)
    accepted = torch.zeros((B, width), dtype=torch.bool, device=device)
    if request.shape[0]:
        usable, laws, real = draft_laws(q, drafts, p.shape[1])
        verified, hit = verifier.verify(p, laws, usable, seeds)
        tokens[request, offset] = verified.to(torch.int64)
        accepted[request, offset] = hit & real
    # positions output: the leading accepted ones and the first after them
    kept = torch.cumprod(accepted.to(torch.int64), dim=1).sum(dim=1)
    columns = torch.arange(width + 1, device=device)
    tokens = torch.where(columns <= kept[:, None], tokens, torch.full_like(tokens, PLACEHOLDER))
    done = kept == counts  # every draft accepted (or none proposed): the bonus token follows them
    tokens[torch.arange(B, device=device), counts] = torch.where(done, bonus[:, 0].to(torch.int64),
                                                               tokens[torch.arange(B, device=device), counts])
    return tokens.to(torch.int32)

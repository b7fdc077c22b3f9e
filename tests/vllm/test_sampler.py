"""The plugin's rejection sampler called as vLLM's model runner calls it, on inputs built here:
placeholder drafts, drafts of probability 0, greedy and sampled requests in one batch, seeded
requests, logprobs. Runs in the vLLM environment (make test).

Each request's target logits are the same at every step here (they do not depend on the prefix),
so each output token, wherever the chain was cut, is a draw of its position's target law: the
first of p1, the second (when output) of p2, the third of p3.
"""
import numpy as np
import pytest
import torch
from vllm.v1.sample.logits_processor import LogitsProcessors
from vllm.v1.sample.metadata import SamplingMetadata
from vllm.v1.sample.sampler import Sampler
from vllm.v1.spec_decode.metadata import SpecDecodeMetadata

import multidraft as md
from multidraft.vllm import CHAIN_VERIFIERS
from multidraft.vllm._patch import RejectionSampler

from laws import pooled_pvalue

V = 8
TEMPERATURE = 0.8
ALPHA = 1e-3


def spec_metadata(chains):
    """vLLM's metadata for requests with these draft chains: each request's draft positions and
    then its bonus position, consecutive in the logits."""
    counts = [len(c) for c in chains]
    cu_draft = np.cumsum(counts)
    cu_sampled = np.cumsum([n + 1 for n in counts])
    starts = cu_sampled - np.array(counts) - 1
    target = [int(s) + j for s, n in zip(starts, counts) for j in range(n)]
    return SpecDecodeMetadata(
        draft_token_ids=torch.tensor(sum(map(list, chains), []), dtype=torch.int32),
        num_draft_tokens=counts,
        cu_num_draft_tokens=torch.tensor(cu_draft, dtype=torch.int32),
        cu_num_sampled_tokens=torch.tensor(cu_sampled, dtype=torch.int32),
        target_logits_indices=torch.tensor(target, dtype=torch.int32),
        bonus_logits_indices=torch.tensor(starts + np.array(counts), dtype=torch.int32),
        logits_indices=torch.arange(int(cu_sampled[-1]), dtype=torch.int32))


def sampling_metadata(temperatures, generators=None, logprobs=None):
    B = len(temperatures)
    temperature = torch.tensor(temperatures, dtype=torch.float32)
    return SamplingMetadata(
        temperature=temperature, all_greedy=bool((temperature == 0).all()), all_random=bool((temperature > 0).all()),
        top_p=None, top_k=None, generators=generators or {}, max_num_logprobs=logprobs, no_penalties=True,
        prompt_token_ids=None, frequency_penalties=torch.zeros(B), presence_penalties=torch.zeros(B),
        repetition_penalties=torch.ones(B), output_token_ids=[[] for _ in range(B)], allowed_token_ids_mask=None,
        bad_words_token_ids={}, logitsprocs=LogitsProcessors())


def plugin_sampler(verifier="sps"):
    sampler = RejectionSampler(Sampler())
    sampler.multidraft_verifier = md.verifier(verifier)  # as asked_options sets it in an engine
    return sampler


@pytest.fixture(scope="module")
def case():
    """Logits of three positions (two drafts and the bonus) and the draft laws of the first two."""
    rng = np.random.default_rng(0)
    logits = rng.normal(scale=1.5, size=(3, V))
    q = rng.dirichlet(np.full(V, 0.7), size=2)
    q[1, 5] = 0.0  # a token the second draft law cannot produce
    q[1] /= q[1].sum()
    p = np.exp(logits / TEMPERATURE)
    return logits, q, p / p.sum(axis=1, keepdims=True)


def batch(case, B, rng, kinds):
    """B requests, each of a kind: "drawn" (drafts drawn from q), "placeholder" (second draft -1),
    "impossible" (second draft 5, of probability 0 under q), "short" (one draft), "none"."""
    logits, q, _ = case
    chains, rows, draft_rows = [], [], []
    for b in range(B):
        kind = kinds[b % len(kinds)]
        first, second = rng.choice(V, p=q[0]), rng.choice(V, p=q[1])
        chain = {"drawn": [first, second], "placeholder": [first, -1], "impossible": [first, 5],
                 "short": [first], "none": []}[kind]
        chains.append(chain)
        rows += [logits[j] for j in range(len(chain))] + [logits[2]]
        draft_rows += [q[j] for j in range(len(chain))]
    metadata = spec_metadata(chains)
    draft_probs = torch.tensor(np.array(draft_rows), dtype=torch.float32) if draft_rows else None
    return metadata, draft_probs, torch.tensor(np.array(rows), dtype=torch.float32)


def position_laws_hold(out, lengths, p):
    """Chi-square of the output tokens drawn from each law: column j of a request with n drafts
    is a draw of p[j] for j < n, and of p[2] (vLLM's bonus) for j = n."""
    column = np.arange(out.shape[1])[None, :]
    law = np.where(column < lengths[:, None], column, 2)
    for index in range(3):
        tokens = out[(law == index) & (out >= 0)]
        pvalue = pooled_pvalue(np.bincount(tokens, minlength=V), p[index] * tokens.size)
        assert pvalue > ALPHA, index


@pytest.mark.parametrize("verifier", CHAIN_VERIFIERS)
def test_each_output_token_has_its_positions_law(case, verifier):
    torch.manual_seed(0)
    rng = np.random.default_rng(1)
    metadata, draft_probs, logits = batch(case, 6000, rng, ["drawn", "placeholder", "impossible", "short", "none"])
    out = plugin_sampler(verifier)(metadata, draft_probs, logits, sampling_metadata([TEMPERATURE] * 6000))
    out = out.sampled_token_ids.numpy()
    assert out.shape == (6000, 3) and out.dtype == np.int32
    chains = [list(metadata.draft_token_ids[s - n:s].numpy()) for s, n in
              zip(np.cumsum(metadata.num_draft_tokens), metadata.num_draft_tokens)]
    lengths = np.array([len(chain) for chain in chains])
    position_laws_hold(out, lengths, case[2])
    for row, chain in zip(out, chains):
        kept = row[row >= 0]
        assert kept.size >= 1 and np.all(row[kept.size:] == -1)
        accepted = 0
        while accepted < len(chain) and accepted < kept.size - 1 and kept[accepted] == chain[accepted]:
            accepted += 1
        assert kept.size == accepted + 1  # the accepted drafts, then one token
        if len(chain) == 2 and chain[1] in (-1, 5):
            assert kept.size <= 2  # a position that was not drawn from q ends the chain


def test_greedy_requests_beside_sampled_ones(case):
    """A temperature-0 request accepts a draft iff it is the argmax, and otherwise outputs it."""
    logits, q, _ = case
    argmax = logits.argmax(axis=1)
    chains = [[argmax[0], argmax[1]], [argmax[0], (argmax[1] + 1) % V], [(argmax[0] + 1) % V, argmax[1]],
              [argmax[0], argmax[1]]]
    rows = []
    for chain in chains:
        rows += [logits[0], logits[1], logits[2]]
    metadata = spec_metadata(chains)
    draft_probs = torch.tensor(np.array([q[0], q[1]] * len(chains)), dtype=torch.float32)
    out = plugin_sampler()(metadata, draft_probs, torch.tensor(np.array(rows), dtype=torch.float32),
                           sampling_metadata([0.0, 0.0, 0.0, 1.0]))
    out = out.sampled_token_ids.numpy()
    assert out[0].tolist() == [argmax[0], argmax[1], argmax[2]]
    assert out[1].tolist() == [argmax[0], argmax[1], -1]
    assert out[2].tolist() == [argmax[0], -1, -1]
    assert (out[3] >= 0).sum() >= 1


def test_seeded_requests_repeat(case):
    """A request with its own generator gets the same verification draws from the same seed."""
    rng = np.random.default_rng(2)
    metadata, draft_probs, logits = batch(case, 64, rng, ["drawn"])

    def run():
        generators = {b: torch.Generator().manual_seed(100 + b) for b in range(0, 64, 2)}
        out = plugin_sampler()(metadata, draft_probs, logits.clone(), sampling_metadata([TEMPERATURE] * 64,
                                                                                        generators))
        return out.sampled_token_ids.numpy()

    first, second = run(), run()
    seeded = np.arange(0, 64, 2)
    assert np.array_equal(first[seeded, :2], second[seeded, :2])  # the bonus is vLLM's own draw


def test_logprobs_as_vllm_returns_them(case):
    rng = np.random.default_rng(3)
    metadata, draft_probs, logits = batch(case, 16, rng, ["drawn", "short"])
    out = plugin_sampler()(metadata, draft_probs, logits, sampling_metadata([TEMPERATURE] * 16, logprobs=2))
    tensors = out.logprobs_tensors
    assert tensors is not None and tensors.logprob_token_ids.shape[1] == 3
    sampled = out.sampled_token_ids.numpy().reshape(-1)
    ids = tensors.logprob_token_ids[:, 0].numpy()
    assert np.array_equal(ids[sampled >= 0], sampled[sampled >= 0])  # the sampled token's logprob first


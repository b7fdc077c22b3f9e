"""multidraft.hf: the transformers generation loop is lossless end to end, reproducible and batch-safe.

Losslessness: the law of the first 3 generated tokens (draft_length 2, so a round covers both draft
positions and the bonus token, and a second round starts inside the window) is compared with the
target's exact sequence law, computed by enumerating all V**3 continuations, by a seeded chi-square
test, for every registry verifier and every n in {1, 2, 4} it allows, under several sampling
settings, on tiny GPT-2 and Llama models. Samples come cheaply from a batch of one prompt repeated.
"""
import numpy as np
import pytest

pytest.importorskip("torch", reason="multidraft.hf needs torch and transformers: pip install 'multidraft[hf]'")
import torch
from scipy import stats
from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

import multidraft as md
from multidraft import hf
from hf_models import FAMILIES, sequence_law, tiny_model, tiny_pair

PROMPT = [1, 2, 3]
SAMPLES = 1500
LENGTH = 3
SETTINGS = [  # (temperature, top_k, top_p)
    (1.0, None, None),
    (0.6, 4, None),
    (1.4, 6, 0.85),
]


def allowed_n(name):
    fixed = md.verifier(name).fixed_n
    return [fixed] if fixed else [1, 2, 4]


# (verifier, n, setting, draft_top_k): draft_top_k truncates the draft law only, so the output law
# must stay the (warped) target's; checked on a few cases
CASES = [(name, n, s, None) for name in md.verifier_names() for n in allowed_n(name) for s in range(len(SETTINGS))]
CASES += [("otlp", 4, 0, 3), ("khisti", 2, 2, 3), ("rrs_without_replacement", 4, 1, 2), ("spechub", 2, 0, 3)]


@pytest.fixture(scope="module")
def pairs():
    return {family: tiny_pair(family) for family in FAMILIES}


def case_id(case):
    name, n, s, draft_top_k = case
    return f"{name}-n{n}-s{s}" + ("" if draft_top_k is None else f"-draft_top_k{draft_top_k}")


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_first_tokens_follow_the_target_law(case, pairs):
    name, n, s, draft_top_k = case
    family = FAMILIES[(s + n) % 2]  # every verifier meets both model families
    target, draft = pairs[family]
    temperature, top_k, top_p = SETTINGS[s]
    sequences, probs = sequence_law(target, PROMPT, LENGTH, temperature, top_k, top_p)
    result = hf.generate(target, draft, torch.tensor([PROMPT] * SAMPLES), LENGTH, num_drafts=n, draft_length=2,
                         verifier=name, temperature=temperature, top_k=top_k, top_p=top_p, seed=1000 + s,
                         draft_top_k=draft_top_k)
    V = target.config.vocab_size
    generated = result.sequences[:, len(PROMPT):].numpy()
    cells = generated @ (V ** np.arange(LENGTH - 1, -1, -1))  # the row index in `sequences`
    observed = np.bincount(cells, minlength=len(sequences)).astype(float)
    assert np.all(observed[probs == 0] == 0), "a sequence of probability zero was generated"
    expected = probs * SAMPLES
    small = expected < 5  # pool the rare sequences into one cell
    obs = np.append(observed[~small], observed[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    keep = exp > 0
    pvalue = stats.chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()).pvalue
    assert pvalue > 1e-4, f"{family}: chi-square p-value {pvalue:.2e}"
    assert result.stats.new_tokens == SAMPLES * LENGTH


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("name, n", [("otlp", 4), ("spechub", 2), ("rrs_without_replacement", 3), ("sps", 1)])
def test_temperature_zero_is_the_target_greedy_output(family, name, n, pairs):
    target, draft = pairs[family]
    ids = torch.tensor([PROMPT, [4, 1, 5]])
    result = hf.generate(target, draft, ids, 8, num_drafts=n, draft_length=3, verifier=name, temperature=0, seed=0)
    greedy = target.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=8, do_sample=False,
                             pad_token_id=0, eos_token_id=None)
    assert torch.equal(result.sequences, greedy)


def test_same_seed_same_output_and_other_seeds_differ(pairs):
    target, draft = pairs["llama"]
    ids = torch.tensor([PROMPT] * 6)
    run = lambda seed: hf.generate(target, draft, ids, 10, num_drafts=2, verifier="khisti", seed=seed).sequences
    first = run(7)
    assert torch.equal(first, run(7))
    assert not torch.equal(first, run(8))
    assert len({tuple(row) for row in first.tolist()}) > 1  # rows get their own generators


@pytest.mark.parametrize("eos", [None, 3], ids=["", "eos"])  # with eos, rows leave the batch early
@pytest.mark.parametrize("family", FAMILIES)
def test_batch_equals_one_prompt_at_a_time(family, eos, pairs):
    target, draft = pairs[family]
    prompts = [[1, 2, 3, 4, 5], [6], [2, 7, 3]]
    width = max(map(len, prompts))
    ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    batch = hf.generate(target, draft, ids, 9, num_drafts=3, draft_length=3, verifier="spectr", seed=11,
                        attention_mask=mask, top_k=5, eos_token_id=eos)
    seeds = md.row_seeds(11, len(prompts))
    for b, prompt in enumerate(prompts):
        single = hf.generate(target, draft, torch.tensor([prompt]), 9, num_drafts=3, draft_length=3,
                             verifier="spectr", seed=int(seeds[b]), top_k=5, eos_token_id=eos)
        assert batch.sequences[b, width:].tolist() == single.sequences[0, len(prompt):].tolist()
    assert torch.equal(batch.sequences[:, :width], ids)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("name, n", [("otlp", 3), ("spechub", 2), ("rrs_without_replacement", 4)])
def test_kept_caches_give_what_re_encoding_gives(family, name, n, pairs):
    """Caches kept across rounds (rejected drafts masked as holes) reproduce re-encoding every
    round: same seed, same random draws, same tokens (the logits agree to float rounding)."""
    target, draft = pairs[family]
    ids, mask = torch.tensor([[0, 0, 1, 2], [3, 4, 5, 6]]), torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]])
    runs = [hf.generate(target, draft, ids, 20, num_drafts=n, draft_length=3, verifier=name, seed=4,
                        attention_mask=mask, top_p=0.95, kv_cache=kv_cache) for kv_cache in (True, False)]
    assert torch.equal(runs[0].sequences, runs[1].sequences)
    assert runs[0].stats.row_rounds == runs[1].stats.row_rounds


def test_statistics_add_up(pairs):
    target, draft = pairs["gpt2"]
    result = hf.generate(target, draft, torch.tensor([PROMPT] * 5), 12, num_drafts=4, draft_length=3, seed=3,
                         verifier=md.verifier("otlp", method="maxflow"))
    s = result.stats
    assert s.new_tokens == 60 and s.verifier == "otlp"
    assert s.reached[0] == s.row_rounds  # position 0 is verified in every round
    assert np.all(s.accepted <= s.reached) and np.all(s.reached[1:] == s.accepted[:-1])
    assert 1 <= s.tokens_per_target_pass <= 4
    assert s.acceptance_per_position.shape == (3,)
    assert min(s.draft_seconds, s.target_seconds, s.verify_seconds) > 0


def test_end_of_sequence_stops_a_row_and_pads(pairs):
    target, draft = pairs["gpt2"]
    ids = torch.tensor([PROMPT] * 20)
    result = hf.generate(target, draft, ids, 15, seed=5, eos_token_id=4, pad_token_id=7)
    for row in result.sequences[:, 3:].tolist():
        if 4 in row:
            assert set(row[row.index(4) + 1:]) <= {7}


@pytest.mark.parametrize("kwargs, message", [
    (dict(verifier="spechub", num_drafts=4), "exactly 2"),
    (dict(verifier="sps", num_drafts=2), "exactly 1"),
    (dict(verifier="nope"), "unknown verifier"),
    (dict(verifier=md.verifier("khisti", scheme="independent")), "one draft model per draft"),
    (dict(temperature=-1.0), "temperature"),
    (dict(top_p=0.0), "top_p"),
    (dict(top_k=0), "top_k"),
    (dict(num_drafts=0), "num_drafts"),
    (dict(draft_length=0), "draft_length"),
    (dict(draft_top_k=0), "draft_top_k"),
    (dict(attention_mask=torch.zeros(1, 3)), "all zeros"),
])
def test_bad_arguments_raise_clear_errors(kwargs, message, pairs):
    target, draft = pairs["gpt2"]
    with pytest.raises(ValueError, match=message):
        hf.generate(target, draft, torch.tensor([PROMPT]), 4, **kwargs)


def test_vocabulary_mismatch_is_refused(pairs):
    with pytest.raises(ValueError, match="vocabularies differ"):
        hf.generate(pairs["gpt2"][0], tiny_model("llama", 3), torch.tensor([PROMPT]), 4, seed=0)


@pytest.mark.parametrize("temperature, top_k, top_p", [(1.0, None, None), (0.7, 3, None), (1.3, None, 0.6),
                                                       (0.9, 5, 0.8), (2.0, 1, None)])
def test_warping_matches_transformers_sampling_processors(temperature, top_k, top_p):
    logits = torch.randn(50, 12, generator=torch.Generator().manual_seed(0)) * 3
    processors = LogitsProcessorList([TemperatureLogitsWarper(temperature)])
    if top_k is not None:
        processors.append(TopKLogitsWarper(top_k))
    if top_p is not None:
        processors.append(TopPLogitsWarper(top_p))
    expected = torch.softmax(processors(None, logits.clone()).double(), dim=-1).numpy()
    np.testing.assert_allclose(hf.warp_probabilities(logits, temperature, top_k, top_p), expected, atol=1e-6)

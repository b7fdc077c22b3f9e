"""multidraft.hf: the transformers generation loop is lossless end to end, on six model families.

Losslessness: the law of the first 3 generated tokens (draft_length 2, so a round covers both draft
positions and the bonus token, and a second round starts inside the window) is compared with the
target's exact sequence law, computed by enumerating all V**3 continuations, by a seeded chi-square
test, for every registry verifier and every n in {1, 2, 4} it allows, under several sampling
settings, through `hf.generate` (temperature/top-k/top-p) and through `model.generate(...,
custom_generate=hf.decode)` with transformers' own processors (repetition penalty included).
Samples come cheaply from a batch of one prompt repeated. Greedy decoding must reproduce
`target.generate` token for token, with left-padded batches, EOS lists and a draft that is always
accepted (long accepted chains stress the cache bookkeeping, and the sliding windows of Mistral,
Gemma 2 and Qwen2 are shorter than the outputs).
"""
import threading

import numpy as np
import pytest

pytest.importorskip("torch", reason="multidraft.hf needs torch and transformers: pip install 'multidraft[hf]'")
import torch
from transformers import (LlamaConfig, LlamaForCausalLM, LogitsProcessorList, RepetitionPenaltyLogitsProcessor, TemperatureLogitsWarper,
                          StoppingCriteria, StoppingCriteriaList, TextIteratorStreamer, TopKLogitsWarper, TopPLogitsWarper)

import multidraft as md
from multidraft import hf
from multidraft.hf._cache import cache_keyword
from hf_models import (FAMILIES, assert_follows, batch_and_rows, processed_sequence_law, sequence_law, tiny_model,
                       tiny_pair, word_tokenizer)

PROMPT = [1, 2, 3]
SAMPLES = 1200
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
CASES = [(name, n, s, None) for name in md.verifier_names() for n in allowed_n(name) for s in range(len(SETTINGS))
         if n != 2 or s == 1]  # n = 2 once per verifier: n = 1 and 4 bracket it
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
    family = FAMILIES[(3 * s + n + len(name)) % len(FAMILIES)]  # verifiers meet every family
    target, draft = pairs[family]
    temperature, top_k, top_p = SETTINGS[s]
    sequences, probs = sequence_law(target, PROMPT, LENGTH, temperature, top_k, top_p)
    result = hf.generate(target, draft, torch.tensor([PROMPT] * SAMPLES), LENGTH, num_drafts=n, draft_length=2,
                         verifier=name, temperature=temperature, top_k=top_k, top_p=top_p, seed=1000 + s,
                         draft_top_k=draft_top_k)
    assert_follows(result.sequences[:, len(PROMPT):].numpy(), sequences, probs, target.config.vocab_size, family)
    assert result.stats.new_tokens == SAMPLES * LENGTH


@pytest.mark.parametrize("family, name, n", [("mistral", "otlp", 4), ("qwen2", "spechub", 2),
                                             ("gemma2", "rrs_without_replacement", 3), ("gpt2", "sps", 1)])
def test_decode_follows_the_processed_target_law(family, name, n, pairs):
    """Through model.generate: a repetition penalty (which reads each position's own prefix,
    draft tokens included), temperature, top-k and top-p, exactly as transformers samples."""
    target, draft = pairs[family]
    penalty, temperature, top_k, top_p = 1.8, 0.8, 5, 0.9
    processors = LogitsProcessorList([RepetitionPenaltyLogitsProcessor(penalty), TemperatureLogitsWarper(temperature),
                                      TopKLogitsWarper(top_k), TopPLogitsWarper(top_p)])
    sequences, probs = processed_sequence_law(target, PROMPT, LENGTH, processors)
    ids = torch.tensor([PROMPT] * SAMPLES)
    out = target.generate(ids, attention_mask=torch.ones_like(ids), custom_generate=hf.decode, draft_model=draft,
                          num_drafts=n, draft_length=2, verifier=name, seed=5, do_sample=True,
                          repetition_penalty=penalty, temperature=temperature, top_k=top_k, top_p=top_p,
                          max_new_tokens=LENGTH, pad_token_id=0, eos_token_id=None, return_dict_in_generate=True)
    assert_follows(out.sequences[:, len(PROMPT):].numpy(), sequences, probs, target.config.vocab_size, family)
    assert out.multidraft.new_tokens == SAMPLES * LENGTH and out.multidraft.verifier == name


LEFT_PADDED = torch.tensor([[0, 0, 1, 2, 3], [4, 1, 5, 6, 2], [0, 0, 0, 0, 7]])
MASK = (torch.arange(5)[None] >= torch.tensor([[2], [0], [4]])).long()


@pytest.mark.parametrize("eos", [None, [3, 5]], ids=["", "eos-list"])
@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_is_the_target_greedy_output(family, eos, pairs):
    """Both entry points, a left-padded batch, with a weak draft and with the target as its own
    draft (every draft accepted); the model's generation config gives do_sample=False."""
    target, draft = pairs[family]
    greedy = target.generate(LEFT_PADDED, attention_mask=MASK, max_new_tokens=14, pad_token_id=0, eos_token_id=eos)
    penalised = target.generate(LEFT_PADDED, attention_mask=MASK, max_new_tokens=14, pad_token_id=0,
                                eos_token_id=eos, repetition_penalty=1.5)  # per-row processor state
    for drafter, name, n, L in [(draft, "otlp", 3, 3), (target, "sps", 1, 4), (target, "spechub", 2, 2)]:
        for penalty, expected in ((1.0, greedy), (1.5, penalised)):
            ours = target.generate(LEFT_PADDED, attention_mask=MASK, max_new_tokens=14, pad_token_id=0,
                                   eos_token_id=eos, repetition_penalty=penalty, custom_generate=hf.decode,
                                   draft_model=drafter, num_drafts=n, draft_length=L, verifier=name)
            assert torch.equal(ours, expected), (name, n, L, penalty)
        low = hf.generate(target, drafter, LEFT_PADDED, 14, attention_mask=MASK, num_drafts=n, draft_length=L,
                          verifier=name, temperature=0, eos_token_id=eos, pad_token_id=0)
        assert torch.equal(low.sequences, greedy), (name, n, L)


def test_drafts_stop_at_the_length_limit(pairs):
    """Near max_length fewer draft positions are drawn: GPT-2's 64 positions are never exceeded
    even with an always-accepted draft of length 5 running to the last position."""
    target, _ = pairs["gpt2"]
    ids = torch.tensor([PROMPT])
    limit = target.config.n_positions - len(PROMPT)
    greedy = target.generate(ids, max_new_tokens=limit, pad_token_id=0, eos_token_id=None)
    ours = target.generate(ids, max_new_tokens=limit, pad_token_id=0, eos_token_id=None, custom_generate=hf.decode,
                           draft_model=target, num_drafts=2, draft_length=5, verifier="otlp")
    assert torch.equal(ours, greedy) and ours.shape[1] == target.config.n_positions


def test_same_seed_same_output_and_other_seeds_differ(pairs):
    target, draft = pairs["llama"]
    ids = torch.tensor([PROMPT] * 6)
    run = lambda seed: hf.generate(target, draft, ids, 10, num_drafts=2, verifier="khisti", seed=seed).sequences
    first = run(7)
    assert torch.equal(first, run(7))
    assert not torch.equal(first, run(8))
    assert len({tuple(row) for row in first.tolist()}) > 1  # rows get their own generators
    decode = lambda: target.generate(ids, custom_generate=hf.decode, draft_model=draft, do_sample=True,
                                     max_new_tokens=10, pad_token_id=0)
    torch.manual_seed(3)
    again = decode()
    torch.manual_seed(3)
    assert torch.equal(again, decode())  # seed=None: drawn from torch's generator


@pytest.mark.parametrize("eos", [None, 3], ids=["", "eos"])  # with eos, rows leave the batch early
@pytest.mark.parametrize("family", ["gpt2", "mistral"])
def test_batch_equals_one_prompt_at_a_time(family, eos, pairs):
    target, draft = pairs[family]
    ids, sequences, rows = batch_and_rows(target, draft, 9, 11, num_drafts=3, draft_length=3, verifier="spectr",
                                          top_k=5, eos_token_id=eos)
    for row, single in rows:
        assert row[: len(single)] == single and set(row[len(single):]) <= {0}
    assert torch.equal(sequences[:, :ids.shape[1]], ids)


@pytest.mark.parametrize("family", ["llama", "mistral", "gemma2"])
@pytest.mark.parametrize("name, n", [("otlp", 3), ("rrs_without_replacement", 4)])
def test_kept_caches_give_what_re_encoding_gives(family, name, n, pairs):
    """Caches kept across rounds (the accepted path gathered, the rest dropped) reproduce
    re-encoding every round: same seed, same random draws, same tokens."""
    target, draft = pairs[family]
    runs = [hf.generate(target, draft, LEFT_PADDED, 20, num_drafts=n, draft_length=3, verifier=name, seed=4,
                        attention_mask=MASK, top_p=0.95, kv_cache=kv_cache) for kv_cache in (True, False)]
    assert torch.equal(runs[0].sequences, runs[1].sequences)
    assert runs[0].stats.row_rounds == runs[1].stats.row_rounds
    assert runs[0].stats.target_positions < runs[1].stats.target_positions


def test_statistics_add_up(pairs):
    target, draft = pairs["gpt2"]
    n, L = 4, 3
    result = hf.generate(target, draft, torch.tensor([PROMPT]), 30, num_drafts=n, draft_length=L, seed=3,
                         verifier=md.verifier("otlp", method="maxflow"))
    s = result.stats
    assert s.new_tokens == 30 and s.verifier == "otlp"
    assert s.reached[0] == s.row_rounds == s.target_calls  # position 0 is verified in every round
    assert np.all(s.accepted <= s.reached) and np.all(s.reached[1:] <= s.accepted[:-1])
    assert 1 <= s.tokens_per_target_pass <= L + 1
    # the target reads each token once: the prompt, then per round the new token and the tree's
    # nodes: n * L slots at most (fewer where draws merged or near the end), one at least
    once = len(PROMPT) + (s.row_rounds - 1)
    assert s.target_positions == once + s.tree_nodes
    assert s.row_rounds <= s.tree_nodes <= s.row_rounds * n * L and s.nodes_per_round == s.tree_nodes / s.row_rounds
    assert s.group_reached.sum() == s.reached.sum() and s.group_accepted.sum() == s.accepted.sum()
    assert s.tree == hf.Tree.chains(n, L).parents
    assert s.acceptance_per_position.shape == (L,)
    assert min(s.draft_seconds, s.target_seconds, s.verify_seconds) > 0


def test_streamer_receives_the_new_tokens_and_ends(pairs):
    target, draft = pairs["llama"]
    tokenizer = word_tokenizer(target.config.vocab_size)
    streamer = TextIteratorStreamer(tokenizer, skip_prompt=True, timeout=120)  # a failed loop raises, never hangs
    ids = torch.tensor([PROMPT])
    result = {}
    run = lambda: result.setdefault("out", target.generate(
        ids, custom_generate=hf.decode, draft_model=draft, streamer=streamer, max_new_tokens=12, do_sample=True,
        pad_token_id=0, eos_token_id=None, seed=1))
    thread = threading.Thread(target=run)
    thread.start()
    text = "".join(streamer)  # ends only when the loop calls streamer.end()
    thread.join(120)
    assert text.split() == tokenizer.decode(result["out"][0, len(PROMPT):]).split()


class EndsWith(StoppingCriteria):
    """A user's stopping criterion: a row ends after the token ``token``."""

    def __init__(self, token):
        self.token = token

    def __call__(self, input_ids, scores, **kwargs):
        return input_ids[:, -1] == self.token


def test_stopping_criteria_and_min_new_tokens(pairs):
    """A user's criterion and EOS end rows token by token; min_new_tokens (a processor) forbids
    EOS before 3 tokens. (Stop strings come as a StopStringCriteria criterion: transformers drops
    ``tokenizer=`` before a callable custom_generate.)"""
    target, draft = pairs["gpt2"]
    ids = torch.tensor([PROMPT] * 12)
    out = target.generate(ids, custom_generate=hf.decode, draft_model=draft, do_sample=True, max_new_tokens=20,
                          stopping_criteria=StoppingCriteriaList([EndsWith(4)]), pad_token_id=7, eos_token_id=5,
                          min_new_tokens=3, seed=2, num_drafts=3)
    ends = 0
    for row in out[:, len(PROMPT):].tolist():
        end = next((i for i, t in enumerate(row) if t in (4, 5)), None)
        if end is not None:
            ends += 1
            assert set(row[end + 1:]) <= {7} and (row[end] == 4 or end >= 3)
    assert ends > 0


def test_padded_logit_widths_are_one_vocabulary():
    """A draft whose LM head has a padding row more or less than the target's (the same
    tokenizer, widths within 1%) is served: greedy output unchanged."""
    def llama(seed, width, layers):
        torch.manual_seed(seed)
        config = tiny_model("llama", seed, layers).config.to_dict()
        return LlamaForCausalLM(LlamaConfig(**{**config, "vocab_size": width})).eval()

    target, ids = llama(0, 100, layers=2), torch.tensor([PROMPT])
    greedy = target.generate(ids, max_new_tokens=10, pad_token_id=0, eos_token_id=None)
    for width in (99, 101):
        ours = target.generate(ids, custom_generate=hf.decode, draft_model=llama(1, width, layers=1),
                               max_new_tokens=10, pad_token_id=0, eos_token_id=None)
        assert torch.equal(ours, greedy)


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
    (dict(eos_token_id=[1, -2]), "eos_token_id"),
    (dict(attention_mask=torch.zeros(1, 3)), "all zeros"),
])
def test_bad_arguments_raise_clear_errors(kwargs, message, pairs):
    target, draft = pairs["gpt2"]
    with pytest.raises(ValueError, match=message):
        hf.generate(target, draft, torch.tensor([PROMPT]), 4, **kwargs)


class _NeedsScale:
    """A logits processor wanting an argument that generate does not pass: transformers refuses it."""

    def __call__(self, input_ids, scores, scale):
        return scores * scale


@pytest.mark.parametrize("kwargs, message", [
    (dict(), "'draft_model' is required"),
    (dict(logits_processor=LogitsProcessorList([_NeedsScale()])), "required parameters"),
    (dict(num_beams=2), "num_beams"),
    (dict(output_scores=True, return_dict_in_generate=True), "output_scores"),
    (dict(cache_implementation="static"), "cache_implementation"),
])
def test_decode_refuses_what_it_does_not_do(kwargs, message, pairs):
    target, draft = pairs["gpt2"]
    with pytest.raises(ValueError, match=message):
        target.generate(torch.tensor([PROMPT]), custom_generate=hf.decode, max_new_tokens=4,
                        **({"draft_model": draft} if kwargs else {}), **kwargs)


def test_decode_refuses_a_filled_cache_by_either_name(pairs):
    """transformers 5.24 renamed the cache argument past_key_values to cache; both are read."""
    from transformers import DynamicCache

    target, draft = pairs["llama"]
    keyword = cache_keyword(target)
    filled = DynamicCache()
    with torch.inference_mode():
        target(input_ids=torch.tensor([PROMPT]), use_cache=True, **{keyword: filled})
    with pytest.raises(ValueError, match=f"a filled '{keyword}' is not supported"):
        target.generate(torch.tensor([PROMPT]), custom_generate=hf.decode, draft_model=draft, max_new_tokens=4,
                        **{keyword: filled})


def test_models_without_an_exact_cache_are_refused():
    from transformers import FalconConfig, FalconForCausalLM, MambaConfig, MambaForCausalLM

    target = tiny_model("llama", 0)
    recurrent = MambaForCausalLM(MambaConfig(vocab_size=10, hidden_size=16, num_hidden_layers=1, state_size=4))
    with pytest.raises(ValueError, match="no standard key/value cache"):
        hf.generate(target, recurrent, torch.tensor([PROMPT]), 4)
    alibi = FalconForCausalLM(FalconConfig(vocab_size=10, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                           alibi=True))
    with pytest.raises(ValueError, match="ALiBi"):
        hf.generate(alibi, target, torch.tensor([PROMPT]), 4)
    flex = tiny_model("llama", 1)
    flex.set_attn_implementation("flex_attention")
    with pytest.raises(ValueError, match="attn_implementation='flex_attention'"):
        hf.generate(flex, target, torch.tensor([PROMPT]), 4)
    with pytest.raises(ValueError, match="vocabularies differ"):
        hf.generate(tiny_model("gpt2", 0), target, torch.tensor([PROMPT]), 4, seed=0)


def test_streamers_take_one_prompt(pairs):
    target, draft = pairs["gpt2"]
    streamer = TextIteratorStreamer(word_tokenizer(8))
    with pytest.raises(ValueError, match="one prompt"):
        hf.generate(target, draft, torch.tensor([PROMPT, PROMPT]), 4, streamer=streamer)


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


def test_generation_benchmark_runs_on_tiny_models(pairs):
    from multidraft.bench.generation import compare, format_rows

    target, draft = pairs["llama"]
    rows = compare(target, draft, torch.tensor([PROMPT]), new_tokens=6, repeats=1, configs=[("otlp", 2)],
                   draft_length=[1, 3], draft_top_k=4)
    assert [r["method"] for r in rows] == ["target.generate", "transformers assisted"] + ["multidraft otlp"] * 2
    assert [r.get("draft_length") for r in rows] == [None, None, 1, 3]
    assert rows[0]["tokens_per_pass"] == 1.0 and rows[2]["tokens_per_pass"] >= 1.0
    # the new token and one draft node per level at least (identical drafts are one node; the
    # first round also reads the prompt)
    assert rows[3]["target_positions_per_round"] > rows[2]["target_positions_per_round"] >= 1 + 1
    assert "| multidraft otlp | 2 | 3 |" in format_rows(rows)

"""multidraft.hf with an out-of-vocabulary draft ([OOV]): a draft whose LM head is pruned to its most
frequent tokens, drafting through TLI or RDK (a calibrated affinity matrix), is still exactly lossless.

The law of the first 3 tokens is compared with the target's enumerated sequence law by the seeded
chi-square of test_hf (draft_length 2: a round covers both draft positions and the bonus token).
The pruned head keeps half the tokens, so TLI rejects every pruned token the target wants and RDK
moves draft mass onto them: a verifier fed the wrong law would fail these tests.
"""
import numpy as np
import pytest

pytest.importorskip("torch", reason="multidraft.hf needs torch and transformers: pip install 'multidraft[hf]'")
import torch
from transformers import LogitsProcessorList, RepetitionPenaltyLogitsProcessor, TemperatureLogitsWarper

import multidraft as md
from multidraft import hf
from hf_models import FAMILIES, VOCAB, assert_follows, processed_sequence_law, sequence_law, tiny_model, tiny_pair
from test_hf import LENGTH, PROMPT, SAMPLES

#: Corpus counts of the pruning: a fixed ranking that keeps some tokens the target likes and drops others.
COUNTS = {"gpt2": [9, 1, 8, 2, 7, 3, 6, 0], "llama": [5, 9, 0, 8, 1, 7, 2, 6, 3, 4]}


@pytest.fixture(scope="module")
def oov():
    """{family: (target, full draft, pruned draft, vocabulary map, calibrated affinity M)}."""
    out = {}
    for family, counts in COUNTS.items():
        target, draft = tiny_pair(family)
        V = len(counts)
        pruned, vmap = hf.prune_draft_head(draft, np.array(counts), V // 2)
        torch.manual_seed(0)
        contexts = torch.randint(0, V, (64, 6))
        with torch.inference_mode():
            samples = target(input_ids=contexts).logits.reshape(-1, V).double().numpy()  # target logits, Eq. (2)
        M = md.rdk.AffinityMatrix.from_calibration(samples, tau=1.0, top_k=3, rows=vmap.shared)
        out[family] = target, draft, pruned, vmap, M
    return out


def test_pruned_head_keeps_the_draft_logits_of_the_kept_tokens(oov):
    for family, (target, draft, pruned, vmap, M) in oov.items():
        V = len(COUNTS[family])
        kept = vmap.draft_to_target.copy()
        assert vmap.target_size == V and vmap.draft_size == V // 2
        assert list(kept) == list(np.argsort(-np.array(COUNTS[family]), kind="stable")[: V // 2])
        ids = torch.tensor([[1, 2, 3, 4]])
        with torch.inference_mode():
            full, cut = draft(input_ids=ids).logits, pruned(input_ids=ids).logits
        assert cut.shape[-1] == V // 2 and torch.allclose(cut, full[..., kept])
        assert draft.get_output_embeddings().weight.shape[0] == V  # the original is untouched
        dense = M.to_dense()
        assert dense[vmap.shared][:, vmap.target_only].sum() > 0.1  # RDK reaches the pruned tokens


@pytest.mark.parametrize("family", FAMILIES)
def test_prune_draft_head_on_every_family(family):
    """The pruned head gives the kept columns of the full logits (soft-capping included, Gemma 2)."""
    model = tiny_model(family, seed=1)
    V = VOCAB[family]
    pruned, vmap = hf.prune_draft_head(model, np.arange(V)[::-1].copy(), 3)  # keeps ids 0, 1, 2
    assert list(vmap.draft_to_target) == [0, 1, 2]
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.inference_mode():
        assert torch.allclose(pruned(input_ids=ids).logits, model(input_ids=ids).logits[..., :3], atol=1e-6)


@pytest.mark.parametrize("family, rdk, name, n", [("gpt2", False, "sps", 1), ("llama", False, "otlp", 2),
                                                  ("gpt2", True, "spectr", 2), ("llama", True, "sps", 1)],
                         ids=["tli-sps", "tli-otlp-n2", "rdk-spectr-n2", "rdk-sps"])
def test_oov_drafts_follow_the_target_law(family, rdk, name, n, oov):
    target, _, pruned, vmap, M = oov[family]
    sequences, probs = sequence_law(target, PROMPT, LENGTH, temperature=0.8)
    result = hf.generate(target, pruned, torch.tensor([PROMPT] * SAMPLES), LENGTH, num_drafts=n, draft_length=2,
                         verifier=name, temperature=0.8, seed=21, vocabulary_map=vmap, affinity=M if rdk else None)
    assert_follows(result.sequences[:, len(PROMPT):].numpy(), sequences, probs, target.config.vocab_size, family)
    assert result.stats.accepted[0] > 0  # the drafts are used, not all rejected


def test_decode_with_oov_drafts_follows_the_processed_target_law(oov):
    """Through model.generate: the processors (a repetition penalty reading draft prefixes) run on
    the draft logits laid over the target ids."""
    target, _, pruned, vmap, M = oov["llama"]
    processors = LogitsProcessorList([RepetitionPenaltyLogitsProcessor(1.6), TemperatureLogitsWarper(0.9)])
    sequences, probs = processed_sequence_law(target, PROMPT, LENGTH, processors)
    ids = torch.tensor([PROMPT] * SAMPLES)
    out = target.generate(ids, attention_mask=torch.ones_like(ids), custom_generate=hf.decode, draft_model=pruned,
                          vocabulary_map=vmap, affinity=M, num_drafts=2, draft_length=2, verifier="otlp", seed=8,
                          do_sample=True, repetition_penalty=1.6, temperature=0.9, top_k=None, top_p=None,
                          max_new_tokens=LENGTH, pad_token_id=0, eos_token_id=None)
    assert_follows(out[:, len(PROMPT):].numpy(), sequences, probs, target.config.vocab_size, "llama")


@pytest.mark.parametrize("family", list(COUNTS))
def test_greedy_with_oov_drafts_is_the_target_greedy_output(family, oov):
    target, _, pruned, vmap, M = oov[family]
    ids = torch.tensor([[1, 2, 3], [4, 5, 6]])
    greedy = target.generate(ids, max_new_tokens=12, pad_token_id=0, eos_token_id=None, do_sample=False)
    for affinity, name, n in ((None, "sps", 1), (M, "otlp", 3)):
        ours = hf.generate(target, pruned, ids, 12, num_drafts=n, draft_length=3, verifier=name, temperature=0,
                           vocabulary_map=vmap, affinity=affinity)
        assert torch.equal(ours.sequences, greedy), (name, n)


def test_refusals(oov):
    target, draft, pruned, vmap, M = oov["gpt2"]
    ids = torch.tensor([PROMPT])
    run = lambda drafter, **kw: hf.generate(target, drafter, ids, 2, **kw)
    with pytest.raises(ValueError, match="vocabularies differ.*vocabulary_map"):
        run(pruned)
    with pytest.raises(ValueError, match="'vocabulary_map' maps 4 draft columns, the draft has 8"):
        run(draft, vocabulary_map=vmap)
    with pytest.raises(ValueError, match="'vocabulary_map' maps to 10 target ids"):
        run(pruned, vocabulary_map=md.rdk.VocabularyMap(vmap.draft_to_target, 10))
    with pytest.raises(ValueError, match="'affinity' needs a 'vocabulary_map'"):
        run(draft, affinity=M)
    with pytest.raises(ValueError, match="'affinity' is 10 x 10"):
        run(pruned, vocabulary_map=vmap, affinity=md.rdk.AffinityMatrix.identity(10))
    with pytest.raises(ValueError, match="'vocabulary_map' must be a multidraft.rdk.VocabularyMap"):
        run(pruned, vocabulary_map=list(vmap.draft_to_target))
    with pytest.raises(ValueError, match="'affinity' must be a multidraft.rdk.AffinityMatrix"):
        target.generate(ids, custom_generate=hf.decode, draft_model=pruned, vocabulary_map=vmap, affinity=np.eye(8),
                        max_new_tokens=2, pad_token_id=0)
    small_input = hf.prune_draft_head(draft, np.array(COUNTS["gpt2"]), 4)[0]
    small_input.set_input_embeddings(torch.nn.Embedding(6, small_input.config.n_embd))  # reads fewer ids than emitted
    with pytest.raises(ValueError, match="keep its input embeddings whole"):
        run(small_input, vocabulary_map=vmap)
    with pytest.raises(ValueError, match="'token_counts' must have one count per LM head row"):
        hf.prune_draft_head(draft, np.arange(7), 4)
    with pytest.raises(ValueError, match="'size' = 9 exceeds"):
        hf.prune_draft_head(draft, np.arange(8), 9)


def test_generation_benchmark_runs_with_pruned_drafts(oov, tmp_path):
    from multidraft.bench.generation import compare, format_rows, pruned_drafters

    target, draft, *_ = oov["llama"]
    dataset = tmp_path / "pairs.npz"
    logits = np.random.default_rng(0).standard_normal((16, 10))
    softmax = lambda x: np.exp(x) / np.exp(x).sum(axis=1, keepdims=True)
    np.savez(dataset, token_counts=np.array(COUNTS["llama"]), target_logits=logits, p=softmax(logits),
             q=softmax(logits[::-1]))
    rows = compare(target, draft, torch.tensor([PROMPT]), new_tokens=6, repeats=1, configs=[],
                   draft_length=2, draft_top_k=4, oov=pruned_drafters(draft, dataset, [0.5]))
    assert [r["method"].split(" (tau")[0] for r in rows[2:]] == [
        "multidraft sps TLI 50%", "multidraft otlp TLI 50%", "multidraft sps RDK 50%", "multidraft otlp RDK 50%"]
    assert all(r["cost_ratio"] > 0 and r["predicted_speedup"] > 0 for r in rows[2:])
    assert f"| {rows[-1]['method']} | 2 |" in format_rows(rows) and "RDK 50% (tau " in rows[-1]["method"]

"""The generation loop (multidraft.hf) on the device path: models, logits, laws, drafts and
verification on the tensors' device (the CPU here, through exactly the path of a CUDA tensor; an
accelerator with MULTIDRAFT_TEST_DEVICE). The law of the first 3 tokens follows the target's
enumerated sequence law (the seeded chi-square of tests/hf) for verifiers of every kind on the six
model families, through both entry points, with transformers' processors and with an
out-of-vocabulary draft through RDK; greedy decoding is the target's own; a batch equals its rows
one at a time; what crosses to the host per round does not grow with the vocabulary, and no
operator inside the models' forwards reads the host. The loop's
pieces on their own: its laws against the NumPy ones and across batches, the leaf sampler against
its law, the RDK proposal against the core's from several threads."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
from transformers import (LlamaConfig, LlamaForCausalLM, LogitsProcessorList, RepetitionPenaltyLogitsProcessor,
                          TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper)

import multidraft as md
from multidraft import hf
from hf_models import FAMILIES, assert_follows, batch_and_rows, processed_sequence_law, sequence_law, tiny_pair

PROMPT = [1, 2, 3]
LENGTH = 3
SAMPLES = 600  # the device path on CPU tensors costs more per call than the core's host path


@pytest.fixture(scope="module")
def pairs():
    """{family: (target, draft)} on the tests' device (tests/device/conftest.py)."""
    from .conftest import DEVICE

    return {family: tuple(m.to(DEVICE) for m in tiny_pair(family)) for family in FAMILIES}


# (family, verifier, n, (temperature, top_k, top_p), draft_top_k): an exact plan on the compressed
# problem (otlp, global_resolution, khisti), the baselines' residual laws, a fixed-n verifier, and the
# closed-form laws computed wholly on the device (sps, and naive rejection: topk trees, naive)
CASES = [("llama", "global_resolution", 2, (1.0, None, None), None), ("mistral", "otlp", 4, (0.6, 4, None), 3),
         ("gemma2", "khisti", 2, (1.4, 6, 0.85), None), ("qwen2", "spechub", 2, (1.0, None, None), None),
         ("llama", "rrs_without_replacement", 4, (1.4, 6, 0.85), 2), ("gpt_neox", "sps", 1, (0.6, 4, None), None),
         ("mistral", "topk", 3, (1.0, None, None), None), ("qwen2", "naive", 2, (1.4, 6, 0.85), None)]


@pytest.mark.parametrize("family, name, n, setting, draft_top_k", CASES, ids=lambda c: str(c))
def test_generate_on_the_device_follows_the_target_law(family, name, n, setting, draft_top_k, pairs):
    target, draft = pairs[family]
    sequences, probs = sequence_law(target, PROMPT, LENGTH, *setting)
    result = hf.generate(target, draft, torch.tensor([PROMPT] * SAMPLES), LENGTH, num_drafts=n, draft_length=2,
                         verifier=name, temperature=setting[0], top_k=setting[1], top_p=setting[2], seed=31,
                         draft_top_k=draft_top_k)
    assert_follows(result.sequences[:, len(PROMPT):].cpu().numpy(), sequences, probs, target.config.vocab_size, family)
    assert result.stats.accepted[0] > 0 and result.stats.host_bytes > 0


def test_decode_with_processors_on_the_device_follows_the_processed_law(pairs):
    target, draft = pairs["mistral"]
    processors = LogitsProcessorList([RepetitionPenaltyLogitsProcessor(1.8), TemperatureLogitsWarper(0.8),
                                      TopKLogitsWarper(5), TopPLogitsWarper(0.9)])
    sequences, probs = processed_sequence_law(target, PROMPT, LENGTH, processors)
    ids = torch.tensor([PROMPT] * SAMPLES)
    out = target.generate(ids, attention_mask=torch.ones_like(ids), custom_generate=hf.decode, draft_model=draft,
                          num_drafts=3, draft_length=2, verifier="otlp", seed=5, do_sample=True, repetition_penalty=1.8,
                          temperature=0.8, top_k=5, top_p=0.9, max_new_tokens=LENGTH, pad_token_id=0,
                          eos_token_id=None, return_dict_in_generate=True)
    assert_follows(out.sequences[:, len(PROMPT):].cpu().numpy(), sequences, probs, target.config.vocab_size, "mistral")


def test_an_rdk_draft_on_the_device_follows_the_target_law(pairs):
    """A draft head pruned to half the vocabulary, its law spread by a calibrated affinity matrix
    (a sparse product on the device)."""
    target, draft = pairs["llama"]
    V = target.config.vocab_size
    pruned, vmap = hf.prune_draft_head(draft, np.array([5, 9, 0, 8, 1, 7, 2, 6, 3, 4]), V // 2)
    torch.manual_seed(0)
    with torch.inference_mode():
        samples = target(input_ids=torch.randint(0, V, (64, 6))).logits.reshape(-1, V).double().cpu().numpy()
    M = md.rdk.AffinityMatrix.from_calibration(samples, tau=1.0, top_k=3, rows=vmap.shared)
    sequences, probs = sequence_law(target, PROMPT, LENGTH, temperature=0.8)
    result = hf.generate(target, pruned, torch.tensor([PROMPT] * SAMPLES), LENGTH, num_drafts=2, draft_length=2,
                         verifier="spectr", temperature=0.8, seed=21, vocabulary_map=vmap, affinity=M)
    assert_follows(result.sequences[:, len(PROMPT):].cpu().numpy(), sequences, probs, V, "llama rdk")


def test_greedy_on_the_device_is_the_target_greedy_output(pairs):
    target, draft = pairs["qwen2"]
    ids = torch.tensor([[0, 0, 1, 2, 3], [4, 1, 5, 6, 2]])
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    greedy = target.generate(ids, attention_mask=mask, max_new_tokens=12, pad_token_id=0, eos_token_id=None)
    ours = target.generate(ids, attention_mask=mask, max_new_tokens=12, pad_token_id=0, eos_token_id=None,
                           custom_generate=hf.decode, draft_model=draft, num_drafts=3, draft_length=3, verifier="otlp")
    assert torch.equal(ours.cpu(), greedy.cpu())


def test_a_batch_on_the_device_equals_its_rows_one_at_a_time(pairs):
    target, draft = pairs["gpt2"]
    _, _, rows = batch_and_rows(target, draft, 9, 11, num_drafts=3, draft_length=3, verifier="global_resolution",
                                top_k=5, eos_token_id=3)
    for row, single in rows:
        assert row[: len(single)] == single and set(row[len(single):]) <= {0}


def test_host_traffic_per_round_does_not_grow_with_the_vocabulary():
    """With a top-k draft, a round copies O(nodes x k) numbers to the host: a pair with 16 times
    the vocabulary copies about as much, far less than one law row of it."""
    from .conftest import DEVICE

    per_round = {}
    for V in (256, 4096):
        config = dict(vocab_size=V, hidden_size=16, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1,
                      max_position_embeddings=64, initializer_range=0.5, bos_token_id=0, eos_token_id=0, pad_token_id=0)
        torch.manual_seed(0)
        target = LlamaForCausalLM(LlamaConfig(num_hidden_layers=2, **config)).eval().to(DEVICE)
        draft = LlamaForCausalLM(LlamaConfig(num_hidden_layers=1, **config)).eval().to(DEVICE)
        stats = hf.generate(target, draft, torch.tensor([[1, 2, 3]] * 2), 12, tree=(3, 2, 2), verifier="otlp",
                            draft_top_k=8, seed=0, eos_token_id=None).stats
        per_round[V] = stats.host_bytes_per_round
        assert stats.host_bytes_per_round < 4096 * 8 / 4, V  # a quarter of one float64 law row at V = 4096
    assert per_round[4096] < 1.5 * per_round[256]


@pytest.mark.parametrize("setting", [(1.0, None, None), (0.7, 5, None), (1.3, 8, 0.8), (0.0, None, None)])
def test_the_loop_laws_on_the_device_are_the_numpy_laws_and_do_not_depend_on_the_batch(setting):
    """warp_probabilities and the draft's top-k cut on a tensor: the NumPy input's laws, and each row
    the same alone as in its batch, bit for bit (ties in the logits included)."""
    from multidraft.hf._laws import truncate_draft

    rng = np.random.default_rng(3)
    logits = rng.normal(size=(6, 50)) * 3
    logits[1, :10] = logits[1, 10]  # ties at the top-k cut
    on_device = hf.warp_probabilities(torch.tensor(logits), *setting)
    np.testing.assert_allclose(on_device.cpu().numpy(), hf.warp_probabilities(logits, *setting), rtol=0, atol=1e-15)
    for k in (3, "auto"):
        cut = truncate_draft(on_device, k)
        assert cut.device == on_device.device and cut.dtype == torch.float64
        np.testing.assert_allclose(cut.cpu().numpy(), truncate_draft(on_device.cpu().numpy(), k), rtol=0, atol=1e-15)
        for row in range(len(logits)):
            assert torch.equal(truncate_draft(on_device[row:row + 1], k)[0], cut[row])
    for row in range(len(logits)):
        assert torch.equal(hf.warp_probabilities(torch.tensor(logits[row]), *setting), on_device[row])


def test_the_draft_cut_keeps_exactly_k_tokens_ties_going_to_the_lower_ids():
    """truncate_draft keeps exactly k tokens (with "auto", exactly the count its mass rule asks for),
    the most probable, ties at the cut broken towards the lower token ids: the support the loop's
    one read per depth relies on, whatever the ties (a model in bfloat16 has many)."""
    from multidraft.hf._laws import AUTO_DRAFT_TOKENS, truncate_draft

    q = torch.tensor([[0.1, 0.2, 0.2, 0.2, 0.3, 0.0, 0.0],  # three tied at the cut of k = 3
                      [0.25, 0.25, 0.25, 0.25, 0.0, 0.0, 0.0],  # all tied
                      [0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5],
                      [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]], dtype=torch.float64)  # fewer positive than k
    cut = truncate_draft(q, 3)
    kept = [torch.nonzero(row).flatten().tolist() for row in cut]
    assert kept == [[1, 2, 4], [0, 1, 2], [0, 6], [0]]
    torch.testing.assert_close(cut.sum(-1), torch.ones(4, dtype=torch.float64), rtol=0, atol=1e-15)
    flat = torch.full((2, 100), 0.01, dtype=torch.float64)  # mass 0.995 needs more than 32 tokens: 32, the lowest ids
    assert torch.equal(truncate_draft(flat, "auto") > 0, torch.arange(100).expand(2, 100) < AUTO_DRAFT_TOKENS)


def test_a_leaf_token_drawn_on_the_device_follows_its_law():
    """_device.sample_rows (the bonus token at a leaf): frequencies over 40000 seeds match the law
    within 5 standard deviations, a token of mass 0 (between, before and after the positive ones)
    is never drawn, a one-hot law gives its token, and a batch equals its rows one at a time."""
    from multidraft import _device

    law = torch.tensor([0.0, 0.3, 0.0, 1e-3, 0.45, 0.249, 0.0], dtype=torch.float64)
    rows = 40_000
    tokens = _device.sample_rows(law.expand(rows, -1), np.arange(rows)).cpu().numpy()
    expected = law.cpu().numpy()
    frequencies = np.bincount(tokens, minlength=len(expected)) / rows
    assert np.all(np.abs(frequencies - expected) <= 5 * np.sqrt(expected * (1 - expected) / rows) + 1e-12)
    assert np.all(frequencies[expected == 0] == 0)
    one_hot = torch.zeros(3, 5, dtype=torch.float64).scatter_(1, torch.tensor([[4], [0], [2]]), 1.0)
    assert _device.sample_rows(one_hot, [1, 2, 3]).tolist() == [4, 0, 2]
    batch = _device.sample_rows(law.expand(8, -1), np.arange(8))
    assert [int(_device.sample_rows(law[None], [s])[0]) for s in range(8)] == batch.tolist()


def test_an_rdk_proposal_on_the_device_is_the_host_one_from_every_thread():
    """AffinityMatrix.proposal of a tensor: a sparse product on the device (M^T built once per
    device, under a lock) equal to the core's on the NumPy input, the same from 4 threads at once."""
    import threading

    rng = np.random.default_rng(5)
    M = md.rdk.AffinityMatrix.from_dense(rng.dirichlet(np.full(40, 0.2), size=40))
    q_prime = rng.dirichlet(np.full(40, 0.3), size=6)
    expected = M.proposal(q_prime)
    results = []

    def work():
        results.append(M.proposal(torch.tensor(q_prime)).cpu().numpy())

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4
    for result in results:
        np.testing.assert_allclose(result, expected, rtol=0, atol=1e-15)
    np.testing.assert_allclose(M.proposal(torch.tensor(q_prime[0])).cpu().numpy(), expected[0], rtol=0, atol=1e-15)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("options, depth, ops", [(dict(verifier="sps", num_drafts=1, draft_length=4), 4, 180),
                                                  (dict(verifier="global_resolution", tree=(3, 2, 1)), 3, 255)])
def test_a_round_reads_the_host_once_per_drafted_depth_and_once_to_verify(options, depth, ops, dtype):
    """What a round launches and reads outside the models, counted (multidraft.bench.launches): host
    reads at most depth + 1 (the drafts of each depth, then the whole verification), and the
    kernel-launching operators pinned as a regression guard (deterministic counts; the budgets
    against transformers' assisted generation are in docs/benchmarks/launches.md). Models in
    bfloat16 tie at the draft's top-k cut often: the cut still bounds the support, with no
    second read."""
    from multidraft.bench.launches import Launches, tiny_pair as random_pair

    target, draft = (model.to(dtype) for model in random_pair(vocab=4096))
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    with torch.inference_mode(), Launches([target, draft]) as count:
        result = hf.generate(target, draft, ids, 24, draft_top_k=16, seed=0, eos_token_id=None, **options)
    rounds = result.stats.target_calls
    assert count.passes(target) == rounds
    assert count.reads <= (depth + 1) * rounds + 1  # + 1: the call's own set-up
    assert count.ops <= ops * rounds, (count.ops / rounds, dict(count.by_op))


@pytest.mark.parametrize("family", FAMILIES)
def test_the_models_forwards_read_nothing_from_the_host_under_the_loops_inputs(family, pairs):
    """The loop's inputs to a model (ids and position ids, a 4-D additive mask per layer kind, its
    cache) make no operator inside transformers' forward synchronise with the device, so the host
    reads of a round are the loop's own, counted outside the models (a 2-D mask, for one, is checked
    on the host by the sdpa models' mask code)."""
    from multidraft.bench.launches import Launches

    target, draft = pairs[family]
    with torch.inference_mode(), Launches([target, draft]) as count:
        result = hf.generate(target, draft, torch.tensor(PROMPT), 8, verifier="global_resolution", tree=(2, 2),
                             seed=0, draft_top_k=3, eos_token_id=None)
    assert result.stats.target_calls >= 2 and count.passes(draft) > result.stats.target_calls
    assert count.model_reads == 0


@pytest.mark.parametrize("name, n, ops", [("sps", 1, 20), ("global_resolution", 4, 31), ("otlp", 2, 31)])
def test_the_loops_verify_call_launches_few_kernels_and_reads_once(name, n, ops):
    """_device.loop.verify_all, the loop's verification of one group of rows on a device: at most 40
    kernel-launching operators and ONE host read (results included) at V = 32000 with a top-32 draft,
    the law of each row the public verify's (checked through the loop's law tests above)."""
    from multidraft._device.loop import Checks, verify_all
    from multidraft.bench.launches import Launches

    B, V = 8, 32000
    generator = torch.Generator(device="cpu").manual_seed(0)
    p, q = (torch.softmax(torch.randn(B, V, generator=generator, dtype=torch.float64, device="cpu") * 3, -1)
            .to(torch.get_default_device()) for _ in range(2))
    q = torch.where(q >= q.topk(32).values[:, -1:], q, 0.0)
    q = q / q.sum(-1, keepdim=True)
    v = md.verifier(name)
    drafts = np.stack([np.asarray(v.draft(q[b].cpu().numpy(), n, b)) for b in range(B)])
    seeds = np.arange(B, dtype=np.uint64)
    with Launches() as count:
        (tokens, accepted), = verify_all([(v, p, q, drafts, seeds)], None, seeds[:0], 32, Checks())[0]
    assert count.ops <= ops <= 40 and count.reads == 1, dict(count.by_op)
    assert tokens.shape == accepted.shape == (B,)
    assert all(t in d for t, d, a in zip(tokens, drafts, accepted) if a)


def test_refused_logits_inside_the_loop_raise_at_the_next_read(pairs):
    """The loop's laws are checked with its next host read (_device.loop.Checks), not one read each:
    NaN scores from a processor still end the call with md.softmax's ValueError."""
    from transformers import LogitsProcessor

    class Poison(LogitsProcessor):
        def __call__(self, input_ids, scores):
            return torch.full_like(scores, float("nan"))

    target, draft = pairs["llama"]
    ids = torch.tensor([PROMPT])
    with pytest.raises(ValueError, match="'logits' has nan at index"):
        target.generate(ids, attention_mask=torch.ones_like(ids), custom_generate=hf.decode, draft_model=draft,
                        num_drafts=2, draft_length=2, verifier="otlp", seed=0, do_sample=True, max_new_tokens=4,
                        pad_token_id=0, logits_processor=LogitsProcessorList([Poison()]))

"""multidraft.bench.inflate: an inflated Llama gives the original's logits (a whole forward, a KV
cache over two calls, left padding, generate) at the parameter count of the large shape, and
shapes that cannot hold the original are refused."""
import pytest

pytest.importorskip("torch", reason="multidraft.bench.inflate needs torch and transformers")
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from multidraft import hf
from multidraft.bench.inflate import EIGHT_B, MODERATE, PRESETS, inflate, parse_shape
from multidraft.hf._cache import cache_keyword, returned_cache
from hf_models import tiny_model

V = 40


def llama(heads=4, kv_heads=2, hidden=48, tie=False, bias=False, seed=0):
    """A seeded 2-layer Llama, head_dim hidden/heads, weights far from zero (peaked logits)."""
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=V, hidden_size=hidden, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=64,
                         tie_word_embeddings=tie, attention_bias=bias, mlp_bias=bias, initializer_range=0.3,
                         rms_norm_eps=1e-5, bos_token_id=0, eos_token_id=0, pad_token_id=0)
    return LlamaForCausalLM(config).eval()


def shape(hidden=96, layers=3, intermediate=100, heads=8, kv_heads=4):
    return dict(hidden_size=hidden, num_hidden_layers=layers, intermediate_size=intermediate,
                num_attention_heads=heads, num_key_value_heads=kv_heads)


# (original model's keywords, inflated shape): d/D is not a power of 2 anywhere (sqrt(d/D) rounds)
CASES = {
    "layers": (dict(), shape(hidden=48, heads=4, kv_heads=2, layers=5, intermediate=64)),
    "wider": (dict(), shape(hidden=80, heads=4, kv_heads=2, layers=2, intermediate=64)),
    "mlp": (dict(), shape(hidden=48, heads=4, kv_heads=2, layers=2, intermediate=150)),
    "gqa-heads": (dict(), shape(hidden=96, heads=8, kv_heads=2)),  # groups of 2 -> 4
    "more-kv-heads": (dict(), shape(hidden=120, heads=12, kv_heads=6)),
    "kv-copies": (dict(heads=4, kv_heads=1), shape(hidden=120, heads=8, kv_heads=8)),  # groups of 4 -> 1
    "mha-to-gqa": (dict(heads=4, kv_heads=4), shape(hidden=120, heads=12, kv_heads=4)),
    "tied-bias": (dict(tie=True, bias=True), shape()),
}


@pytest.fixture(scope="module", params=list(CASES))
def pair(request):
    keywords, big_shape = CASES[request.param]
    small = llama(**keywords)
    return small, inflate(small, **big_shape)


def assert_close(big, small):
    scale = small.abs().max()
    assert scale > 1  # peaked logits: a zero or uniform pass would not pass unnoticed
    torch.testing.assert_close(big, small, atol=1e-5 * scale, rtol=0)


def test_shapes_and_zero_padding(pair):
    small, big = pair
    config = big.config
    assert config.head_dim == small.config.head_dim and config.vocab_size == V
    assert config.tie_word_embeddings == small.config.tie_word_embeddings
    assert (big.lm_head.weight is big.model.embed_tokens.weight) == small.config.tie_word_embeddings
    assert big.model.layers[0].self_attn.q_proj.weight.shape == (config.num_attention_heads * config.head_dim,
                                                                 config.hidden_size)
    d = small.config.hidden_size
    assert torch.all(big.model.embed_tokens.weight[:, d:] == 0) and torch.all(big.lm_head.weight[:, d:] == 0)
    torch.testing.assert_close(big.model.rotary_emb.inv_freq, small.model.rotary_emb.inv_freq, rtol=0, atol=0)
    assert big.generation_config.eos_token_id == small.generation_config.eos_token_id and not big.training


def test_logits_equal(pair):
    small, big = pair
    ids = torch.randint(0, V, (3, 11), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        assert_close(big(ids).logits, small(ids).logits)


def test_logits_equal_with_a_cache_over_two_calls(pair):
    small, big = pair
    ids = torch.randint(0, V, (2, 9), generator=torch.Generator().manual_seed(2))
    logits = []
    with torch.inference_mode():
        for model in (small, big):
            prefill = model(ids[:, :-1], use_cache=True)
            step = model(ids[:, -1:], use_cache=True, **{cache_keyword(model): returned_cache(prefill)})
            logits.append(torch.cat([prefill.logits, step.logits], 1))
    assert_close(logits[1], logits[0])


def test_logits_equal_with_left_padding(pair):
    small, big = pair
    ids = torch.randint(1, V, (2, 8), generator=torch.Generator().manual_seed(3))
    mask = torch.ones_like(ids)
    mask[0, :3] = 0
    ids[0, :3] = 0
    with torch.inference_mode():
        expected, got = small(ids, attention_mask=mask).logits, big(ids, attention_mask=mask).logits
    assert_close(got[mask.bool()], expected[mask.bool()])


def test_parameter_count_is_the_large_shapes():
    small = llama()
    big = inflate(small, **shape())
    fresh = LlamaForCausalLM(LlamaConfig(vocab_size=V, head_dim=small.config.head_dim, **shape()))
    assert sum(p.numel() for p in big.parameters()) == sum(p.numel() for p in fresh.parameters())


def test_generate_is_the_originals():
    small = llama(seed=4)
    big = inflate(small, **shape(layers=4))
    draft = llama(heads=2, kv_heads=1, hidden=16, seed=6)
    prompt = torch.tensor([[3, 1, 4, 1, 5]])
    common = dict(max_new_tokens=12, min_new_tokens=12, pad_token_id=0)
    runs = []
    for model in (small, big):
        greedy = model.generate(prompt, do_sample=False, **common)
        torch.manual_seed(5)
        sampled = model.generate(prompt, do_sample=True, **common)
        multidraft = hf.generate(model, draft, prompt, 12, num_drafts=2, verifier="otlp", draft_length=2,
                                 seed=6).sequences
        runs.append((greedy.tolist(), sampled.tolist(), multidraft.tolist()))
    assert runs[1] == runs[0]


def test_dtype_and_device():
    small = llama()
    big = inflate(small, **shape(), device="cpu", dtype=torch.bfloat16)
    assert big.dtype == torch.bfloat16 and big.device.type == "cpu"
    assert big.model.rotary_emb.inv_freq.dtype == torch.float32  # RoPE's frequencies stay float32
    ids = torch.randint(0, V, (1, 6), generator=torch.Generator().manual_seed(7))
    with torch.inference_mode():
        reference = small.to(torch.bfloat16)(ids).logits.float()
        torch.testing.assert_close(big(ids).logits.float(), reference, atol=0.05 * reference.abs().max(), rtol=0)


def test_the_eight_b_shape_is_built_without_allocating():
    big = inflate(llama(heads=4, kv_heads=4, hidden=512), **EIGHT_B, device="meta", dtype=torch.bfloat16)
    assert big.device.type == "meta" and big.config.num_hidden_layers == 32
    assert big.model.layers[31].mlp.down_proj.weight.shape == (4096, 14336)
    assert big.model.layers[0].self_attn.q_proj.weight.shape == (32 * 128, 4096)


def test_parse_shape():
    assert parse_shape("8B") == EIGHT_B and parse_shape("moderate") == MODERATE and set(PRESETS) == {"8b", "moderate"}
    text = "hidden_size=96,num_hidden_layers=3,intermediate_size=100,num_attention_heads=8,num_key_value_heads=4"
    assert parse_shape(text) == shape()
    for bad in ("9b", "hidden_size=96", "hidden_size=96,num_hidden_layers=x"):
        with pytest.raises(ValueError, match="'inflate'"):
            parse_shape(bad)


@pytest.mark.parametrize("model, overrides, match", [
    (tiny_model("mistral", seed=0), {}, "'model' must be a transformers LlamaForCausalLM, got MistralForCausalLM"),
    (llama(), dict(hidden_size=32), "'hidden_size' must be an int >= the model's 48"),
    (llama(), dict(num_hidden_layers=1), "'num_hidden_layers'"),
    (llama(), dict(intermediate_size=63), "'intermediate_size'"),
    (llama(), dict(num_attention_heads=2, num_key_value_heads=2), "'num_attention_heads'"),
    (llama(), dict(num_key_value_heads=1), "'num_key_value_heads' must be an int >= the model's 2"),
    (llama(), dict(head_dim=24), "'head_dim' must be the model's 12"),
    (llama(), dict(num_attention_heads=9, hidden_size=96), "'num_attention_heads' must divide hidden_size 96"),
    (llama(), dict(num_key_value_heads=3), "'num_key_value_heads' must divide num_attention_heads 8"),
    # 3 query heads per kv head in new groups of 2: each of the 2 kv heads needs 2 new ones
    (llama(heads=6, kv_heads=2), dict(num_attention_heads=6, num_key_value_heads=3, hidden_size=48),
     r"'num_key_value_heads' 3 \(groups of 2 query heads\) cannot hold the model's 2 kv heads of 3 query heads "
     "each: 4 are needed"),
    (llama(heads=6, kv_heads=2), dict(num_attention_heads=8, num_key_value_heads=4, hidden_size=48), None),
])
def test_refusals(model, overrides, match):
    keywords = {**shape(), **overrides}
    if match is None:  # the boundary case is accepted
        inflate(model, **keywords)
        return
    with pytest.raises(ValueError, match=match):
        inflate(model, **keywords)

"""A small trained Llama inflated into a larger architecture with the same logits.

The benchmark's trained pair (``scripts/train_pair.py``) is far too small for a GPU's forward pass to
dominate a decoding step. :func:`inflate` copies a ``LlamaForCausalLM`` of width d, L layers, H query
heads over K key/value heads (head dimension hd) and I MLP units into one of width D >= d, L' >= L
layers, H' >= H heads over K' key/value heads and I' >= I units, the same hd, whose extra entries
contribute exactly zero: the logits are the original's up to float rounding, and a forward pass does
the large model's matrix products. The derivation is in docs/design/inflated-target.md; in short:

- the residual stream keeps zeros in its entries d..D-1: embeddings (V, d) -> (V, D) are zero-padded,
  and every block writes to the residual only through o_proj (D, H'*hd) and down_proj (D, I'), whose
  rows d..D-1 are zero;
- RMSNorm is x * rsqrt(mean(x^2) + eps) * w. Over D entries of which D-d are zero, mean_D = (d/D)
  mean_d, so with eps' = eps*d/D, rsqrt(mean_D + eps') = sqrt(D/d) rsqrt(mean_d + eps), and the
  weights w' = w*sqrt(d/D) on the first d entries (zero after) give the original output;
- attention keeps hd (RoPE rotates each head with frequencies that depend on hd, and scores are
  scaled by hd**-0.5); original query head h moves to a slot whose key/value head holds a copy of
  head h's original one; other heads have zero q/k/v rows and zero o_proj columns;
- extra MLP units have zero gate/up rows and zero down_proj columns; extra layers (after the
  original ones) are zero throughout, so the residual passes them unchanged;
- lm_head (V, d) -> (V, D) is zero-padded (tied embeddings stay tied: the padding is the same).

``python -m multidraft.bench --generation --inflate 8b`` benchmarks the inflated target.
"""
from __future__ import annotations

import copy
import math
from typing import TYPE_CHECKING, Dict, List, Tuple

import torch

if TYPE_CHECKING:
    from transformers import LlamaForCausalLM

#: The shape of Llama 3 8B (hidden 4096, 32 layers, MLP 14336, 32 query heads over 8 kv heads).
EIGHT_B = dict(hidden_size=4096, num_hidden_layers=32, intermediate_size=14336, num_attention_heads=32,
               num_key_value_heads=8)
#: A CPU-sized target: about 10x the trained small target's compute per token (docs/benchmarks/generation.md).
MODERATE = dict(hidden_size=512, num_hidden_layers=8, intermediate_size=1376, num_attention_heads=8,
                num_key_value_heads=4)
#: Shapes by name, for ``--inflate``.
PRESETS = {"8b": EIGHT_B, "moderate": MODERATE}
SHAPE_KEYS = tuple(EIGHT_B)


def parse_shape(text: str) -> Dict[str, int]:
    """The shape keywords of :func:`inflate` from a preset name of :data:`PRESETS` or from
    ``"hidden_size=512,num_hidden_layers=8,intermediate_size=1376,num_attention_heads=8,num_key_value_heads=4"``
    (all five keys)."""
    if text.lower() in PRESETS:
        return dict(PRESETS[text.lower()])
    try:
        shape = {key.strip(): int(value) for key, value in (item.split("=") for item in text.split(","))}
    except ValueError:
        raise ValueError(f"'inflate' must be one of {sorted(PRESETS)} or {','.join(k + '=N' for k in SHAPE_KEYS)}, "
                         f"got {text!r}") from None
    if sorted(shape) != sorted(SHAPE_KEYS):
        raise ValueError(f"'inflate' must give exactly the keys {', '.join(SHAPE_KEYS)}, got {', '.join(shape)}")
    return shape


def _head_layout(H: int, K: int, H2: int, K2: int) -> Tuple[List[int], List[int]]:
    """(query slot of each original query head (H,), original kv head held by each used new kv head):
    original kv head k's H/K query heads are cut into groups of H2/K2, each group given a new kv head
    that copies k, so every moved query head still attends with its own keys and values."""
    groups, new_groups = H // K, H2 // K2
    slots, sources = [], []
    for k in range(K):
        for start in range(0, groups, new_groups):
            slots += [len(sources) * new_groups + i for i in range(min(new_groups, groups - start))]
            sources.append(k)
    return slots, sources


def _rows(heads: List[int], head_dim: int, device) -> torch.Tensor:
    """Rows (len(heads) * head_dim,) of the heads' blocks in a projection's output."""
    heads = torch.tensor(heads, device=device)
    return (heads[:, None] * head_dim + torch.arange(head_dim, device=device)).flatten()


def _check(model, shape: Dict[str, int], head_dim) -> None:
    from transformers import LlamaForCausalLM

    if not isinstance(model, LlamaForCausalLM):
        raise ValueError(f"'model' must be a transformers LlamaForCausalLM, got {type(model).__name__}")
    config = model.config
    for key, value in shape.items():
        if not isinstance(value, int) or value < getattr(config, key):
            raise ValueError(f"'{key}' must be an int >= the model's {getattr(config, key)}, got {value!r}")
    if head_dim is not None and head_dim != config.head_dim:
        raise ValueError(f"'head_dim' must be the model's {config.head_dim} (RoPE's frequencies and the score scale "
                         f"hd**-0.5 depend on it), got {head_dim!r}")
    H2, K2 = shape["num_attention_heads"], shape["num_key_value_heads"]
    if shape["hidden_size"] % H2:  # transformers' LlamaConfig requires it, even with head_dim given
        raise ValueError(f"'num_attention_heads' must divide hidden_size {shape['hidden_size']}, got {H2}")
    if H2 % K2:
        raise ValueError(f"'num_key_value_heads' must divide num_attention_heads {H2}, got {K2}")
    H, K = config.num_attention_heads, config.num_key_value_heads
    needed = K * math.ceil((H // K) / (H2 // K2))
    if needed > K2:
        raise ValueError(f"'num_key_value_heads' {K2} (groups of {H2 // K2} query heads) cannot hold the model's {K} "
                         f"kv heads of {H // K} query heads each: {needed} are needed")


@torch.no_grad()
def inflate(model, *, hidden_size: int, num_hidden_layers: int, intermediate_size: int, num_attention_heads: int,
            num_key_value_heads: int, head_dim: int | None = None, device=None, dtype=None) -> LlamaForCausalLM:
    """A ``LlamaForCausalLM`` of the given shape whose logits are ``model``'s up to float rounding.

    ``model``: a ``LlamaForCausalLM`` (width d, L layers, H heads over K kv heads of dimension hd, I
    MLP units). The result has width ``hidden_size`` D, ``num_hidden_layers`` L', ``num_attention_heads``
    H' over ``num_key_value_heads`` K' of the same hd (``head_dim``, if given, must be hd: q_proj is
    (H'*hd, D), not necessarily (D, D)), ``intermediate_size`` I'; vocabulary, RoPE, positions, tied
    embeddings, attention implementation and generation config are the model's. Every dimension must be
    at least the model's, D divisible by H', H' by K', and the kv heads must hold the original grouping
    (K * ceil((H/K) / (H'/K')) <= K'); otherwise ValueError. Built on ``device`` in ``dtype`` (default:
    the model's) without a first copy elsewhere: on the meta device, then allocated there and filled.
    How each block contributes zero: the module docstring and docs/design/inflated-target.md.
    """
    from transformers import AutoModelForCausalLM

    shape = dict(hidden_size=hidden_size, num_hidden_layers=num_hidden_layers, intermediate_size=intermediate_size,
                 num_attention_heads=num_attention_heads, num_key_value_heads=num_key_value_heads)
    _check(model, shape, head_dim)
    old = model.config
    d, D, hd = old.hidden_size, hidden_size, old.head_dim
    device = torch.device(device) if device is not None else model.device
    dtype = dtype or model.dtype
    config = type(old).from_dict({**old.to_dict(), **shape, "head_dim": hd, "rms_norm_eps": old.rms_norm_eps * d / D})
    with torch.device("meta"):  # no allocation until to_empty: the 8B shape is built on the GPU directly
        big = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation=old._attn_implementation)
    big.to_empty(device=device)
    big.tie_weights()  # to_empty allocates the tied lm_head and embeddings separately
    for name, buffer in big.named_buffers():  # RoPE's inverse frequencies: the same hd and parameters
        buffer.copy_(model.get_buffer(name))
    for parameter in big.parameters():
        parameter.zero_()

    slots, sources = _head_layout(old.num_attention_heads, old.num_key_value_heads, num_attention_heads,
                                  num_key_value_heads)
    q_new = _rows(slots, hd, device)  # the original's heads in order go to these rows of q_proj
    kv_new, kv_old = _rows(list(range(len(sources))), hd, device), _rows(sources, hd, model.device)
    scale, I = math.sqrt(d / D), old.intermediate_size

    def put(target, index, source):
        target[index] = source.to(target)

    put(big.model.embed_tokens.weight, (slice(None), slice(d)), model.model.embed_tokens.weight)
    if not config.tie_word_embeddings:
        put(big.lm_head.weight, (slice(None), slice(d)), model.lm_head.weight)
    put(big.model.norm.weight, slice(d), model.model.norm.weight.float() * scale)
    for new, layer in zip(big.model.layers, model.model.layers):
        put(new.input_layernorm.weight, slice(d), layer.input_layernorm.weight.float() * scale)
        put(new.post_attention_layernorm.weight, slice(d), layer.post_attention_layernorm.weight.float() * scale)
        attention, old_attention = new.self_attn, layer.self_attn
        put(attention.q_proj.weight, (q_new, slice(d)), old_attention.q_proj.weight)
        for name in ("k_proj", "v_proj"):
            put(getattr(attention, name).weight, (kv_new, slice(d)), getattr(old_attention, name).weight[kv_old])
        put(attention.o_proj.weight, (slice(d), q_new), old_attention.o_proj.weight)
        if config.attention_bias:
            put(attention.q_proj.bias, q_new, old_attention.q_proj.bias)
            for name in ("k_proj", "v_proj"):
                put(getattr(attention, name).bias, kv_new, getattr(old_attention, name).bias[kv_old])
            put(attention.o_proj.bias, slice(d), old_attention.o_proj.bias)
        for name in ("gate_proj", "up_proj"):
            put(getattr(new.mlp, name).weight, (slice(I), slice(d)), getattr(layer.mlp, name).weight)
        put(new.mlp.down_proj.weight, (slice(d), slice(I)), layer.mlp.down_proj.weight)
        if config.mlp_bias:
            for name in ("gate_proj", "up_proj"):
                put(getattr(new.mlp, name).bias, slice(I), getattr(layer.mlp, name).bias)
            put(new.mlp.down_proj.bias, slice(d), layer.mlp.down_proj.bias)
    big.generation_config = copy.deepcopy(model.generation_config)
    return big.train(model.training)

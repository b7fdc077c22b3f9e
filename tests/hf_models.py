"""Tiny seeded causal LMs built from configs (nothing downloaded) and the exact sequence law of a target.

Weights are drawn with a large ``initializer_range`` so that next-token distributions are far from
uniform and differ between target and draft (a near-uniform pair would make the tests blind).
Families cover the attention layouts multidraft.hf must keep exact: absolute positions (GPT-2),
rotary (Llama, GPT-NeoX), a sliding window on every layer (Mistral, window 4, shorter than the
outputs), alternating sliding and full layers with soft-capping (Gemma 2) and sliding layers
above full ones (Qwen2).
"""
import itertools

import numpy as np
import torch
from scipy import stats
from transformers import (Gemma2Config, Gemma2ForCausalLM, GPT2Config, GPT2LMHeadModel, GPTNeoXConfig,
                          GPTNeoXForCausalLM, LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM,
                          Qwen2Config, Qwen2ForCausalLM)

import multidraft as md
from multidraft import hf
from multidraft.hf import warp_probabilities

# Tiny models run fastest on one thread, and several threads crawl when the cores are shared.
torch.set_num_threads(1)

FAMILIES = ("gpt2", "llama", "mistral", "gemma2", "qwen2", "gpt_neox")
VOCAB = {"gpt2": 8, "llama": 10, "mistral": 9, "gemma2": 8, "qwen2": 9, "gpt_neox": 8}
WINDOW = 4  # sliding window of Mistral, Gemma 2 and Qwen2: shorter than the generated texts

_ROTARY = dict(hidden_size=16, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1,
               max_position_embeddings=64, initializer_range=0.5, bos_token_id=0, eos_token_id=0, pad_token_id=0)


def _config(family: str, V: int, layers: int):
    if family == "gpt2":
        return GPT2LMHeadModel, GPT2Config(vocab_size=V, n_positions=64, n_embd=16, n_layer=layers, n_head=2,
                                           initializer_range=0.5, bos_token_id=0, eos_token_id=0)
    if family == "llama":
        return LlamaForCausalLM, LlamaConfig(vocab_size=V, num_hidden_layers=layers, **_ROTARY)
    if family == "mistral":
        return MistralForCausalLM, MistralConfig(vocab_size=V, num_hidden_layers=layers, sliding_window=WINDOW,
                                                 **_ROTARY)
    if family == "gemma2":
        return Gemma2ForCausalLM, Gemma2Config(vocab_size=V, num_hidden_layers=max(layers, 2), head_dim=8,
                                               sliding_window=WINDOW, query_pre_attn_scalar=8,
                                               attn_implementation="eager", **_ROTARY)
    if family == "qwen2":
        return Qwen2ForCausalLM, Qwen2Config(vocab_size=V, num_hidden_layers=max(layers, 2), use_sliding_window=True,
                                             sliding_window=WINDOW, max_window_layers=1, **_ROTARY)
    return GPTNeoXForCausalLM, GPTNeoXConfig(vocab_size=V, hidden_size=16, intermediate_size=32,
                                             num_hidden_layers=layers, num_attention_heads=2, rotary_pct=0.5,
                                             max_position_embeddings=64, initializer_range=0.5, bos_token_id=0,
                                             eos_token_id=0, pad_token_id=0)


def tiny_model(family: str, seed: int, layers: int = 1):
    torch.manual_seed(seed)
    cls, config = _config(family, VOCAB[family], layers)
    return cls(config).eval()


def tiny_pair(family: str):
    """(target, draft): a two-layer target and a one-layer draft with other weights."""
    return tiny_model(family, seed=0, layers=2), tiny_model(family, seed=1)


def sequence_law(model, prompt, length: int, temperature=1.0, top_k=None, top_p=None):
    """Exact law of the first ``length`` sampled tokens: (sequences (V**length, length), probs)."""
    V = model.config.vocab_size
    sequences = np.array(list(itertools.product(range(V), repeat=length)), dtype=np.int64)
    ids = torch.from_numpy(np.concatenate([np.tile(prompt, (len(sequences), 1)), sequences], 1)).to(model.device)
    with torch.inference_mode():
        logits = model(input_ids=ids).logits[:, len(prompt) - 1: -1]
    steps = warp_probabilities(logits, temperature, top_k, top_p).cpu().numpy()  # (V**length, length, V)
    probs = np.prod(np.take_along_axis(steps, sequences[:, :, None], axis=2)[:, :, 0], axis=1)
    return sequences, probs


def processed_sequence_law(model, prompt, length: int, processors):
    """Exact law of the first ``length`` tokens that transformers samples under ``processors``
    (applied at every step with that step's prefix): (sequences (V**length, length), probs)."""
    V = model.config.vocab_size
    sequences = np.array(list(itertools.product(range(V), repeat=length)), dtype=np.int64)
    ids = torch.from_numpy(np.concatenate([np.tile(prompt, (len(sequences), 1)), sequences], 1)).to(model.device)
    with torch.inference_mode():
        logits = model(input_ids=ids).logits[:, len(prompt) - 1: -1].float()
    probs = np.ones(len(sequences))
    for t in range(length):
        scores = processors(ids[:, : len(prompt) + t], logits[:, t].clone())
        step = torch.softmax(scores.double(), dim=-1).cpu().numpy()
        probs *= step[np.arange(len(sequences)), sequences[:, t]]
    return sequences, probs


def assert_follows(generated, sequences, probs, V, label):
    """Seeded chi-square of the generated (N, length) tokens against the exact law ``probs`` of
    :func:`sequence_law`'s ``sequences``."""
    length = generated.shape[1]
    cells = generated @ (V ** np.arange(length - 1, -1, -1))  # the row index in `sequences`
    observed = np.bincount(cells, minlength=len(sequences)).astype(float)
    assert np.all(observed[probs == 0] == 0), f"{label}: a sequence of probability zero was generated"
    expected = probs * len(generated)
    small = expected < 5  # pool the rare sequences into one cell
    obs = np.append(observed[~small], observed[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    keep = exp > 0
    pvalue = stats.chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()).pvalue
    assert pvalue > 1e-4, f"{label}: chi-square p-value {pvalue:.2e}"


#: Prompts of different lengths, left-padded into one batch by :func:`batch_and_rows`.
BATCH_PROMPTS = ([1, 2, 3, 4, 5], [6], [2, 7, 3])


def batch_and_rows(target, draft, new_tokens: int, seed: int, **options):
    """``hf.generate`` of :data:`BATCH_PROMPTS` left-padded into one batch with ``seed``, and of each
    prompt alone with its row's seed (``md.row_seeds``): (the batch's input ids (B, width), its
    sequences, [(row b's new tokens in the batch, its new tokens alone)])."""
    width = max(map(len, BATCH_PROMPTS))
    ids = torch.tensor([[0] * (width - len(p)) + p for p in BATCH_PROMPTS])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in BATCH_PROMPTS])
    batch = hf.generate(target, draft, ids, new_tokens, attention_mask=mask, seed=seed, pad_token_id=0, **options)
    seeds = md.row_seeds(seed, len(BATCH_PROMPTS))
    rows = [(batch.sequences[b, width:].tolist(),
             hf.generate(target, draft, torch.tensor([prompt]), new_tokens, seed=int(seeds[b]),
                         **options).sequences[0, len(prompt):].tolist())
            for b, prompt in enumerate(BATCH_PROMPTS)]
    return ids, batch.sequences, rows


def word_tokenizer(V: int):
    """A whitespace word-level tokenizer of V words (for streamers and stop strings)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.WordLevel(vocab={f"w{i}": i for i in range(V)}, unk_token="w0"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.decoder = decoders.WordPiece()  # joins words with spaces
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer)

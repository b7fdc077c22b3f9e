"""Tiny Llama models for the vLLM tests, built from a config with a tokenizer made here.

vLLM loads models from a directory (config, weights, tokenizer): each builder writes one. The
target's logits are scaled up so that its laws are peaked (a random model is nearly uniform),
which keeps chi-square tests informative at a few thousand samples.
"""
from __future__ import annotations

import json
import os

VOCAB = 384  # the target's vocabulary: 4 special tokens, then words w4 ... w383
SPECIAL = ["<unk>", "<s>", "</s>", "<pad>"]


def words(size: int, keep=None):
    """Token strings by id: the special tokens, then ``w<i>`` for the target ids ``keep`` (all)."""
    kept = range(len(SPECIAL), size) if keep is None else keep
    return SPECIAL + [f"w{i}" for i in kept]


def save_tokenizer(directory: str, vocabulary) -> None:
    """A whitespace WordLevel tokenizer over ``vocabulary`` (token strings by id)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.WordLevel({token: i for i, token in enumerate(vocabulary)}, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>", bos_token="<s>",
                                   eos_token="</s>", pad_token="<pad>")
    fast.save_pretrained(directory)


#: The families served in the tests: Llama, and Mistral with a sliding window shorter than a
#: prompt and its generated tokens (the window's edge moves under the verified chains).
FAMILIES = ("llama", "mistral")
WINDOW = 4


def causal_lm(vocabulary, layers: int, seed: int, logit_scale: float, family: str = "llama"):
    """A random model of ``family`` of width 64 (2 heads of 32: vLLM's CPU attention needs a head
    size >= 32) over ``vocabulary``, its output projection scaled by ``logit_scale``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM

    torch.manual_seed(seed)
    shape = dict(vocab_size=len(vocabulary), hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                 num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256, bos_token_id=1,
                 eos_token_id=2, pad_token_id=3, tie_word_embeddings=False, torch_dtype="float32")
    if family == "mistral":
        model = MistralForCausalLM(MistralConfig(sliding_window=WINDOW, **shape))
    else:
        model = LlamaForCausalLM(LlamaConfig(**shape))
    with torch.no_grad():
        model.lm_head.weight.mul_(logit_scale)
    return model


def perturbed(model, vocabulary, rows, seed: int, noise: float):
    """A drafter like ``model``: its weights plus Gaussian noise of relative size ``noise``, over
    ``vocabulary`` whose token d is the model's token ``rows[d]`` (embedding and head rows)."""
    import torch

    torch.manual_seed(seed)
    draft = causal_lm(vocabulary, model.config.num_hidden_layers, seed, 1.0, model.config.model_type)
    index = torch.tensor(rows)
    with torch.no_grad():
        for name, weight in model.state_dict().items():
            if name in ("model.embed_tokens.weight", "lm_head.weight"):
                weight = weight[index]
            draft.state_dict()[name].copy_(weight + noise * weight.std() * torch.randn_like(weight))
    return draft


def save(model, directory: str, vocabulary) -> str:
    """``model`` and a tokenizer over ``vocabulary`` in ``directory``, as vLLM loads them."""
    os.makedirs(directory, exist_ok=True)
    model.save_pretrained(directory, safe_serialization=True)
    save_tokenizer(directory, vocabulary)
    with open(os.path.join(directory, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 3}, f)
    return directory


def build(root: str, family: str = "llama") -> dict:
    """{"target", "draft" (same vocabulary), "pruned" (a drafter of 256 of the target's tokens,
    its own ids and tokenizer)}: model directories of ``family`` under ``root``. Both drafters are
    the target with noise on its weights, so that drafts are often accepted, and often not."""
    full = words(VOCAB)
    # the pruned drafter keeps 252 of the 380 words, in another order: its ids differ from the target's
    kept = [len(SPECIAL) + (7 * i) % (VOCAB - len(SPECIAL)) for i in range(252)]
    target = causal_lm(full, 2, 0, 24.0, family)
    rows = list(range(len(SPECIAL))) + kept
    return {"target": save(target, os.path.join(root, "target"), full),
            "draft": save(perturbed(target, full, list(range(VOCAB)), 1, 0.15), os.path.join(root, "draft"), full),
            "pruned": save(perturbed(target, words(VOCAB, kept), rows, 2, 0.15), os.path.join(root, "pruned"),
                           words(VOCAB, kept))}

"""A model's KV cache for tree-shaped speculation, exact on every attention layout transformers has.

Each prompt is ONE batch row. The draft nodes of a round (a token tree, see ``_round``) are
appended to that row as slots, and a custom 4-D attention mask (which transformers passes to the
attention as it is) lets a slot see exactly its own prefix: the committed tokens of its row and
its ancestors in the tree. Every slot carries its true position id, and sliding windows are applied
by position (``pos_q - pos_kv < window``, transformers' rule), never by slot index, so slots of
other branches, left padding and rejected drafts cannot shift a window. After verification
:meth:`TreeCache.commit` keeps the accepted path and drops every other round slot by
gathering the cache, so the cache never holds more than the committed tokens (right-aligned).

The cache is a plain ``DynamicCache()`` (no config): its layers keep every slot, including in
layers whose own cache class would evict slots outside the window (the mask does that work).
Models this cannot serve exactly are refused by :func:`check_model` with a ValueError.
"""
from __future__ import annotations

import inspect
from typing import Dict, List, Optional, Union

import torch
from transformers import DynamicCache

from .._device import to_host

#: Attention layer kinds whose semantics the mask reproduces: causal, and causal within a window.
_KINDS = ("full_attention", "sliding_attention")
#: Attention implementations that add (eager) or apply (sdpa) a given float mask as it is.
_IMPLEMENTATIONS = ("eager", "sdpa")


def _attention_layout(config) -> Dict[str, Optional[int]]:
    """{layer kind: sliding window or None} of a decoder config; ValueError if not servable."""
    name = type(config).__name__
    if getattr(config, "is_encoder_decoder", False):
        raise ValueError(f"multidraft.hf serves decoder-only models; {name} is an encoder-decoder model")
    if getattr(config, "alibi", False):  # its biases follow 2-D mask slots, not position ids
        raise ValueError(f"{name} uses ALiBi position biases, which multidraft.hf cannot lay out exactly")
    if getattr(config, "attention_chunk_size", None):
        raise ValueError(f"{name} uses chunked attention, which multidraft.hf cannot lay out exactly")
    window = getattr(config, "sliding_window", None)
    kinds = getattr(config, "layer_types", None) or ["sliding_attention" if window else "full_attention"]
    unknown = sorted(set(kinds) - set(_KINDS))
    if unknown:
        raise ValueError(f"{name} has {unknown} layers (recurrent, linear or chunked attention): "
                         "multidraft.hf only serves causal attention layers with or without a sliding window")
    if "sliding_attention" in kinds and not (isinstance(window, int) and window >= 1):
        raise ValueError(f"{name} has sliding-window layers but config.sliding_window is {window!r}")
    return {kind: (window if kind == "sliding_attention" else None) for kind in set(kinds)}


def check_model(model, role: str) -> Dict[str, Optional[int]]:
    """The attention layout of ``model`` (argument ``role``); ValueError for a model whose cache
    multidraft.hf cannot keep exactly (see the module docstring)."""
    config = getattr(model, "config", None)
    if config is None or not callable(model):
        raise ValueError(f"'{role}' must be a transformers causal LM, got {type(model).__name__}")
    standard = {"past_key_values", "position_ids", "attention_mask"} <= set(inspect.signature(model.forward).parameters)
    supports = getattr(type(model), "_supports_default_dynamic_cache", None)
    if not standard or (supports is not None and not supports()):
        raise ValueError(f"'{role}' ({type(model).__name__}) has no standard key/value cache "
                         "(recurrent or custom cache): multidraft.hf cannot serve it")
    implementation = getattr(config, "_attn_implementation", None)
    if implementation not in _IMPLEMENTATIONS:
        raise ValueError(f"'{role}' uses attn_implementation={implementation!r}; multidraft.hf lays draft tokens "
                         f"out under a custom 4-D attention mask, which needs one of {_IMPLEMENTATIONS}")
    return _attention_layout(config.get_text_config(decoder=True))


def logit_width(model) -> int:
    """Number of logits the model outputs (its LM head's rows, padding rows included)."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    weight = getattr(head, "weight", None)
    return int(weight.shape[0]) if weight is not None else int(model.config.get_text_config(decoder=True).vocab_size)


class TreeCache:
    """One model's cache over B rows: per slot ``valid``, ``pos`` (position id) and ``node`` (0: a
    committed token of the row; i > 0: draft node i of the row's current round, see ``_round``)."""

    def __init__(self, model, layout: Dict[str, Optional[int]], rows: int):
        self.model, self.layout = model, layout
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype
        self.cache = DynamicCache()
        empty = torch.zeros((rows, 0), dtype=torch.long, device=self.device)
        self.valid, self.pos, self.node = empty.bool(), empty, empty
        self.keeps_logits = "logits_to_keep" in inspect.signature(model.forward).parameters
        self.positions_computed = 0  # valid query slots fed to the model (statistics)

    def forward(self, ids: torch.Tensor, valid: torch.Tensor, pos: torch.Tensor, node: torch.Tensor,
                ancestors: torch.Tensor, keep: int) -> torch.Tensor:
        """Append slots (B, Q) and return the logits (B, keep, V) of the last ``keep`` of them.
        ``ancestors`` (B, N + 1, N + 1) bool: [b, i, j] when node j is node i or an ancestor of it
        in row b's round (column 0, the committed tokens, True for every node; see ``_round``)."""
        kv_valid, kv_pos, kv_node = (torch.cat(pair, dim=1) for pair in
                                     ((self.valid, valid), (self.pos, pos), (self.node, node)))
        rows = torch.arange(ids.shape[0], device=self.device)[:, None, None]
        allowed = (kv_valid[:, None, :] & (kv_pos[:, None, :] <= pos[:, :, None])
                   & ancestors[rows, node[:, :, None], kv_node[:, None, :]])
        # a padding query sees itself only: its row stays finite and nobody reads it
        past = self.valid.shape[1]
        allowed[:, torch.arange(ids.shape[1]), past + torch.arange(ids.shape[1])] |= ~valid
        masks = {kind: self._additive(allowed, pos, kv_pos, window) for kind, window in self.layout.items()}
        mask: Union[torch.Tensor, Dict[str, torch.Tensor]] = next(iter(masks.values())) if len(masks) == 1 else masks
        extra = {"logits_to_keep": keep} if self.keeps_logits else {}
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=self.cache,
                         use_cache=True, **extra)
        self.cache = out.past_key_values
        self.valid, self.pos, self.node = kv_valid, kv_pos, kv_node
        self.positions_computed += int(to_host(valid.sum()))
        return out.logits[:, -keep:]

    def _additive(self, allowed, pos, kv_pos, window: Optional[int]) -> torch.Tensor:
        if window is not None:
            allowed = allowed & (pos[:, :, None] - kv_pos[:, None, :] < window)
        zeros = torch.zeros(allowed.shape, dtype=self.dtype, device=self.device)
        return zeros.masked_fill(~allowed, torch.finfo(self.dtype).min)[:, None]

    def committed(self) -> torch.Tensor:
        """(B,) committed tokens each row holds (they have positions 0 .. count - 1)."""
        return (self.valid & (self.node == 0)).sum(1)

    def commit(self, kept: List[List[int]], alive: List[bool]) -> None:
        """Keep, per row, the committed slots and the round's nodes ``kept[b]`` (all committed
        from now on); rows not ``alive`` keep nothing. The kept slots are gathered right-aligned,
        so the cache is as long as the longest row."""
        width = 1 + max([int(to_host(self.node.max())) if self.node.numel() else 0] + [max(k, default=0) for k in kept])
        member = torch.zeros((len(kept), width), dtype=torch.bool)
        member[:, 0] = True
        for b, nodes in enumerate(kept):
            member[b, nodes] = True
        member &= torch.tensor(alive)[:, None]
        member = member.to(self.device)
        keep = self.valid & member.gather(1, self.node)
        width = int(to_host(keep.sum(1).max())) if keep.numel() else 0
        index = torch.argsort(keep.to(torch.int8), dim=1, stable=True)[:, keep.shape[1] - width:]
        for layer in self.cache.layers:
            gather = index[:, None, :, None].expand(-1, layer.keys.shape[1], -1, layer.keys.shape[-1])
            layer.keys, layer.values = layer.keys.gather(2, gather), layer.values.gather(2, gather)
        self.valid, self.pos = keep.gather(1, index), self.pos.gather(1, index)
        self.node = torch.zeros_like(self.pos)

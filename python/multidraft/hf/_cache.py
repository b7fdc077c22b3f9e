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

The bookkeeping lives on the host: each slot's validity, position and node are NumPy mirrors
that the loop fills itself, and the masks are built from them with NumPy, because every read of a
device value would be a synchronisation with the device. A forward pass copies its inputs and
masks to the device in one copy; a commit copies at most its gather index.
"""
from __future__ import annotations

import inspect
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from transformers import DynamicCache

#: Attention layer kinds whose semantics the mask reproduces: causal, and causal within a window.
_KINDS = ("full_attention", "sliding_attention")
#: Attention implementations that add (eager) or apply (sdpa) a given float mask as it is.
_IMPLEMENTATIONS = ("eager", "sdpa")
#: The names a model's key/value cache goes by, as argument and output: transformers 5.24 renamed
#: ``past_key_values`` (still taken, with a deprecation warning) to ``cache``.
CACHE_KEYWORDS = ("cache", "past_key_values")


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
    parameters = set(inspect.signature(model.forward).parameters)
    standard = {"position_ids", "attention_mask"} <= parameters and bool(parameters.intersection(CACHE_KEYWORDS))
    supports = getattr(type(model), "_supports_default_dynamic_cache", None)
    if not standard or (supports is not None and not supports()):
        raise ValueError(f"'{role}' ({type(model).__name__}) has no standard key/value cache "
                         "(recurrent or custom cache): multidraft.hf cannot serve it")
    implementation = getattr(config, "_attn_implementation", None)
    if implementation not in _IMPLEMENTATIONS:
        raise ValueError(f"'{role}' uses attn_implementation={implementation!r}; multidraft.hf lays draft tokens "
                         f"out under a custom 4-D attention mask, which needs one of {_IMPLEMENTATIONS}")
    return _attention_layout(config.get_text_config(decoder=True))


def cache_keyword(model) -> str:
    """The name of :data:`CACHE_KEYWORDS` that ``model.forward`` takes its key/value cache by."""
    new, old = CACHE_KEYWORDS
    return new if new in inspect.signature(model.forward).parameters else old


def returned_cache(output):
    """The key/value cache a forward returned, under either name of :data:`CACHE_KEYWORDS`."""
    new, old = CACHE_KEYWORDS
    return output[new] if new in output else output[old]


def logit_width(model) -> int:
    """Number of logits the model outputs (its LM head's rows, padding rows included)."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    weight = getattr(head, "weight", None)
    return int(weight.shape[0]) if weight is not None else int(model.config.get_text_config(decoder=True).vocab_size)


#: Byte alignment of each array in an upload's buffer: a multiple of every element size, and of
#: the 16 bytes that fused attention kernels want a mask to start on.
_ALIGN = 64


def _mask_values(dtype: torch.dtype) -> Tuple[np.dtype, np.generic]:
    """(host type whose items have the bits of ``dtype``'s, the blocked value finfo(dtype).min in
    it); the allowed value 0 has all bits 0 in every float type."""
    low = torch.finfo(dtype).min
    if dtype == torch.bfloat16:  # NumPy has no bfloat16: its bits are the high half of a float32's
        return np.dtype(np.int16), np.int16(np.array(low, dtype=np.float32).view(np.int32) >> 16)
    host = {torch.float16: np.float16, torch.float32: np.float32, torch.float64: np.float64}.get(dtype)
    if host is None:
        raise ValueError(f"multidraft.hf cannot lay out an attention mask for a model in {dtype}")
    return np.dtype(host), host(low)


def _allowed(valid: np.ndarray, pos: np.ndarray, node: np.ndarray, kv_valid: np.ndarray, kv_pos: np.ndarray,
             kv_node: np.ndarray, ancestors: np.ndarray, past: int) -> np.ndarray:
    """(B, Q, KV) bool: which of the cache's KV = ``past`` + Q slots (``kv_*``, (B, KV)) each new
    query slot (B, Q) sees: valid slots at or before its position among its ancestors in its
    row's round (``ancestors`` (B, N + 1, N + 1), see :meth:`TreeCache.forward`). A padding query
    sees itself only: its row stays finite and nobody reads it."""
    B, Q = valid.shape
    rows = np.arange(B)[:, None, None]
    allowed = (kv_valid[:, None, :] & (kv_pos[:, None, :] <= pos[:, :, None])
               & ancestors[rows, node[:, :, None], kv_node[:, None, :]])
    allowed[:, np.arange(Q), past + np.arange(Q)] |= ~valid
    return allowed


def _upload(arrays: Sequence[Tuple[np.ndarray, torch.dtype]], device) -> List[torch.Tensor]:
    """The host ``arrays`` as tensors on ``device`` in ONE copy: their bytes packed into one buffer
    (each from a multiple of ``_ALIGN``), copied without waiting for the device (the source is
    read before the call returns), and split by views, each as its given dtype (of the array's
    item size, e.g. int16 bits as bfloat16)."""
    arrays = [(np.ascontiguousarray(array), dtype) for array, dtype in arrays]
    starts = np.cumsum([0] + [-(-array.nbytes // _ALIGN) * _ALIGN for array, _ in arrays])
    buffer = np.empty(int(starts[-1]), dtype=np.uint8)
    for (array, _), start in zip(arrays, starts):
        buffer[start:start + array.nbytes] = array.reshape(-1).view(np.uint8)
    on_device = torch.from_numpy(buffer).to(device, non_blocking=True)
    return [on_device[start:start + array.nbytes].view(dtype).view(array.shape)
            for (array, dtype), start in zip(arrays, starts)]


class TreeCache:
    """One model's cache over B rows: per slot ``valid``, ``pos`` (position id) and ``node`` (0: a
    committed token of the row; i > 0: draft node i of the row's current round, see ``_round``),
    each a host array (B, S) in step with the device cache's S slots."""

    def __init__(self, model, layout: Dict[str, Optional[int]], rows: int):
        self.model, self.layout = model, layout
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype
        self.mask_bits, self.blocked = _mask_values(self.dtype)
        self.cache = DynamicCache()
        self.valid = np.zeros((rows, 0), dtype=bool)
        self.pos = np.zeros((rows, 0), dtype=np.int64)
        self.node = np.zeros((rows, 0), dtype=np.int64)
        self.keeps_logits = "logits_to_keep" in inspect.signature(model.forward).parameters
        self.cache_keyword = cache_keyword(model)
        self.positions_computed = 0  # valid query slots fed to the model (statistics)

    def forward(self, ids: np.ndarray, valid: np.ndarray, pos: np.ndarray, node: np.ndarray,
                ancestors: np.ndarray, keep: int) -> torch.Tensor:
        """Append slots (B, Q) (host arrays: int64 ids, bool valid, int64 position ids and node ids)
        and return the logits (B, keep, V) of the last ``keep`` of them, on the model's device.
        ``ancestors`` (B, N + 1, N + 1) bool: [b, i, j] when node j is node i or an ancestor of it
        in row b's round (column 0, the committed tokens, True for every node; see ``_round``).
        The inputs and masks reach the device in one copy."""
        kv_valid, kv_pos, kv_node = (np.concatenate(pair, axis=1) for pair in
                                     ((self.valid, valid), (self.pos, pos), (self.node, node)))
        allowed = _allowed(valid, pos, node, kv_valid, kv_pos, kv_node, ancestors, past=self.valid.shape[1])
        kinds = list(self.layout.items())
        masks = np.stack([self._additive(allowed, pos, kv_pos, window) for _, window in kinds])
        inputs, masks = _upload([(np.stack((ids, pos)), torch.long), (masks, self.dtype)], self.device)
        mask: Union[torch.Tensor, Dict[str, torch.Tensor]] = \
            masks[0] if len(kinds) == 1 else {kind: masks[i] for i, (kind, _) in enumerate(kinds)}
        extra = {"logits_to_keep": keep} if self.keeps_logits else {}
        out = self.model(input_ids=inputs[0], attention_mask=mask, position_ids=inputs[1], use_cache=True,
                         **{self.cache_keyword: self.cache}, **extra)
        self.cache = returned_cache(out)
        self.valid, self.pos, self.node = kv_valid, kv_pos, kv_node
        self.positions_computed += int(valid.sum())
        return out.logits[:, -keep:]

    def _additive(self, allowed: np.ndarray, pos: np.ndarray, kv_pos: np.ndarray,
                  window: Optional[int]) -> np.ndarray:
        """(B, 1, Q, KV): the additive mask of one layer kind, as the bits of the model's dtype
        (0 where allowed, its finfo.min elsewhere); ``window``: the kind's sliding window."""
        if window is not None:
            allowed = allowed & (pos[:, :, None] - kv_pos[:, None, :] < window)
        zero = self.mask_bits.type(0)
        return np.where(allowed, zero, self.blocked).astype(self.mask_bits, copy=False)[:, None]

    def committed(self) -> np.ndarray:
        """(B,) committed tokens each row holds (they have positions 0 .. count - 1)."""
        return (self.valid & (self.node == 0)).sum(1)

    def commit(self, kept: List[List[int]], alive: List[bool]) -> None:
        """Keep, per row, the committed slots and the round's nodes ``kept[b]`` (all committed
        from now on); rows not ``alive`` keep nothing. The kept slots are gathered right-aligned,
        so the cache is as long as the longest row."""
        B, S = self.valid.shape
        width = 1 + max([int(self.node.max()) if self.node.size else 0] + [max(k, default=0) for k in kept])
        member = np.zeros((B, width), dtype=bool)
        member[:, 0] = True
        for b, nodes in enumerate(kept):
            member[b, nodes] = True
        member &= np.asarray(alive, dtype=bool)[:, None]
        keep = self.valid & np.take_along_axis(member, self.node, axis=1)
        width = int(keep.sum(1).max(initial=0))
        index = np.argsort(keep.astype(np.int8), axis=1, kind="stable")[:, S - width:]
        self._gather(index, S)
        self.valid, self.pos = np.take_along_axis(keep, index, axis=1), np.take_along_axis(self.pos, index, axis=1)
        self.node = np.zeros_like(self.pos)

    def _gather(self, index: np.ndarray, slots: int) -> None:
        """Keep the slots ``index`` (B, W) (host) of the cache's ``slots`` in every layer's keys and
        values: a slice when every row keeps the same run of slots (a view, no copy), else one copy
        of the index to the device and one gather per tensor."""
        B, W = index.shape
        start = int(index[0, 0]) if W else 0
        if np.array_equal(index, np.broadcast_to(start + np.arange(W), (B, W))):
            if start == 0 and W == slots:
                return  # every slot kept
            for layer in self.cache.layers:
                layer.keys, layer.values = layer.keys[:, :, start:start + W], layer.values[:, :, start:start + W]
            return
        (index,) = _upload([(index, torch.long)], self.device)
        for layer in self.cache.layers:
            gather = index[:, None, :, None].expand(-1, layer.keys.shape[1], -1, layer.keys.shape[-1])
            layer.keys, layer.values = layer.keys.gather(2, gather), layer.values.gather(2, gather)

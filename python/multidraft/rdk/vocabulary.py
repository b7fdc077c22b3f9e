"""Vocabulary maps between a drafter's and the target's token ids: FR pruning, TLI ([OOV] Eq. 1,
Algorithm 3)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .. import _device
from .. import _validation as check
from . import _on_device
from ._common import _ids, _rdk, _rows, _unbatch, load_arrays, no_shared_mass, save_arrays


@_device.tensor_route()
def frequency_ranked(token_counts, size: int) -> np.ndarray:
    """The ``size`` most frequent token ids (size,) int64, most frequent first (Algorithm 3).

    ``token_counts`` (V,): occurrences of each token id in a corpus (non-negative integers).
    Ties are broken by ascending token id, so the result is deterministic.
    """
    counts = check.as_array(token_counts, "token_counts")[0]
    if counts.ndim != 1 or counts.size == 0 or not np.issubdtype(counts.dtype, np.integer):
        raise ValueError(f"'token_counts' must be a non-empty 1-D integer array, got shape {counts.shape}, "
                         f"dtype {counts.dtype}")
    if np.any(counts < 0):
        raise ValueError(f"'token_counts' has a negative count at index {int(np.flatnonzero(counts < 0)[0])}")
    size = check.count(size, "size")
    if size > counts.shape[0]:
        raise ValueError(f"'size' = {size} exceeds the vocabulary size {counts.shape[0]}")
    return _rdk.frequency_ranked(np.ascontiguousarray(counts, dtype=np.int64), size)


class VocabularyMap:
    """A partial, injective map from drafter token ids to target token ids.

    ``draft_to_target`` (Vd,) int64: the target id of each drafter token, -1 for drafter tokens
    the target lacks (the set F). ``target_size``: ``|T|``. The shared set I is the image of the map;
    it is defined by vocabulary membership, not by positive probability (as in [OOV] Section 2).
    """

    def __init__(self, draft_to_target, target_size: int):
        self.target_size = check.count(target_size, "target_size")
        self.draft_to_target = _ids(draft_to_target, "draft_to_target", self.target_size, allow_missing=True)
        if self.draft_to_target.size == 0:
            raise ValueError("'draft_to_target' is empty")
        image = self.draft_to_target[self.draft_to_target >= 0]
        if image.size == 0:
            raise ValueError("the drafter and target vocabularies share no token (I is empty): TLI and RDK "
                             "are undefined ([OOV] assumes I non-empty)")
        unique, counts = np.unique(image, return_counts=True)
        if np.any(counts > 1):
            raise ValueError(f"'draft_to_target' is not injective: target id {int(unique[counts > 1][0])} "
                             "has several drafter tokens")
        self.draft_to_target.setflags(write=False)
        self._index = _device.PerDevice(self._index_tensors)

    @classmethod
    def pruned(cls, kept, vocab_size: int) -> "VocabularyMap":
        """The pruned regime (D subset of T, same tokenizer): drafter id = target id on ``kept``."""
        vocab_size = check.count(vocab_size, "vocab_size")
        kept = _ids(kept, "kept", vocab_size)
        mapping = np.full(vocab_size, -1, dtype=np.int64)
        mapping[kept] = kept
        return cls(mapping, vocab_size)

    @classmethod
    def frequency_ranked(cls, token_counts, size: int) -> "VocabularyMap":
        """FR pruning (Algorithm 3): keep the ``size`` most frequent tokens of ``token_counts``."""
        kept = frequency_ranked(token_counts, size)
        return cls.pruned(kept, len(token_counts))

    @classmethod
    def intersection(cls, draft_vocabulary: Sequence[str], target_vocabulary: Sequence[str]) -> "VocabularyMap":
        """The heterogeneous regime: drafter token d maps to the target token with the same string.

        Both arguments list token strings by id; each vocabulary must hold distinct strings.
        """
        for name, vocabulary in (("draft_vocabulary", draft_vocabulary), ("target_vocabulary", target_vocabulary)):
            if len(set(vocabulary)) != len(vocabulary):
                raise ValueError(f"'{name}' has repeated token strings")
        target_id = {token: t for t, token in enumerate(target_vocabulary)}
        return cls(np.array([target_id.get(token, -1) for token in draft_vocabulary], dtype=np.int64),
                   len(target_vocabulary))

    def save(self, path) -> None:
        """Write the map to the .npz file ``path`` (for :meth:`load`, e.g. in another process)."""
        save_arrays(path, "VocabularyMap", draft_to_target=self.draft_to_target,
                    target_size=np.array(self.target_size))

    @classmethod
    def load(cls, path) -> "VocabularyMap":
        """A map written by :meth:`save`, checked as the constructor checks it."""
        arrays = load_arrays(path, "VocabularyMap", ("draft_to_target", "target_size"))
        return cls(arrays["draft_to_target"], int(arrays["target_size"]))

    @property
    def draft_size(self) -> int:
        return int(self.draft_to_target.shape[0])

    @property
    def shared(self) -> np.ndarray:
        """I: target ids the drafter can emit, ascending."""
        return np.sort(self.draft_to_target[self.draft_to_target >= 0])

    @property
    def target_only(self) -> np.ndarray:
        """T \\ I: target ids the drafter cannot emit (RDK's "virtually restored" tokens)."""
        return np.setdiff1d(np.arange(self.target_size), self.shared)

    @property
    def unmapped(self) -> np.ndarray:
        """Drafter ids without a target image, whose mass TLI drops: F = D \\ I in the heterogeneous
        regime; in the pruned regime (a map over the unpruned drafter's ids) the pruned tokens."""
        return np.flatnonzero(self.draft_to_target < 0)

    def __repr__(self) -> str:
        return f"VocabularyMap(draft_size={self.draft_size}, target_size={self.target_size}, shared={self.shared.size})"

    def _index_on(self, device):
        """(drafter columns, their target ids) of the mapped tokens as int64 tensors on ``device``,
        copied there on first use."""
        return self._index.on(device)

    def _index_tensors(self, device):
        import torch

        columns = np.flatnonzero(self.draft_to_target >= 0)
        return torch.from_numpy(columns).to(device), torch.from_numpy(self.draft_to_target[columns]).to(device)

    def _check_width(self, width: int) -> None:
        """Refuse a drafter law ``q`` whose last axis is not the map's drafter vocabulary."""
        if width != self.draft_size:
            raise ValueError(f"'q' has vocabulary size {width}, but the map's drafter vocabulary has {self.draft_size}")

    def _project(self, q, renormalise: bool):
        """(q on I as target-width rows, q(I) per row, batched); with ``renormalise``, TLI, refused
        where q(I) = 0. A tensor off the CPU is projected on its device."""
        if _device.on_device(q):
            return _on_device.project(self, q, renormalise)
        rows, batched = _rows(q, "q")
        self._check_width(rows.shape[1])
        out, mass = _rdk.project(rows, self.draft_to_target, self.target_size, renormalise)
        if renormalise and np.any(mass <= 0):
            raise no_shared_mass(int(np.flatnonzero(mass <= 0)[0]))
        return out, mass, batched

    @_device.tensor_route()
    def shared_mass(self, q):
        """q(I): the drafter's mass on shared tokens, float or (B,) (a tensor for a tensor ``q``)."""
        _, mass, batched = self._project(q, False)
        return _unbatch(mass, batched)

    @_device.tensor_route()
    def tli(self, q) -> np.ndarray:
        """TLI, Eq. (1): q' (target_size,) or (B, target_size), q on I renormalised.

        A torch tensor gives a float64 tensor on its device, computed there. Raises ValueError for
        a row with q(I) = 0: TLI is undefined there; the caller should draft nothing at that
        position and let the target sample.
        """
        out, _, batched = self._project(q, True)
        return _unbatch(out, batched)

    @_device.tensor_route()
    def masked(self, q) -> np.ndarray:
        """The masked baseline: q on I, zero elsewhere, **not** renormalised (sums to q(I) <= 1)."""
        out, _, batched = self._project(q, False)
        return _unbatch(out, batched)

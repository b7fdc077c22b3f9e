"""Out-of-vocabulary drafters in the generation loop ([OOV]): a draft whose LM head covers only
part of the target vocabulary (frequency-ranked pruning), its logits mapped onto the target ids.

A :class:`multidraft.rdk.VocabularyMap` says which target id each draft logit column stands for.
The draft logits are scattered into a target-width row (-inf where the draft has no column), and
the sampling law (temperature / top-k / top-p or the logits processors) is applied to that row:
for a plain softmax this is TLI ([OOV] Eq. 1), q restricted to the shared set I and renormalised.
With an :class:`multidraft.rdk.AffinityMatrix` M the proposal is RDK's p' = M^T q' (Algorithm 1),
which also puts mass on target tokens the draft head lacks. Drafts are drawn from p' and the
verifier is given p' as the draft law: speculative sampling is lossless for ANY draft law the
verifier knows exactly, so the output law stays the target's whatever the map or M.

The draft model reads target ids (its input embeddings keep the whole vocabulary, as after
frequency-ranked pruning of the head only); a draft model that reads another tokenizer's ids is
not served (see docs/model-generate.md for why heterogeneous tokenizers are left out).
"""
from __future__ import annotations

import copy
from typing import Optional, Tuple

import numpy as np
import torch

from ..rdk import AffinityMatrix, VocabularyMap, frequency_ranked
from ._cache import logit_width


class DraftVocabulary:
    """The map from draft logits to a proposal over the target vocabulary (module docstring)."""

    def __init__(self, vocabulary_map: Optional[VocabularyMap], affinity: Optional[AffinityMatrix]):
        if vocabulary_map is not None and not isinstance(vocabulary_map, VocabularyMap):
            raise ValueError(f"'vocabulary_map' must be a multidraft.rdk.VocabularyMap, got "
                             f"{type(vocabulary_map).__name__}")
        if affinity is not None and not isinstance(affinity, AffinityMatrix):
            raise ValueError(f"'affinity' must be a multidraft.rdk.AffinityMatrix, got {type(affinity).__name__}")
        if affinity is not None and vocabulary_map is None:
            raise ValueError("'affinity' needs a 'vocabulary_map' (RDK redistributes an out-of-vocabulary "
                             "drafter's law; a draft sharing the target vocabulary needs none)")
        self.map, self.affinity = vocabulary_map, affinity

    def target_width(self, target, draft) -> int:
        """The target's logit width V, after checking that the draft fits it (ValueError if not)."""
        V, width = logit_width(target), logit_width(draft)
        if self.map is None:  # same tokenizer: widths may differ by padding rows only
            if abs(V - width) > 0.01 * max(V, width):
                raise ValueError(f"target and draft vocabularies differ: {V} vs {width} logits; they must share one "
                                 "tokenizer (widths may differ by padding rows only), or pass a 'vocabulary_map' "
                                 "(multidraft.rdk.VocabularyMap) for a pruned draft head")
            return V
        if self.map.target_size != V:
            raise ValueError(f"'vocabulary_map' maps to {self.map.target_size} target ids, the target has {V} logits")
        if self.map.draft_size != width:
            raise ValueError(f"'vocabulary_map' maps {self.map.draft_size} draft columns, the draft has {width} logits")
        if self.affinity is not None and self.affinity.V != V:
            raise ValueError(f"'affinity' is {self.affinity.V} x {self.affinity.V}, the target has {V} logits")
        embeddings = draft.get_input_embeddings().weight.shape[0]
        if embeddings < V:
            raise ValueError(f"the draft model reads {embeddings} token ids, but every one of the target's {V} ids "
                             "may be fed to it: keep its input embeddings whole (prune the LM head only)")
        return V

    def logits(self, logits: torch.Tensor, V: int) -> torch.Tensor:
        """Draft logits (N, width) as target-width logits (N, V): scattered by the map (-inf where
        the draft has no column), else cut or padded with -inf."""
        if self.map is None:
            if logits.shape[-1] >= V:
                return logits[..., :V]
            return torch.nn.functional.pad(logits, (0, V - logits.shape[-1]), value=float("-inf"))
        out = torch.full((*logits.shape[:-1], V), float("-inf"), dtype=logits.dtype, device=logits.device)
        columns, targets = self.map._index_on(logits.device)
        out[..., targets] = logits[..., columns]
        return out

    @property
    def proposal_is_identity(self) -> bool:
        """Whether :meth:`proposal` returns its law as given (TLI, or no map): such a law may stay
        unnormalised when the top-k cut renormalises it anyway; RDK's product takes normalised laws."""
        return self.affinity is None

    def proposal(self, q_prime: torch.Tensor) -> torch.Tensor:
        """p' = M^T q' (RDK), or q' itself (TLI) without an affinity matrix: laws (N, V) on the models' device."""
        return q_prime if self.affinity is None else self.affinity.proposal(q_prime)


def prune_draft_head(model, token_counts, keep: int) -> Tuple[torch.nn.Module, VocabularyMap]:
    """A copy of ``model`` whose LM head keeps only the ``keep`` most frequent tokens of
    ``token_counts`` (frequency-ranked pruning, [OOV] Algorithm 3), and the
    :class:`~multidraft.rdk.VocabularyMap` of its logit columns (most frequent first) to the
    model's own ids. The input embeddings stay whole (the copy still reads every id) and a tied
    head is untied. Pass both to :func:`multidraft.hf.generate` as ``draft, vocabulary_map=``.
    """
    head = model.get_output_embeddings()
    if head is None or getattr(head, "weight", None) is None:
        raise ValueError(f"'model' ({type(model).__name__}) has no LM head to prune")
    V = int(head.weight.shape[0])
    counts = np.asarray(token_counts)
    if counts.shape != (V,):
        raise ValueError(f"'token_counts' must have one count per LM head row ({V},), got shape {counts.shape}")
    kept = frequency_ranked(counts, keep)
    pruned = copy.deepcopy(model)
    index = torch.as_tensor(kept, device=head.weight.device)
    new_head = torch.nn.Linear(head.weight.shape[1], len(kept), bias=getattr(head, "bias", None) is not None,
                               device=head.weight.device, dtype=head.weight.dtype)
    with torch.no_grad():
        new_head.weight.copy_(head.weight[index])
        if new_head.bias is not None:
            new_head.bias.copy_(head.bias[index])
    pruned.set_output_embeddings(new_head)
    pruned.config.tie_word_embeddings = False  # never re-tie the pruned head to the whole embedding table
    return pruned.eval(), VocabularyMap(kept, V)

"""One call's setup: the caller's arguments checked and gathered in :class:`Setup`, the record
the loop (``_loop``) reads; :func:`multidraft.hf.generate` and :func:`multidraft.hf.decode` build it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple, Union

import numpy as np
import torch

from .. import _validation as check
from ..verifiers import Verifier, verifier as make_verifier
from ._laws import Law
from ._oov import DraftVocabulary

# The default verifier and the options of verifiers given by name (documented where the package
# exports them, multidraft.hf.DEFAULT_VERIFIER and multidraft.hf.NAMED_OPTIONS).
DEFAULT_VERIFIER = "otlp"
NAMED_OPTIONS: Dict[str, Dict[str, object]] = {"global_resolution": {"fallback": True}}


def resolve_verifier(verifier: Union[str, Verifier], n: int) -> Verifier:
    """The verifier a call names (by name with :data:`NAMED_OPTIONS`, or given), refused when the loop
    cannot run it with ``n`` drafts from one draft model."""
    v = make_verifier(verifier, **NAMED_OPTIONS.get(verifier, {})) if isinstance(verifier, str) else verifier
    if not isinstance(v, Verifier):
        raise ValueError(f"'verifier' must be a name of multidraft.verifier_names() or a Verifier, got {verifier!r}")
    if v.scheme_kind == "independent":
        raise ValueError(f"verifier {v!r} needs one draft model per draft ('independent' scheme); "
                         "multidraft.hf drafts all sequences from one draft model")
    if v.fixed_n is not None and n != v.fixed_n:
        raise ValueError(f"verifier {v.name!r} takes exactly {v.fixed_n} draft(s): 'num_drafts' must be "
                         f"{v.fixed_n}, got {n}")
    return v


def row_generators(seed, rows: int) -> List[np.random.Generator]:
    """One generator per prompt: ``md.row_seeds(seed, rows)`` (an int seed alone seeds a single
    prompt directly), so row b of a batch equals a one-prompt call with ``seed=row_seeds[b]``."""
    return [np.random.default_rng(int(s)) for s in check.row_seeds(seed, rows)]


def read_prompts(input_ids, attention_mask) -> Tuple[torch.Tensor, List[List[int]]]:
    """(input_ids as (B, T) int64 on the CPU, the real tokens of each row)."""
    ids = torch.as_tensor(input_ids)
    if ids.ndim == 1:
        ids = ids[None]
    if ids.ndim != 2 or ids.shape[0] == 0 or ids.dtype.is_floating_point:
        raise ValueError(f"'input_ids' must be a (B, T) integer tensor, got shape {tuple(ids.shape)} {ids.dtype}")
    ids = ids.to(torch.long).cpu()
    mask = torch.ones_like(ids) if attention_mask is None else torch.as_tensor(attention_mask).reshape(ids.shape[0], -1)
    if mask.shape != ids.shape:
        raise ValueError(f"'attention_mask' must have the shape of 'input_ids' {tuple(ids.shape)}, got {tuple(mask.shape)}")
    prompts = [ids[b][mask[b].cpu() != 0].tolist() for b in range(ids.shape[0])]
    if any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token (a row of 'attention_mask' is all zeros)")
    return ids, prompts


def token_ids(ids, name: str) -> List[int]:
    """An id or a sequence of ids (``eos_token_id``) as a list of non-negative ints."""
    values = [ids] if isinstance(ids, (int, np.integer)) else list(ids)
    for i in values:
        check.count(i, name, minimum=0)
    return [int(i) for i in values]


@dataclass
class Setup:
    """Everything one call of the loop needs (built by :func:`generate` or :func:`decode`, always
    with keywords: the fields are many and several share a type)."""

    target: object
    draft: object
    ids: torch.Tensor                  # (B, T) as given, padding included: the rows processors see
    prompts: List[List[int]]           # real tokens of each row (what the models are fed)
    law: Law
    stopping: Callable                 # StoppingCriteriaList: (input_ids, scores) -> (rows,) bool
    n: int
    L: int
    verifier: Verifier
    draft_top_k: Optional[int]
    seed: object
    pad_token_id: int
    max_length: Optional[int] = None   # rows end there: later draft positions would be wasted
    streamer: object = None
    kv_cache: bool = True
    vocabulary: DraftVocabulary = DraftVocabulary(None, None)  # draft logits -> proposal over target ids

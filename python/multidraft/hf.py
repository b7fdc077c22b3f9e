"""Multi-draft speculative sampling inside a Hugging Face ``transformers`` generation loop.

:func:`generate` plugs any verifier of the registry (:func:`multidraft.verifier_names`) into a
multi-step, multi-draft loop as in SpecTr (n draft sequences, verified token by token) for a
target ``p`` and a draft ``q`` that are ``AutoModelForCausalLM``-like models sharing one vocabulary:

1. Draft: ``n`` draft sequences of ``L`` tokens, run as ONE batch of ``B * n`` rows with the draft
   model's KV cache (one forward on the tokens not cached yet, then ``L - 1`` one-token steps). At every position
   the draft sequences are grouped by identical prefix and each group's next tokens are drawn
   jointly by the verifier's own scheme, ``v.draft(q(. | prefix), group_size, rng)`` (for i.i.d.
   schemes this is independent sampling; ``"rrs_without_replacement"`` gives distinct tokens).
2. Target: ONE forward pass over the ``B * n`` rows ``context + draft`` gives ``p(. | prefix)`` at
   the ``L + 1`` positions.
3. Verify position by position among the drafts still alive (those whose prefix equals the tokens
   accepted so far). The alive drafts form exactly one group, so their tokens are a sample of the
   verifier's scheme given the accepted prefix, and the verifier's output is distributed as
   ``p(. | prefix)``: the loop is lossless whatever the verifier. A rejection ends the round with
   the verifier's (corrected) token; when all ``L`` positions are accepted a bonus token is drawn
   from ``p(. | prefix + L tokens)``.

Caches (``kv_cache=True``, the default): both models keep their KV caches across rounds. Rows of a
batch advance by different numbers of tokens, so nothing is cropped: after a round each prompt keeps
the cache row of a surviving draft sequence, and the slots of its rejected draft tokens become holes
hidden by the attention mask (position ids count only valid slots). ``kv_cache=False`` re-encodes
every context each round instead (same output law, more target work on long outputs).

Degraded cases (documented, still lossless): a group of one draft with a verifier that takes a
fixed ``n`` (``"spechub"``: 2) is verified by ``"sps"``; a group whose draft distribution has fewer
tokens than drafts under a without-replacement scheme draws only that many distinct tokens (the
group's other drafts repeat them); a one-token draft distribution (e.g. temperature 0) is verified
by ``"sps"`` with that token.

Temperature, top-k and top-p are applied by ONE function, :func:`warp_probabilities`, to the draft
logits the drafts are sampled from and to the target logits the verifier sees.
"""
from __future__ import annotations

import numbers
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from . import _core
from . import _validation as check
from .logits import softmax
from .verifiers import Verifier, verifier as make_verifier

#: The default verifier: the exact optimal one (OTLP plan, acceptance alpha*; see NAMED_OPTIONS).
DEFAULT_VERIFIER = "otlp"

#: Options used when a verifier is given by name: the exact OTLP through the complementary-slackness
#: max-flow (same optimum, much faster at large V), Global Resolution with its exact fallback.
NAMED_OPTIONS: Dict[str, Dict[str, object]] = {"otlp": {"method": "maxflow_cs"},
                                               "global_resolution": {"fallback": True}}

#: Verifier used for groups that the chosen verifier cannot take (see the module docstring).
_SINGLE = make_verifier("sps")


def warp_probabilities(logits, temperature: float = 1.0, top_k: Optional[int] = None,
                       top_p: Optional[float] = None) -> np.ndarray:
    """Sampling distributions from logits: temperature, then top-k, then top-p (float64).

    ``logits`` (..., V) float array (NumPy or torch). ``temperature == 0`` gives the one-hot
    distribution of the argmax (first index on ties), i.e. greedy decoding. ``top_k`` keeps the k
    largest logits (ties at the k-th value kept); ``top_p`` keeps the smallest set of most probable
    tokens whose mass reaches ``top_p`` (the token that crosses it included). Rows sum to 1.
    """
    temperature, top_k, top_p = _sampling_options(temperature, top_k, top_p)
    if isinstance(logits, torch.Tensor):
        logits = logits.detach().to(torch.float64).cpu().numpy()
    x = np.array(logits, dtype=np.float64)
    if x.ndim == 0 or x.shape[-1] == 0:
        raise ValueError(f"'logits' must have a non-empty last (vocabulary) axis, got shape {x.shape}")
    if np.any(np.isnan(x)):
        raise ValueError("'logits' contains NaN")
    if temperature == 0.0:
        probs = np.zeros_like(x)
        np.put_along_axis(probs, np.argmax(x, axis=-1)[..., None], 1.0, axis=-1)
        return probs
    if top_k is not None:  # ties at the k-th value as transformers sees them: after the temperature
        x = np.where(_top_k_mask(x / temperature, top_k), x, -np.inf)
    probs = softmax(x.reshape(-1, x.shape[-1]), temperature).reshape(x.shape)
    if top_p is not None and top_p < 1.0:
        order = np.argsort(-probs, axis=-1, kind="stable")
        sorted_probs = np.take_along_axis(probs, order, axis=-1)
        mass_before = np.cumsum(sorted_probs, axis=-1) - sorted_probs
        keep = np.zeros(probs.shape, dtype=bool)
        np.put_along_axis(keep, order, mass_before < top_p, axis=-1)
        probs = np.where(keep, probs, 0.0)
        probs /= probs.sum(axis=-1, keepdims=True)
    return probs


def _top_k_mask(x: np.ndarray, k: int) -> np.ndarray:
    """True at the k largest entries of each row (ties at the k-th value kept)."""
    if k >= x.shape[-1]:
        return np.ones(x.shape, dtype=bool)
    return x >= np.partition(x, -k, axis=-1)[..., -k][..., None]


def _truncate_draft(q: np.ndarray, k: Optional[int]) -> np.ndarray:
    """The draft law restricted to its k most probable tokens ([GR] App. N), renormalised."""
    if k is None:
        return q
    q = np.where(_top_k_mask(q, k), q, 0.0)
    return q / q.sum(axis=-1, keepdims=True)


def _sampling_options(temperature, top_k, top_p):
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real) \
            or not np.isfinite(temperature) or temperature < 0:
        raise ValueError(f"'temperature' must be a finite number >= 0, got {temperature!r}")
    if top_k is not None:
        top_k = check.count(top_k, "top_k")
    if top_p is not None:
        if isinstance(top_p, bool) or not isinstance(top_p, numbers.Real) or not 0.0 < top_p <= 1.0:
            raise ValueError(f"'top_p' must be in (0, 1], got {top_p!r}")
        top_p = float(top_p)
    return float(temperature), top_k, top_p


@dataclass
class GenerationStats:
    """Statistics of one :func:`generate` call (all rows of the batch together).

    ``new_tokens``: tokens kept in the output; ``row_rounds``: (row, round) pairs, i.e. the target
    forward passes a one-prompt-at-a-time run makes; ``target_calls``: batched target forward
    calls; ``reached[j]`` / ``accepted[j]``: how often draft position j was verified / accepted;
    ``draft_seconds``, ``target_seconds``, ``verify_seconds``: wall time of drafting (draft model
    and draft sampling), of the target forward passes and of verification.
    """

    num_drafts: int
    draft_length: int
    verifier: str
    new_tokens: int
    row_rounds: int
    target_calls: int
    reached: np.ndarray
    accepted: np.ndarray
    draft_seconds: float
    target_seconds: float
    verify_seconds: float

    @property
    def tokens_per_target_pass(self) -> float:
        """Generated tokens per target forward pass (per prompt): 1 for plain sampling."""
        return self.new_tokens / max(self.row_rounds, 1)

    @property
    def acceptance_per_position(self) -> np.ndarray:
        """(L,) P(draft position j accepted | position j verified); NaN where never reached."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.accepted / self.reached

    @property
    def total_seconds(self) -> float:
        return self.draft_seconds + self.target_seconds + self.verify_seconds


@dataclass
class GenerationResult:
    """``sequences`` (B, T + max_new_tokens) int64 torch tensor: the prompts as given (with their
    padding) followed by the new tokens (``pad_token_id`` after an end-of-sequence token);
    ``stats``: :class:`GenerationStats`."""

    sequences: torch.Tensor
    stats: GenerationStats


def _verifier(verifier: Union[str, Verifier], n: int) -> Verifier:
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


def _group_scheme(v: Verifier, group_size: int, q: np.ndarray) -> Tuple[Verifier, int]:
    """(verifier, number of distinct draws) for a group of ``group_size`` drafts under ``q``."""
    support = int(np.count_nonzero(q))
    if support == 1 or (v.fixed_n is not None and group_size != v.fixed_n):
        return _SINGLE, 1
    if v.scheme_kind == "without_replacement":
        return v, min(group_size, support)
    return v, group_size


def _same_vocabulary(target, draft) -> None:
    sizes = [getattr(getattr(m, "config", None), "vocab_size", None) for m in (target, draft)]
    if None not in sizes and sizes[0] != sizes[1]:
        raise ValueError(f"target and draft vocabularies differ: {sizes[0]} vs {sizes[1]} tokens "
                         "(config.vocab_size); they must share one tokenizer")


def _row_generators(seed, rows: int) -> List[np.random.Generator]:
    """One generator per prompt: ``md.row_seeds(seed, rows)`` (an int seed alone seeds a single
    prompt directly), so row b of a batch equals a one-prompt call with ``seed=row_seeds[b]``."""
    return [np.random.default_rng(int(s)) for s in check.row_seeds(seed, rows)]


def _left_pad(rows: Sequence[Sequence[int]], pad_id: int, device) -> Tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        if len(r):
            ids[i, width - len(r):] = torch.tensor(r, dtype=torch.long)
            mask[i, width - len(r):] = 1
    return ids.to(device), mask.to(device)


def _device(model) -> torch.device:
    return next(model.parameters()).device


class _KVState:
    """One model's view of the rows being generated.

    ``cache``: its KV cache (``None`` before the first pass), ``mask`` (N, S): which cache slots
    hold tokens of the row (left padding and rejected draft tokens leave holes that the attention
    mask hides, so nothing is ever cropped), ``pending``: per row, the tokens not in the cache yet.
    A token's position id is the number of valid slots before it, so holes do not shift positions.
    """

    def __init__(self, model, pending: List[List[int]]):
        self.model, self.device, self.cache = model, _device(model), None
        self.mask = torch.zeros((len(pending), 0), dtype=torch.long, device=self.device)
        self.pending = pending

    def pending_chunk(self, pad_id: int) -> Tuple[torch.Tensor, torch.Tensor]:
        """The pending tokens, left-padded: ids and mask (rows, width)."""
        return _left_pad(self.pending, pad_id, self.device)

    def append(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Run the model on new tokens ``ids`` (N, k) (``mask`` 0 on padding); logits (N, k, V)."""
        positions = (self.mask.sum(1, keepdim=True) + mask.cumsum(1) - 1).clamp(min=0)
        full = torch.cat([self.mask, mask], dim=1)
        out = self.model(input_ids=ids, attention_mask=full, position_ids=positions,
                         past_key_values=self.cache, use_cache=True)
        self.cache, self.mask = out.past_key_values, full
        return out.logits

    def expand(self, n: int) -> None:
        """Each row becomes n consecutive rows (one per draft sequence)."""
        if self.cache is not None:
            self.cache.batch_repeat_interleave(n)
        self.mask = self.mask.repeat_interleave(n, dim=0)

    def advance(self, rows: List[int], fed: int, accepted: List[int], tokens: List[List[int]]) -> None:
        """Keep cache rows ``rows`` (the surviving draft of each prompt). Their last ``fed`` slots
        hold draft tokens, of which the first ``accepted[i]`` were accepted: the rest become holes;
        ``tokens[i]`` (the round's new tokens) not in the cache become pending."""
        index = torch.tensor(rows, dtype=torch.long, device=self.device)
        self.cache.batch_select_indices(index)
        self.mask = self.mask[index].clone()
        width = self.mask.shape[1]
        for i, a in enumerate(accepted):
            self.mask[i, width - fed + min(a, fed):] = 0
        self.pending = [new[min(a, fed):] for new, a in zip(tokens, accepted)]


def _prompts(input_ids, attention_mask) -> List[List[int]]:
    ids = torch.as_tensor(input_ids)
    if ids.ndim == 1:
        ids = ids[None]
    if ids.ndim != 2 or ids.shape[0] == 0 or ids.dtype.is_floating_point:
        raise ValueError(f"'input_ids' must be a (B, T) integer tensor, got shape {tuple(ids.shape)} {ids.dtype}")
    mask = torch.ones_like(ids) if attention_mask is None else torch.as_tensor(attention_mask).reshape(ids.shape[0], -1)
    if mask.shape != ids.shape:
        raise ValueError(f"'attention_mask' must have the shape of 'input_ids' {tuple(ids.shape)}, got {tuple(mask.shape)}")
    prompts = [ids[b][mask[b] != 0].tolist() for b in range(ids.shape[0])]
    if any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token (a row of 'attention_mask' is all zeros)")
    return prompts


def generate(target, draft, input_ids, max_new_tokens: int, num_drafts: int = 2, draft_length: int = 4,
             verifier: Union[str, Verifier] = DEFAULT_VERIFIER, temperature: float = 1.0,
             top_k: Optional[int] = None, top_p: Optional[float] = None, seed=None, attention_mask=None,
             eos_token_id: Optional[int] = None, pad_token_id: Optional[int] = None,
             kv_cache: bool = True, draft_top_k: Optional[int] = None) -> GenerationResult:
    """Sample ``max_new_tokens`` tokens per prompt from ``target`` with multi-draft speculation.

    ``target``, ``draft``: causal LMs (``model(input_ids, attention_mask, position_ids,
    past_key_values, use_cache).logits``) with the same vocabulary. ``input_ids`` (B, T) or (T,)
    prompt ids, ``attention_mask`` (B, T) marks the real tokens (left padding expected, any works).
    ``num_drafts`` n draft sequences of ``draft_length`` L tokens per round; ``verifier``: a name of
    :func:`multidraft.verifier_names` or a :class:`multidraft.Verifier` (default ``"otlp"``, the
    exact optimum). ``temperature`` / ``top_k`` / ``top_p``: see :func:`warp_probabilities`; the
    output is distributed exactly as sampling from the warped target. ``seed``: int, sequence of B
    ints (one per prompt) or ``numpy.random.Generator``; the same seed gives the same output and
    row b of a batch equals a one-prompt call with ``seed=multidraft.row_seeds(seed, B)[b]``.
    ``draft_top_k``: draw the drafts from the (warped) draft distribution truncated to its k most
    probable tokens; the verifier sees that same truncated law and the target is untouched, so the
    output law does not change, while exact verifiers stay cheap at large vocabularies (the OTLP
    network grows with the draft support). ``eos_token_id``: stop a row after it (default: never stop
    early). ``kv_cache``: keep both
    models' KV caches across rounds (rejected draft tokens become masked holes); ``False``
    re-encodes every context each round (same law, slower on long outputs). Returns
    :class:`GenerationResult`.
    """
    n = check.count(num_drafts, "num_drafts")
    L = check.count(draft_length, "draft_length")
    max_new_tokens = check.count(max_new_tokens, "max_new_tokens", minimum=0)
    sampling = _sampling_options(temperature, top_k, top_p)
    if draft_top_k is not None:
        draft_top_k = check.count(draft_top_k, "draft_top_k")
    v = _verifier(verifier, n)
    _same_vocabulary(target, draft)
    prompts = _prompts(input_ids, attention_mask)
    B = len(prompts)
    generators = _row_generators(seed, B)
    if pad_token_id is None:
        pad_token_id = getattr(target.config, "pad_token_id", None) or 0
    stats = GenerationStats(n, L, v.name, 0, 0, 0, np.zeros(L, np.int64), np.zeros(L, np.int64), 0.0, 0.0, 0.0)
    new: List[List[int]] = [[] for _ in range(B)]
    done = [max_new_tokens == 0] * B
    states = None
    with torch.inference_mode():
        while not all(done):
            rows = [b for b in range(B) if not done[b]]
            if states is None:
                contexts = [prompts[b] + new[b] for b in rows]
                states = _KVState(draft, [list(c) for c in contexts]), _KVState(target, [list(c) for c in contexts])
            rngs = [generators[b] for b in rows]
            start = time.perf_counter()
            drafts, q, groups = _draft_round(states[0], rngs, n, L, v, sampling, draft_top_k, pad_token_id)
            middle = time.perf_counter()
            p = _score_round(states[1], drafts, sampling, pad_token_id, q.shape[-1])
            end = time.perf_counter()
            survivors, round_tokens = [], []
            for r, b in enumerate(rows):
                tokens, member = _verify_row(drafts[r], q[r], p[r], groups[r], rngs[r], stats)
                kept = tokens[: max_new_tokens - len(new[b])]
                if eos_token_id is not None and eos_token_id in kept:
                    kept = kept[: kept.index(eos_token_id) + 1]
                    done[b] = True
                new[b].extend(kept)
                stats.new_tokens += len(kept)
                done[b] = done[b] or len(new[b]) >= max_new_tokens
                if not done[b]:
                    survivors.append(r * n + member)
                    round_tokens.append(tokens)
            stats.verify_seconds += time.perf_counter() - end
            stats.draft_seconds += middle - start
            stats.target_seconds += end - middle
            stats.row_rounds += len(rows)
            stats.target_calls += 1
            if kv_cache and survivors:
                accepted = [len(t) - 1 for t in round_tokens]  # every token but the last was a draft token
                states[0].advance(survivors, L - 1, accepted, round_tokens)  # the draft ran on L - 1 drafts
                states[1].advance(survivors, L, accepted, round_tokens)
            else:
                states = None
    given = torch.as_tensor(input_ids)
    given = given[None] if given.ndim == 1 else given
    tail = torch.full((B, max_new_tokens), pad_token_id, dtype=torch.long)
    for b in range(B):
        tail[b, : len(new[b])] = torch.tensor(new[b], dtype=torch.long)
    return GenerationResult(torch.cat([given.to(torch.long).cpu(), tail], dim=1), stats)


#: groups[j] maps the tuple of draft indices sharing a prefix at position j to (drawn tokens, verifier).
Groups = List[Dict[Tuple[int, ...], Tuple[np.ndarray, Verifier]]]


def _draft_round(state: _KVState, rngs, n: int, L: int, v: Verifier, sampling, draft_top_k, pad_id: int):
    """Draw n draft sequences of L tokens per row, grouped by prefix (see module docstring).

    One pass over the pending tokens, then ``L - 1`` one-token passes over the ``R n`` draft rows.
    Returns ``drafts`` (R, n, L) int64, ``q`` (R, n, L, V) float64 (the warped draft distribution
    each token was drawn from) and ``groups`` (per row, see :data:`Groups`).
    """
    R = len(rngs)
    logits = state.append(*state.pending_chunk(pad_id))[:, -1].repeat_interleave(n, dim=0)  # (R n, V)
    state.expand(n)
    drafts = np.zeros((R, n, L), dtype=np.int64)
    q = None
    groups: List[Groups] = [[] for _ in range(R)]
    for j in range(L):
        if j > 0:
            step = torch.as_tensor(drafts[:, :, j - 1].reshape(R * n, 1), device=state.device)
            logits = state.append(step, torch.ones_like(step))[:, -1]
        q_j = _truncate_draft(warp_probabilities(logits, *sampling), draft_top_k).reshape(R, n, -1)
        if q is None:
            q = np.zeros((R, n, L, q_j.shape[-1]))
        q[:, :, j] = q_j
        for r in range(R):
            by_prefix: Dict[Tuple[int, ...], List[int]] = {}
            for m in range(n):
                by_prefix.setdefault(tuple(drafts[r, m, :j]), []).append(m)
            level = {}
            for members in by_prefix.values():
                law = q_j[r, members[0]]
                scheme, k = _group_scheme(v, len(members), law)
                drawn = scheme.draft(law, k, rngs[r])
                for i, m in enumerate(members):
                    drafts[r, m, j] = drawn[i % k]
                level[tuple(members)] = (drawn, scheme)
            groups[r].append(level)
    return drafts, q, groups


def _score_round(state: _KVState, drafts, sampling, pad_id: int, V: int) -> np.ndarray:
    """Warped target distributions (R, n, L + 1, V) after each draft prefix, in ONE forward pass."""
    R, n, L = drafts.shape
    ids, mask = state.pending_chunk(pad_id)
    width = ids.shape[1]
    state.expand(n)
    draft_ids = torch.as_tensor(drafts.reshape(R * n, L), device=ids.device)
    logits = state.append(torch.cat([ids.repeat_interleave(n, dim=0), draft_ids], 1),
                          torch.cat([mask.repeat_interleave(n, dim=0), torch.ones_like(draft_ids)], 1))
    if logits.shape[-1] != V:
        raise ValueError(f"target and draft vocabularies differ: {logits.shape[-1]} vs {V} logits")
    return warp_probabilities(logits[:, width - 1:], *sampling).reshape(R, n, L + 1, V)


def _verify_row(drafts, q, p, groups: Groups, rng: np.random.Generator, stats: GenerationStats):
    """Verify one row's drafts (n, L) position by position.

    Returns the round's new tokens (the accepted draft tokens, then the verifier's or the bonus
    token) and the index of a draft sequence whose prefix they extend (its caches are kept).
    """
    n, L = drafts.shape
    alive = tuple(range(n))
    tokens: List[int] = []
    for j in range(L):
        drawn, scheme = groups[j][alive]
        token, accepted = scheme.verify(p[alive[0], j], q[alive[0], j], drawn, rng)
        tokens.append(int(token))
        stats.reached[j] += 1
        if not accepted:
            return tokens, alive[0]
        stats.accepted[j] += 1
        alive = tuple(m for m in alive if drafts[m, j] == token)
    bonus = _core.sample_rows(p[alive[0], L][None], check.row_seeds(rng, 1))  # every draft accepted
    tokens.append(int(bonus[0]))
    return tokens, alive[0]

"""Multi-draft speculative sampling inside a Hugging Face ``transformers`` generation loop.

Two entry points on ONE loop: :func:`decode`, the callable for ``model.generate(...,
custom_generate=multidraft.hf.decode, draft_model=draft, ...)`` (transformers prepares the
generation config, logits processors and stopping criteria), and :func:`generate`, the
lower-level function (temperature / top-k / top-p, an end-of-sequence list, ``max_new_tokens``).

A round, per prompt (SpecTr-style, any verifier of :func:`multidraft.verifier_names`):

1. Draft: ``n`` draft sequences of ``L`` tokens. The draft model runs once on the tokens it has
   not seen, then ``L - 1`` times on one token per sequence; at every position the sequences are
   grouped by identical prefix and each group's next tokens are drawn jointly by the verifier's
   scheme, ``v.draft(q(. | prefix), group_size, rng)``.
2. Target: ONE forward pass over the new token and the ``n * L`` draft tokens gives ``p(. |
   prefix)`` at the ``L + 1`` positions of every sequence.
3. Verify position by position among the sequences still alive (those whose prefix equals the
   tokens accepted so far): they form one group, so their tokens are a sample of the verifier's
   scheme and its output is distributed as ``p(. | prefix)``. A rejection ends the round with
   the verifier's token; when all ``L`` positions are accepted a bonus token is drawn from ``p``.

The law ``p`` (and ``q``) is what plain sampling would draw from: the logits processors (or
temperature / top-k / top-p) applied at every position with that position's own prefix.

Caches (see ``_tree``): each prompt is one row of both models' caches; the ``n`` sequences are
chains of slots under a 4-D attention mask with true position ids (sliding windows applied by
position), and the accepted chain prefix is kept by gathering the cache. Nothing is copied ``n``
times, no prompt is encoded twice, and no hole is ever left. Models whose cache this cannot keep
exactly (recurrent or chunked layers, flash/flex attention) are refused with a ValueError.

Degenerate draft laws (one token, e.g. greedy decoding; fewer tokens than drafts without
replacement) need no special case: the verifiers degrade losslessly themselves. Only a group of
one draft under a verifier that takes a fixed ``n`` (``"spechub"``: 2) is verified by ``"sps"``.

Out-of-vocabulary drafts ([OOV], see ``_oov``): with ``vocabulary_map=`` the draft's logit columns
(a pruned LM head, :func:`prune_draft_head`) are laid over the target ids and the drafts are drawn
from TLI or, with ``affinity=``, from RDK's p' = M^T q'; that proposal is the draft law ``q`` of
steps 1 and 3, so the loop itself is unchanged and the output stays exactly the target's law.
"""
from __future__ import annotations

import inspect
import time
from dataclasses import dataclass
from functools import partial
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from transformers import GenerationMixin, StoppingCriteriaList
from transformers.generation import EosTokenCriteria, GenerateDecoderOnlyOutput, MaxLengthCriteria

from .. import _core
from .. import _validation as check
from ..verifiers import Verifier, verifier as make_verifier
from ._laws import Law, processor_law, sampling_options, truncate_draft, warp_law, warp_probabilities
from ._oov import DraftVocabulary, prune_draft_head
from ._tree import TreeCache, check_model

__all__ = ["decode", "generate", "prune_draft_head", "warp_probabilities", "GenerationStats", "GenerationResult",
           "MultiDraftOutput", "DEFAULT_VERIFIER", "NAMED_OPTIONS"]

#: The default verifier: the exact optimal one (OTLP plan, acceptance alpha*; see NAMED_OPTIONS).
DEFAULT_VERIFIER = "otlp"

#: Options used when a verifier is given by name: the exact OTLP through the complementary-slackness
#: max-flow (same optimum, much faster at large V), Global Resolution with its exact fallback.
NAMED_OPTIONS: Dict[str, Dict[str, object]] = {"global_resolution": {"fallback": True}}

#: Verifier used for groups that the chosen verifier cannot take (see the module docstring).
_SINGLE = make_verifier("sps")


@dataclass
class GenerationStats:
    """Statistics of one generation call (all rows of the batch together).

    ``new_tokens``: tokens kept in the output; ``row_rounds``: (row, round) pairs, i.e. the target
    forward passes a one-prompt-at-a-time run makes; ``target_calls``: batched target forward
    calls; ``target_positions`` / ``draft_positions``: token positions each model computed (its
    forward passes' real input tokens); ``reached[j]`` / ``accepted[j]``: how often draft
    position j was verified / accepted; ``draft_seconds``, ``target_seconds``,
    ``verify_seconds``: wall time of drafting (draft model, draft laws and draft sampling), of
    the target forward passes and of verification (with the target laws it reaches, computed
    lazily).
    """

    num_drafts: int
    draft_length: int
    verifier: str
    new_tokens: int = 0
    row_rounds: int = 0
    target_calls: int = 0
    target_positions: int = 0
    draft_positions: int = 0
    reached: Optional[np.ndarray] = None
    accepted: Optional[np.ndarray] = None
    draft_seconds: float = 0.0
    target_seconds: float = 0.0
    verify_seconds: float = 0.0

    def __post_init__(self):
        self.reached = np.zeros(self.draft_length, np.int64) if self.reached is None else self.reached
        self.accepted = np.zeros(self.draft_length, np.int64) if self.accepted is None else self.accepted

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
    """``sequences`` (B, T + N) int64 torch tensor: the prompts as given (with their padding)
    followed by the new tokens, N the most any row generated (``pad_token_id`` after a row
    stopped, as transformers pads); ``stats``: :class:`GenerationStats`."""

    sequences: torch.Tensor
    stats: GenerationStats


@dataclass
class MultiDraftOutput(GenerateDecoderOnlyOutput):
    """What ``model.generate(..., custom_generate=decode, return_dict_in_generate=True)`` returns:
    transformers' ``GenerateDecoderOnlyOutput`` (``sequences``) plus ``multidraft``, the
    :class:`GenerationStats` of the call."""

    multidraft: Optional[GenerationStats] = None


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


def _group_verifier(v: Verifier, group_size: int) -> Verifier:
    """The verifier of a group of ``group_size`` drafts: ``v``, or ``"sps"`` for a group of one
    under a verifier that takes another fixed number of drafts."""
    return _SINGLE if v.fixed_n is not None and group_size != v.fixed_n else v


def _row_generators(seed, rows: int) -> List[np.random.Generator]:
    """One generator per prompt: ``md.row_seeds(seed, rows)`` (an int seed alone seeds a single
    prompt directly), so row b of a batch equals a one-prompt call with ``seed=row_seeds[b]``."""
    return [np.random.default_rng(int(s)) for s in check.row_seeds(seed, rows)]


def _prompts(input_ids, attention_mask) -> Tuple[torch.Tensor, List[List[int]]]:
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


@dataclass
class _Setup:
    """Everything one call of the loop needs (built by :func:`generate` or :func:`decode`)."""

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


def _run(s: _Setup) -> Tuple[torch.Tensor, GenerationStats]:
    """The generation loop (module docstring): (sequences (B, T + N), statistics)."""
    layouts = check_model(s.target, "target"), check_model(s.draft, "draft_model")
    V = s.vocabulary.target_width(s.target, s.draft)
    B = len(s.prompts)
    rows = [s.ids[b].tolist() for b in range(B)]  # grows with the new tokens
    generators = _row_generators(s.seed, B)
    stats = GenerationStats(s.n, s.L, s.verifier.name)
    new: List[List[int]] = [[] for _ in range(B)]
    done = [False] * B
    caches: Optional[Tuple[TreeCache, TreeCache]] = None
    with torch.inference_mode():
        while not all(done):
            if caches is None:  # both models read every committed token not in their cache
                caches = TreeCache(s.draft, layouts[1], B), TreeCache(s.target, layouts[0], B)
                pending = [[[] if done[b] else s.prompts[b] + new[b] for b in range(B)] for _ in caches]
            active = [b for b in range(B) if not done[b]]
            limits = [_draft_limit(s, rows[b]) for b in active]
            fed = max(limits) - 1  # draft positions the draft model reads (the last one it does not)
            start = time.perf_counter()
            drafts, q, groups = _draft_round(s, caches[0], pending[0], active, rows, [generators[b] for b in active],
                                             V, limits)
            middle = time.perf_counter()
            p = _score_round(s, caches[1], pending[1], active, rows, drafts, V, limits)
            end = time.perf_counter()
            chains, accepted = [0] * B, [0] * B
            for r, b in enumerate(active):
                lim = limits[r]
                tokens, chains[b] = _verify_row(drafts[r, :, :lim], q[r, :, :lim], partial(p, r), groups[r],
                                                generators[b], stats)
                accepted[b] = len(tokens) - 1  # every token but the last is an accepted draft token
                kept, done[b] = _until_stop(s.stopping, rows[b], tokens)
                rows[b] += kept
                new[b] += kept
                stats.new_tokens += len(kept)
                if s.streamer is not None and kept:
                    s.streamer.put(torch.tensor(kept))
                pending[1][b] = [] if done[b] else tokens[-1:]
                pending[0][b] = [] if done[b] else tokens[min(accepted[b], fed):]
            stats.verify_seconds += time.perf_counter() - end
            stats.draft_seconds += middle - start
            stats.target_seconds += end - middle
            stats.row_rounds += len(active)
            stats.target_calls += 1
            alive = [not d for d in done]
            if s.kv_cache:
                caches[0].commit(chains, [min(a, fed) for a in accepted], alive)
                caches[1].commit(chains, accepted, alive)
            else:
                _count_positions(stats, caches)
                caches = None
    if caches is not None:
        _count_positions(stats, caches)
    if s.streamer is not None:
        s.streamer.end()
    width = max(len(t) for t in new)
    tail = torch.full((B, width), s.pad_token_id, dtype=torch.long)
    for b in range(B):
        tail[b, : len(new[b])] = torch.tensor(new[b], dtype=torch.long)
    return torch.cat([s.ids, tail], dim=1), stats


def _count_positions(stats: GenerationStats, caches: Tuple[TreeCache, TreeCache]) -> None:
    stats.draft_positions += caches[0].positions_computed
    stats.target_positions += caches[1].positions_computed


def _until_stop(stopping, row: List[int], tokens: List[int]) -> Tuple[List[int], bool]:
    """(the round's tokens up to the first after which the stopping criteria end the row, whether
    they did): criteria are checked after every token, as transformers checks them."""
    for i in range(len(tokens)):
        if bool(stopping(torch.tensor([row + tokens[: i + 1]]), None)[0]):
            return tokens[: i + 1], True
    return tokens, False


def _chunk(pending: List[List[int]], cache: TreeCache, pad_id: int):
    """The pending tokens of every row, left-padded: ids, valid, position ids, chain (-1), (B, W)."""
    B, device = len(pending), cache.device
    width = max(1, max(len(t) for t in pending))
    ids = torch.full((B, width), pad_id, dtype=torch.long)
    valid = torch.zeros((B, width), dtype=torch.bool)
    pos = torch.zeros((B, width), dtype=torch.long)
    seen = (cache.valid & (cache.chain < 0)).sum(1).cpu()
    for b, tokens in enumerate(pending):
        if tokens:
            ids[b, width - len(tokens):] = torch.tensor(tokens)
            valid[b, width - len(tokens):] = True
            pos[b, width - len(tokens):] = seen[b] + torch.arange(len(tokens))
    return ids.to(device), valid.to(device), pos.to(device), torch.full((B, width), -1, device=device)


def _draft_limit(s: _Setup, row: List[int]) -> int:
    """Draft tokens worth drawing for a row this round: ``L``, or fewer near ``max_length``
    (so that no position id runs past what the row can reach)."""
    return s.L if s.max_length is None else max(1, min(s.L, s.max_length - len(row) - 1))


def _tree(drafts: np.ndarray, active: List[int], B: int, start: torch.Tensor, levels: slice, limits, device,
          pad_id: int):
    """Draft chains as slots (B, n * l): chain-major, levels ``levels`` of every chain, position
    ids ``start[b] + level``; rows not ``active`` and levels at or past a row's limit get padding
    slots."""
    n = drafts.shape[1]
    chosen = drafts[:, :, levels]
    l = chosen.shape[2]
    ids = torch.full((B, n, l), pad_id, dtype=torch.long)
    ids[active] = torch.as_tensor(chosen)
    level = torch.arange(levels.start or 0, (levels.start or 0) + l)
    valid = torch.zeros((B, n, l), dtype=torch.bool)
    valid[active] = (level[None, :] < torch.tensor(limits)[:, None])[:, None, :]
    pos = start.cpu()[:, None, None] + level[None, None, :]
    chain = torch.arange(n)[None, :, None].expand(B, n, l)
    flat = lambda x: x.reshape(B, n * l).to(device)
    return flat(ids), flat(valid), flat(pos.expand(B, n, l).clone()), flat(chain.clone())


def _prefixes(s: _Setup, rows, active, drafts: np.ndarray, j: int) -> Optional[List[List[int]]]:
    """Prefixes of level ``j`` of every chain (active row-major, chain-minor), or None if the
    law does not read them."""
    if not s.law.uses_prefixes:
        return None
    return [rows[b] + drafts[r, m, :j].tolist() for r, b in enumerate(active) for m in range(drafts.shape[1])]


#: groups[j] maps the tuple of draft indices sharing a prefix at position j to (drawn tokens, verifier).
Groups = List[Dict[Tuple[int, ...], Tuple[np.ndarray, Verifier]]]


def _draft_round(s: _Setup, cache: TreeCache, pending, active, rows, rngs, V: int, limits: List[int]):
    """Draw n draft sequences of ``limits[r]`` tokens per active row, grouped by prefix (module
    docstring).

    Returns ``drafts`` (R, n, L) int64 (L the largest limit; zeros past a row's limit), ``q``
    (R, n, L, V) float64 (the draft law each token was drawn from) and ``groups`` (per row, see
    :data:`Groups`).
    """
    R, n, L = len(active), s.n, max(limits)
    chunk = _chunk(pending, cache, s.pad_token_id)
    logits = cache.forward(*chunk, keep=1)[active, -1]  # (R, V): level 0 is shared by every chain
    start = chunk[2][:, -1] + 1  # position of level 0
    drafts = np.zeros((R, n, L), dtype=np.int64)
    q = np.zeros((R, n, L, V))
    groups: List[Groups] = [[] for _ in range(R)]
    owners = [b for b in active for _ in range(n)]  # the batch row of each (row, chain)
    for j in range(L):
        if j == 0:
            prefixes = None if not s.law.uses_prefixes else [rows[b] for b in active]
            q[:, :, 0] = _draft_law(s, logits, prefixes, active, V)[:, None]
        else:
            slots = _tree(drafts, active, len(pending), start, slice(j - 1, j), limits, cache.device, s.pad_token_id)
            logits = cache.forward(*slots, keep=n)[active].reshape(R * n, -1)
            q[:, :, j] = _draft_law(s, logits, _prefixes(s, rows, active, drafts, j), owners, V).reshape(R, n, V)
        for r in range(R):
            if j < limits[r]:
                groups[r].append(_draw_level(s.verifier, drafts[r], q[r, :, j], j, rngs[r]))
    return drafts, q, groups


def _draft_law(s: _Setup, logits: torch.Tensor, prefixes, owners, V: int) -> np.ndarray:
    """The law the drafts are drawn from and the verifier is given: the sampling law of the draft
    logits laid over the target ids, RDK's proposal for an out-of-vocabulary draft, top-k cut."""
    return truncate_draft(s.vocabulary.proposal(s.law(s.vocabulary.logits(logits, V), prefixes, owners)),
                          s.draft_top_k)


def _draw_level(v: Verifier, drafts: np.ndarray, q_j: np.ndarray, j: int, rng) -> Dict:
    """Draw level j of one row's n drafts (n, L) in place, jointly within each prefix group."""
    by_prefix: Dict[Tuple[int, ...], List[int]] = {}
    for m in range(drafts.shape[0]):
        by_prefix.setdefault(tuple(drafts[m, :j]), []).append(m)
    level = {}
    for members in by_prefix.values():
        law = q_j[members[0]]
        scheme = _group_verifier(v, len(members))
        drawn = scheme.draft(law, len(members), rng)
        drafts[members, j] = drawn
        level[tuple(members)] = (drawn, scheme)
    return level


def _score_round(s: _Setup, cache: TreeCache, pending, active, rows, drafts: np.ndarray, V: int,
                 limits: List[int]) -> "_TargetLaws":
    """Target logits after each draft prefix, in ONE forward pass; their laws on demand."""
    R, n, L = drafts.shape
    chunk = _chunk(pending, cache, s.pad_token_id)
    start = chunk[2][:, -1] + 1
    slots = _tree(drafts, active, len(pending), start, slice(0, L), limits, cache.device, s.pad_token_id)
    logits = cache.forward(*(torch.cat(pair, dim=1) for pair in zip(chunk, slots)), keep=n * L + 1)[active]
    if logits.shape[-1] != V:
        raise ValueError(f"the target returned {logits.shape[-1]} logits, its LM head has {V} rows")
    return _TargetLaws(s.law, logits, rows, active, drafts)


class _TargetLaws:
    """``laws(r, m, j)``: the target law (V,) after the first j draft tokens of chain m of active
    row r, computed when verification reaches it. Verification stops at the first rejection, so
    the laws after it (most of the tree: acceptance is about a half per position) are never
    computed; each law is the one plain sampling would draw from at that prefix."""

    def __init__(self, law: Law, logits: torch.Tensor, rows, active, drafts: np.ndarray):
        self.law, self.logits, self.rows, self.active, self.drafts = law, logits, rows, active, drafts

    def __call__(self, r: int, m: int, j: int) -> np.ndarray:
        b = self.active[r]
        slot = 0 if j == 0 else 1 + m * self.drafts.shape[2] + j - 1  # slots are chain-major (see _tree)
        prefixes = [self.rows[b] + self.drafts[r, m, :j].tolist()] if self.law.uses_prefixes else None
        return self.law(self.logits[r, slot][None], prefixes, [b])[0]


def _verify_row(drafts, q, p: Callable[[int, int], np.ndarray], groups: Groups, rng: np.random.Generator,
                stats: GenerationStats):
    """Verify one row's drafts (n, L) position by position; ``p(m, j)``: the target law after the
    first j tokens of chain m.

    Returns the round's new tokens (the accepted draft tokens, then the verifier's or the bonus
    token) and the index of a draft sequence whose prefix they extend (its cache slots are kept).
    """
    n, L = drafts.shape
    alive = tuple(range(n))
    tokens: List[int] = []
    for j in range(L):
        drawn, scheme = groups[j][alive]
        token, accepted = scheme.verify(p(alive[0], j), q[alive[0], j], drawn, rng)
        tokens.append(int(token))
        stats.reached[j] += 1
        if not accepted:
            return tokens, alive[0]
        stats.accepted[j] += 1
        alive = tuple(m for m in alive if drafts[m, j] == token)
    bonus = _core.sample_rows(p(alive[0], L)[None], check.row_seeds(rng, 1))  # every draft accepted
    tokens.append(int(bonus[0]))
    return tokens, alive[0]


def generate(target, draft, input_ids, max_new_tokens: int, num_drafts: int = 2, draft_length: int = 4,
             verifier: Union[str, Verifier] = DEFAULT_VERIFIER, temperature: float = 1.0,
             top_k: Optional[int] = None, top_p: Optional[float] = None, seed=None, attention_mask=None,
             eos_token_id: Union[None, int, Sequence[int]] = None, pad_token_id: Optional[int] = None,
             kv_cache: bool = True, draft_top_k: Optional[int] = None, streamer=None, vocabulary_map=None,
             affinity=None) -> GenerationResult:
    """Sample up to ``max_new_tokens`` tokens per prompt from ``target`` with multi-draft speculation.

    ``target``, ``draft``: transformers causal LMs sharing one tokenizer. ``input_ids`` (B, T) or
    (T,) prompt ids, ``attention_mask`` (B, T) marks the real tokens (left padding). ``num_drafts``
    n draft sequences of ``draft_length`` L tokens per round; ``verifier``: a name of
    :func:`multidraft.verifier_names` or a :class:`multidraft.Verifier` (default ``"otlp"``, the
    exact optimum). ``temperature`` / ``top_k`` / ``top_p``: see :func:`warp_probabilities`; the
    output is distributed exactly as sampling from the warped target (``temperature=0``: the
    target's greedy output). ``seed``: int, sequence of B ints (one per prompt) or
    ``numpy.random.Generator``; row b of a batch equals a one-prompt call with
    ``seed=multidraft.row_seeds(seed, B)[b]``. ``draft_top_k``: draw the drafts from the draft law
    truncated to its k most probable tokens (the verifier sees that law, the target is untouched:
    same output law, cheaper exact verifiers at large vocabularies). ``eos_token_id``: an id or a
    list of ids that end a row (then ``pad_token_id``, default the target's or 0). ``kv_cache``:
    keep both caches across rounds (``False`` re-encodes every context each round: same law, more
    work). ``streamer``: a transformers streamer (one prompt), fed the prompt then the new tokens.
    ``vocabulary_map``: a :class:`multidraft.rdk.VocabularyMap` from the draft's logit columns to
    target ids, for a draft whose LM head is pruned (see :func:`prune_draft_head`); the drafts are
    then drawn from TLI, or with ``affinity`` (a :class:`multidraft.rdk.AffinityMatrix` over the
    target vocabulary) from RDK's p' = M^T q', and verified against that law: still exactly the
    target's output law ([OOV]). Without a map the two models must share one vocabulary.
    Returns :class:`GenerationResult`; :func:`decode` runs the same loop inside ``model.generate``.
    """
    n = check.count(num_drafts, "num_drafts")
    L = check.count(draft_length, "draft_length")
    max_new_tokens = check.count(max_new_tokens, "max_new_tokens", minimum=0)
    law = warp_law(*sampling_options(temperature, top_k, top_p))
    if draft_top_k is not None:
        draft_top_k = check.count(draft_top_k, "draft_top_k")
    ids, prompts = _prompts(input_ids, attention_mask)
    stopping = StoppingCriteriaList([MaxLengthCriteria(ids.shape[1] + max_new_tokens)])
    if eos_token_id is not None:
        stopping.append(EosTokenCriteria(_token_ids(eos_token_id, "eos_token_id")))
    if pad_token_id is None:
        pad_token_id = getattr(target.config, "pad_token_id", None) or 0
    if streamer is not None:  # transformers' streamers take one row
        if len(prompts) != 1:
            raise ValueError(f"a streamer takes one prompt at a time, got a batch of {len(prompts)}")
        streamer.put(ids)
    setup = _Setup(target, draft, ids, prompts, law, stopping, n, L, _verifier(verifier, n), draft_top_k, seed,
                   int(pad_token_id), ids.shape[1] + max_new_tokens, streamer, bool(kv_cache),
                   DraftVocabulary(vocabulary_map, affinity))
    if max_new_tokens == 0:
        check_model(target, "target"), check_model(draft, "draft_model")
        setup.vocabulary.target_width(target, draft)
        return GenerationResult(ids, GenerationStats(n, L, setup.verifier.name))
    return GenerationResult(*_run(setup))


def _token_ids(ids, name: str) -> List[int]:
    values = [ids] if isinstance(ids, (int, np.integer)) else list(ids)
    for i in values:
        check.count(i, name, minimum=0)
    return [int(i) for i in values]


#: Model inputs that transformers prepares and decode reads or rebuilds itself.
_MODEL_KWARGS = ("attention_mask", "position_ids", "use_cache", "past_key_values", "logits_to_keep", "cache_position")


def decode(model, input_ids, logits_processor, stopping_criteria, generation_config, draft_model=None,
           num_drafts: int = 2, draft_length: int = 4, verifier: Union[str, Verifier] = DEFAULT_VERIFIER,
           draft_top_k: Optional[int] = None, seed=None, vocabulary_map=None, affinity=None, **model_kwargs):
    """Multi-draft speculative sampling as transformers' ``custom_generate`` callable::

        target.generate(input_ids, attention_mask=mask, custom_generate=multidraft.hf.decode,
                        draft_model=draft, num_drafts=4, draft_length=4, verifier="otlp",
                        do_sample=True, temperature=0.8, top_p=0.95, max_new_tokens=64)

    transformers prepares the generation config (the model's defaults included), the logits
    processors and the stopping criteria; ``decode`` applies the processors at every draft
    position with that position's prefix, to the target and draft logits alike, so each token is
    distributed exactly as ``generate`` without ``custom_generate`` would sample it
    (``do_sample=False``: the same greedy tokens). It checks the stopping criteria after every
    token (EOS lists, stop strings, ``max_new_tokens``, ``max_time``), pads finished rows with the
    pad id, feeds a ``streamer`` and returns a tensor, or with ``return_dict_in_generate=True`` a
    :class:`MultiDraftOutput` (``.sequences``, ``.multidraft`` statistics).

    Extra arguments: ``draft_model`` (required), ``num_drafts``, ``draft_length``, ``verifier``,
    ``draft_top_k``, ``vocabulary_map``, ``affinity`` and ``seed`` as in :func:`generate`
    (``seed=None`` draws the seed from torch's global generator, so ``torch.manual_seed`` makes runs repeatable).
    """
    if draft_model is None:
        raise ValueError("'draft_model' is required: target.generate(..., custom_generate=multidraft.hf.decode, "
                         "draft_model=draft)")
    n = check.count(num_drafts, "num_drafts")
    L = check.count(draft_length, "draft_length")
    if draft_top_k is not None:
        draft_top_k = check.count(draft_top_k, "draft_top_k")
    _check_generation_config(generation_config, model_kwargs)
    ids, prompts = _prompts(input_ids, model_kwargs.get("attention_mask"))
    if seed is None:
        seed = int(torch.randint(0, 2**62, ()))
    pad = generation_config._pad_token_tensor
    setup = _Setup(model, draft_model, ids, prompts, processor_law(logits_processor, not generation_config.do_sample, len(prompts)),
                   stopping_criteria, n, L, _verifier(verifier, n), draft_top_k, seed,
                   0 if pad is None else int(pad), generation_config.max_length, _caller_streamer(),
                   vocabulary=DraftVocabulary(vocabulary_map, affinity))
    sequences, stats = _run(setup)
    sequences = sequences.to(input_ids.device)
    return MultiDraftOutput(sequences=sequences, multidraft=stats) if generation_config.return_dict_in_generate \
        else sequences


def _check_generation_config(config, model_kwargs) -> None:
    """ValueError for what decode does not do (rather than silently doing something else)."""
    if config.num_beams != 1:
        raise ValueError(f"decode samples one sequence per prompt: 'num_beams' must be 1, got {config.num_beams}")
    for flag in ("output_scores", "output_logits", "output_attentions", "output_hidden_states"):
        if getattr(config, flag, False):
            raise ValueError(f"decode does not return per-step tensors: '{flag}' must be False")
    if config.cache_implementation not in (None, "dynamic"):
        raise ValueError(f"decode keeps its own dynamic cache: cache_implementation={config.cache_implementation!r} "
                         "is not supported")
    unknown = sorted(k for k, v in model_kwargs.items() if v is not None and k not in _MODEL_KWARGS)
    if unknown:
        raise ValueError(f"decode takes input_ids and attention_mask as model inputs; got also {unknown}")
    cache = model_kwargs.get("past_key_values")
    if cache is not None and cache.get_seq_length() > 0:
        raise ValueError("decode starts from the prompt: a filled 'past_key_values' is not supported")


def _caller_streamer():
    """The ``streamer`` given to ``model.generate``: transformers puts the prompt into it but does
    not pass it on to a callable ``custom_generate``, so it is read from generate's frame."""
    code = inspect.unwrap(GenerationMixin.generate).__code__
    frame = inspect.currentframe()
    while frame is not None and frame.f_code is not code:
        frame = frame.f_back
    return None if frame is None else frame.f_locals.get("streamer")

"""The two entry points on the one loop: :func:`generate` (its own sampling options) and
:func:`decode` (transformers' ``custom_generate`` callable)."""
from __future__ import annotations

import inspect
from typing import Optional, Sequence, Union

import torch
from transformers import GenerationMixin, StoppingCriteriaList
from transformers.generation import EosTokenCriteria, MaxLengthCriteria

from .. import _validation as check
from ..verifiers import Verifier
from ._laws import draft_top_k_option, sampling_options, warp_law
from ._loop import run
from ._oov import DraftVocabulary
from ._processors import processor_law
from ._setup import DEFAULT_VERIFIER, Setup, read_prompts, read_tree, resolve_verifier, token_ids
from ._stats import GenerationResult, MultiDraftOutput
from ._cache import CACHE_KEYWORDS, check_model


def generate(target, draft, input_ids, max_new_tokens: int, num_drafts: Optional[int] = None,
             draft_length: Optional[int] = None, verifier: Union[str, Verifier] = DEFAULT_VERIFIER, temperature: float = 1.0,
             top_k: Optional[int] = None, top_p: Optional[float] = None, seed=None, attention_mask=None,
             eos_token_id: Union[None, int, Sequence[int]] = None, pad_token_id: Optional[int] = None,
             kv_cache: bool = True, draft_top_k: Union[None, int, str] = "auto", streamer=None, vocabulary_map=None,
             affinity=None, tree=None, node_budget: Optional[int] = None) -> GenerationResult:
    """Sample up to ``max_new_tokens`` tokens per prompt from ``target`` with multi-draft speculation.

    ``target``, ``draft``: transformers causal LMs sharing one tokenizer. ``input_ids`` (B, T) or
    (T,) prompt ids, ``attention_mask`` (B, T) marks the real tokens (left padding). ``num_drafts``
    n draft sequences of ``draft_length`` L tokens per round (default 2 and 4; identical prefixes
    are one node), or ``tree``: a round's draft tree, branching widths ``(b1, ..., bL)`` (children
    per node at each depth) or a :class:`Tree` (any shape, e.g. unbalanced; docs/model-generate.md,
    "Token trees"), each node's children drawn jointly and verified as one group; ``tree="auto"``:
    each round's tree chosen for the most expected tokens per second from the run's acceptance and
    the models' measured pass costs (at most ``node_budget`` nodes, default 16; the first call per
    model measures its cost curve); ``verifier``: a name of
    :func:`multidraft.verifier_names` or a :class:`multidraft.Verifier` (default ``"global_resolution"``:
    exact output law, acceptance within its stated bound of the optimum). ``temperature`` / ``top_k`` / ``top_p``: see :func:`warp_probabilities`; the
    output is distributed exactly as sampling from the warped target (``temperature=0``: the
    target's greedy output). ``seed``: int, sequence of B ints (one per prompt) or
    ``numpy.random.Generator``; row b of a batch equals a one-prompt call with
    ``seed=multidraft.row_seeds(seed, B)[b]``. ``draft_top_k``: draw the drafts from the draft law
    truncated to its k most probable tokens, ties at the cut to the lower token ids (the verifier
    sees that law, the target is untouched: same output law, cheaper exact verifiers at large
    vocabularies); ``"auto"`` (the default): the fewest tokens holding 99.5% of the draft's mass, at
    most 32; None: the whole law. A request
    whose verification would take seconds per token (an exact network verifier over a large draft
    support) is refused at once with a ValueError saying what to change. ``eos_token_id``: an id or a
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
    shape, budget = read_tree(tree, num_drafts, draft_length, node_budget)
    max_new_tokens = check.count(max_new_tokens, "max_new_tokens", minimum=0)
    law = warp_law(*sampling_options(temperature, top_k, top_p))
    draft_top_k = draft_top_k_option(draft_top_k)
    ids, prompts = read_prompts(input_ids, attention_mask)
    stopping = StoppingCriteriaList([MaxLengthCriteria(ids.shape[1] + max_new_tokens)])
    if eos_token_id is not None:
        stopping.append(EosTokenCriteria(token_ids(eos_token_id, "eos_token_id")))
    if pad_token_id is None:
        pad_token_id = getattr(target.config, "pad_token_id", None) or 0
    if streamer is not None:  # transformers' streamers take one row
        if len(prompts) != 1:
            raise ValueError(f"a streamer takes one prompt at a time, got a batch of {len(prompts)}")
        streamer.put(ids)
    setup = Setup(target=target, draft=draft, ids=ids, prompts=prompts, law=law, stopping=stopping, shape=shape,
                  verifier=resolve_verifier(verifier, None if budget else shape), draft_top_k=draft_top_k,
                  seed=seed, node_budget=budget,
                  pad_token_id=int(pad_token_id), max_length=ids.shape[1] + max_new_tokens, streamer=streamer,
                  kv_cache=bool(kv_cache), vocabulary=DraftVocabulary(vocabulary_map, affinity))
    if max_new_tokens == 0:
        check_model(target, "target"), check_model(draft, "draft_model")
        setup.start(setup.vocabulary.target_width(target, draft))
        return GenerationResult(ids, setup.new_stats())
    return GenerationResult(*run(setup))


#: Model inputs that transformers prepares and decode reads or rebuilds itself.
_MODEL_KWARGS = ("attention_mask", "position_ids", "use_cache", *CACHE_KEYWORDS, "logits_to_keep", "cache_position")


def decode(model, input_ids, logits_processor, stopping_criteria, generation_config, draft_model=None,
           num_drafts: Optional[int] = None, draft_length: Optional[int] = None, verifier: Union[str, Verifier] = DEFAULT_VERIFIER,
           draft_top_k: Union[None, int, str] = "auto", seed=None, vocabulary_map=None, affinity=None, tree=None,
           node_budget: Optional[int] = None, **model_kwargs):
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

    Extra arguments: ``draft_model`` (required), ``num_drafts``, ``draft_length``, ``tree``,
    ``node_budget``, ``verifier``,
    ``draft_top_k``, ``vocabulary_map``, ``affinity`` and ``seed`` as in :func:`generate`
    (``seed=None`` draws the seed from torch's global generator, so ``torch.manual_seed`` makes runs repeatable).
    """
    if draft_model is None:
        raise ValueError("'draft_model' is required: target.generate(..., custom_generate=multidraft.hf.decode, "
                         "draft_model=draft)")
    shape, budget = read_tree(tree, num_drafts, draft_length, node_budget)
    draft_top_k = draft_top_k_option(draft_top_k)
    _check_generation_config(generation_config, model_kwargs)
    ids, prompts = read_prompts(input_ids, model_kwargs.get("attention_mask"))
    if seed is None:
        seed = int(torch.randint(0, 2**62, (), device="cpu"))
    pad = generation_config._pad_token_tensor
    setup = Setup(target=model, draft=draft_model, ids=ids, prompts=prompts,
                  law=processor_law(logits_processor, not generation_config.do_sample, len(prompts)),
                  stopping=stopping_criteria, shape=shape, verifier=resolve_verifier(verifier, None if budget else shape),
                  node_budget=budget,
                  draft_top_k=draft_top_k, seed=seed, pad_token_id=0 if pad is None else int(pad),
                  max_length=generation_config.max_length, streamer=_caller_streamer(),
                  vocabulary=DraftVocabulary(vocabulary_map, affinity))
    sequences, stats = run(setup)
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
    for name in CACHE_KEYWORDS:
        cache = model_kwargs.get(name)
        if cache is not None and cache.get_seq_length() > 0:
            raise ValueError(f"decode starts from the prompt: a filled {name!r} is not supported")


def _caller_streamer():
    """The ``streamer`` given to ``model.generate``: transformers puts the prompt into it but does
    not pass it on to a callable ``custom_generate``, so it is read from generate's frame."""
    code = inspect.unwrap(GenerationMixin.generate).__code__
    frame = inspect.currentframe()
    while frame is not None and frame.f_code is not code:
        frame = frame.f_back
    return None if frame is None else frame.f_locals.get("streamer")

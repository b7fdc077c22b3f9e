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
from . import _setup
from ._generate import decode, generate
from ._laws import warp_probabilities
from ._oov import prune_draft_head
from ._shape import Tree
from ._stats import GenerationResult, GenerationStats, MultiDraftOutput

__all__ = ["decode", "generate", "prune_draft_head", "warp_probabilities", "Tree", "GenerationStats", "GenerationResult",
           "MultiDraftOutput", "DEFAULT_VERIFIER", "NAMED_OPTIONS"]

# The loop lives in private modules, one job each: _setup (a call's checked arguments), _draft,
# _score and _verify (the three steps of a round), _loop (rounds until every row stops), _generate
# (the two entry points), _stats (what a call reports); _laws, _tree and _oov serve them.

#: The default verifier: the exact optimal one (OTLP plan, acceptance alpha*; see NAMED_OPTIONS).
DEFAULT_VERIFIER = _setup.DEFAULT_VERIFIER

#: Options used when a verifier is given by name: the exact OTLP through the complementary-slackness
#: max-flow (same optimum, much faster at large V), Global Resolution with its exact fallback.
NAMED_OPTIONS = _setup.NAMED_OPTIONS

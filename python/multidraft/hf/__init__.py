"""Multi-draft speculative sampling inside a Hugging Face ``transformers`` generation loop.

Two entry points on ONE loop: :func:`decode`, the callable for ``model.generate(...,
custom_generate=multidraft.hf.decode, draft_model=draft, ...)`` (transformers prepares the
generation config, logits processors and stopping criteria), and :func:`generate`, the
lower-level function (temperature / top-k / top-p, an end-of-sequence list, ``max_new_tokens``).

A round, per prompt, on a token tree (``tree=``, see :class:`Tree`; ``num_drafts=n,
draft_length=L`` is the tree of n chains of L tokens), any verifier of :func:`multidraft.verifier_names`:

1. Draft: the draft model reads the tokens it has not seen, which gives the draft law at the root
   (the last committed token); then once per depth it reads all nodes of that depth that have
   children. At each node the children are drawn jointly as ONE group by the verifier's scheme,
   ``v.draft(q(. | prefix), k, rng)`` with k the node's child slots; children that drew the same
   token are one node (identical prefixes are scored once), whose group is all their slots' children.
2. Target: ONE forward pass over the new token and every draft node gives ``p(. | prefix)`` at
   the root and after every node.
3. Verify from the root down: at each node its group is verified against ``p(. | node)``; the
   output is distributed as ``p(. | node)`` given everything before it, and if it equals a child
   the walk continues there; otherwise the round ends with that token. A leaf reached draws a
   bonus token from ``p``.

The law ``p`` (and ``q``) is what plain sampling would draw from: the logits processors (or
temperature / top-k / top-p) applied at every position with that position's own prefix.

Caches (see ``_cache``): each prompt is one row of both models' caches; the tree's nodes are slots
under a 4-D attention mask (each node sees its ancestors) with true position ids (sliding windows
applied by position), and the accepted path is kept by gathering the cache. Nothing is copied ``n``
times, no prompt is encoded twice, and no hole is ever left. Models whose cache this cannot keep
exactly (recurrent or chunked layers, flash/flex attention) are refused with a ValueError.

Degenerate draft laws (one token, e.g. greedy decoding; fewer tokens than drafts without
replacement) need no special case: the verifiers degrade losslessly themselves. Under a verifier
that takes a fixed ``n`` (``"spechub"``: 2) a group of one slot is verified by ``"sps"`` and a
merged node with more slots draws ``n`` of them.

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
# (the two entry points), _stats (what a call reports); _shape, _round, _slots, _cache, _laws and
# _oov serve them, and the subpackage planner (tree="auto" and each verifier's largest group).

#: The default verifier: Global Resolution ([GR] Algorithm 1 with the exact output correction), the
#: exact output law with acceptance within its bound of alpha* at the speed of a few passes over the
#: draft support, for groups of up to 6 drafts at any vocabulary (with draft_top_k="auto").
DEFAULT_VERIFIER = _setup.DEFAULT_VERIFIER

#: Options used when a verifier is given by name (none at present: every verifier's defaults; Global
#: Resolution without the max-flow fallback, whose network would stall the loop at large supports).
NAMED_OPTIONS = _setup.NAMED_OPTIONS

"""The planner of :mod:`multidraft.hf`: which token tree a round drafts, and how large a group each
verifier takes.

``tree="auto"`` picks, for each round, the token tree with the most expected tokens per second;
a fixed tree is checked against each verifier's largest group. What is ours and in no paper is
written up in docs/design/tree-search.md; the code cites its sections. One module per concept,
each importing only those listed above it:

- :mod:`~multidraft.hf.planner.checks`: the input checks the others share;
- :mod:`~multidraft.hf.planner.tokens`: one shape's expected tokens per round
  (:func:`expected_tokens`, the acceptance model after [Sequoia]);
- :mod:`~multidraft.hf.planner.costs`: the cost model, a shape's predicted wall time
  (:func:`round_seconds`) from cost curves, and a model's measured cost curve (:func:`measure_costs`);
- :mod:`~multidraft.hf.planner.search`: the best shape for every node count and depth limit
  (:func:`best_trees`, a dynamic programme over subtree sizes) and the most tokens per second
  over them (:func:`choose_tree`);
- :mod:`~multidraft.hf.planner.acceptance`: alpha(k) learnt from the run's statistics
  (:class:`AcceptanceEstimate`);
- :mod:`~multidraft.hf.planner.auto`: ``tree="auto"`` in the loop (:class:`AutoTree`, the cost
  curves kept per model);
- :mod:`~multidraft.hf.planner.budget`: each verifier's largest group at loop speed
  (:func:`largest_group`, :func:`check_group`; needs none of the above).

Also here, from the laws of the loop: :func:`truncate_draft` and :data:`AUTO_DRAFT_TOKENS`, the cut
of ``draft_top_k="auto"``, which sets the draft support the plans are made for (the support of
:func:`largest_group`; a draft law cut as the loop cuts it for an acceptance curve).
"""
from .._laws import AUTO_DRAFT_TOKENS, truncate_draft
from .acceptance import AcceptanceEstimate
from .auto import DEFAULT_NODE_BUDGET, MAX_AUTO_DEPTH, AutoTree, cost_curve, read_budget
from .budget import MAX_NODE_SUBSETS, check_group, largest_group
from .costs import Cost, measure_costs, round_seconds
from .search import TreeChoice, TreeTable, best_trees, choose_tree
from .tokens import expected_tokens

__all__ = ["expected_tokens", "Cost", "round_seconds", "measure_costs", "TreeTable", "best_trees", "TreeChoice",
           "choose_tree", "AcceptanceEstimate", "AutoTree", "cost_curve", "read_budget", "DEFAULT_NODE_BUDGET",
           "MAX_AUTO_DEPTH", "largest_group", "check_group", "MAX_NODE_SUBSETS", "AUTO_DRAFT_TOKENS",
           "truncate_draft"]

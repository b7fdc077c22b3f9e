"""Token trees in the generation benchmark: chains, trees and top-k trees by depth and node budget.

``python -m multidraft.bench --generation --trees [--depths 2,3,4,5,6] [--budgets 4,8,16,32]`` adds,
after the chain table, one row per (shape kind, depth D, node budget m) run inside
``target.generate(custom_generate=multidraft.hf.decode, tree=...)``:

- ``chain``: ``m // D`` chains of D tokens (at least one, at most the verifier's largest group;
  ``"sps"`` for one chain, else ``--tree-verifier``);
- ``tree``: the shape of at most m nodes and depth D with the most expected tokens under the
  acceptance by group size measured on the pair (``--dataset``: the exact acceptance of
  ``--tree-verifier`` at held-out contexts, the draft cut as the loop cuts it), i.i.d. drafts;
- ``topk tree``: the same search for ``"topk"`` (deterministic top-n children, positional model);
- ``auto``: ``tree="auto"`` with ``node_budget=m`` (one row per budget), whose last pick is shown.

Every run samples with ``top_k=50`` (transformers' default with ``do_sample=True``). Reported:
tokens per target pass (measured, and predicted by the acceptance model), draft nodes the
target scored per round, median wall time, speedup over ``target.generate``, and the speedup the
cost model predicts for a FLAT cost curve (a target pass costs one plain step whatever the tree: a
GPU's memory-bound pass) from the measured draft step and verification time. The shape search is
documented in docs/design/tree-search.md.
"""
from __future__ import annotations

from pathlib import Path
from typing import List, Sequence, Tuple

import numpy as np
import torch

import multidraft as md
from .. import hf
from ..hf.planner import (AUTO_DRAFT_TOKENS, best_trees, cost_curve, expected_tokens, largest_group, round_seconds,
                          truncate_draft)
from .dataset import load_next_token_pairs
from .timing import timed_runs

#: Depths and node budgets of the grid.
DEPTHS = (2, 3, 4, 5, 6)
BUDGETS = (4, 8, 16, 32)
#: Largest group the acceptance curve covers for the top-k shapes.
TOPK_GROUP = 16
#: Sampling's top-k in every run (transformers' default with do_sample=True), and in the acceptance curves.
TOP_K = 50


def pair_acceptance(dataset: Path, verifier, largest: int, contexts: int = 256, top_k=None) -> np.ndarray:
    """(largest,) mean exact acceptance alpha(k), k = 1..largest, of ``verifier`` (a name) at the
    first ``contexts`` held-out contexts of the pair's dataset (both laws cut to their ``top_k``
    tokens as sampling with that top-k does, then the draft cut as the loop cuts it,
    ``draft_top_k="auto"``); made nondecreasing (a verifier that gains nothing from a larger group
    would rather leave slots empty)."""
    pairs = load_next_token_pairs(dataset)
    p, q = truncate_draft(pairs.p[:contexts], top_k), truncate_draft(truncate_draft(pairs.q[:contexts], top_k), "auto")
    v = md.verifier(verifier)
    alpha = [float(np.mean(v.acceptance(p, q, k))) for k in range(1, largest + 1)]
    return np.maximum.accumulate(np.array(alpha))


def grid(acceptance: np.ndarray, topk_acceptance: np.ndarray, depths: Sequence[int], budgets: Sequence[int],
         verifier: str) -> List[Tuple[str, str, int, int, Tuple[int, ...]]]:
    """(kind, verifier, D, m, parents) of every fixed shape of the grid (module docstring)."""
    exchangeable = best_trees(acceptance, max(budgets), max(depths))
    positional = best_trees(topk_acceptance, max(budgets), max(depths), positional=True)
    rows = []
    for D in depths:
        for m in budgets:
            n = max(1, min(m // D, len(acceptance)))  # no group above the verifier's largest
            rows.append(("chain", "sps" if n == 1 else verifier, D, m, hf.Tree.chains(n, D).parents))
            rows.append(("tree", verifier, D, m, exchangeable.tree(m, D)))
            rows.append(("topk tree", "topk", D, m, positional.tree(m, D)))
    return rows


def flat_cost_speedup(parents, acceptance, positional: bool, draft_step: float, verify_per_token: float) -> float:
    """Predicted speedup over plain sampling when a target pass costs one plain step whatever the
    tree (time unit: the plain step): E[tokens] / (1 + draft passes x draft_step + verification)."""
    tokens = expected_tokens(parents, acceptance, positional)
    seconds = round_seconds(parents, lambda m: 1.0, lambda w: draft_step, verify_per_token, acceptance, positional)
    return tokens / seconds


def compare_trees(target, draft, prompt: torch.Tensor, new_tokens: int, repeats: int, dataset: Path,
                  depths: Sequence[int] = DEPTHS, budgets: Sequence[int] = BUDGETS,
                  verifier: str = "global_resolution", plain_seconds: float = None) -> List[dict]:
    """The rows of the tree table (module docstring); ``plain_seconds``: ``target.generate``'s
    median time for the same tokens (measured here when not given)."""
    widest = largest_group(md.verifier(verifier), AUTO_DRAFT_TOKENS) or TOPK_GROUP
    acceptance = pair_acceptance(dataset, verifier, min(widest, max(budgets)), top_k=TOP_K)
    topk_acceptance = pair_acceptance(dataset, "topk", TOPK_GROUP, top_k=TOP_K)
    passes = {"n": 0}
    hook = target.register_forward_hook(lambda *_: passes.__setitem__("n", passes["n"] + 1))
    common = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=True, top_k=TOP_K,
                  attention_mask=torch.ones_like(prompt), pad_token_id=target.generation_config.eos_token_id)
    try:
        if plain_seconds is None:
            plain_seconds, _, _ = timed_runs(lambda i: target.generate(prompt, **common), repeats, passes)
        with torch.inference_mode():
            draft_step = float(cost_curve(draft, prompt[0], 1)[1] / cost_curve(target, prompt[0], 1)[1])
        shapes = grid(acceptance, topk_acceptance, depths, budgets, verifier)
        shapes += [("auto", verifier, None, m, None) for m in budgets]
        rows = []
        for kind, name, D, m, parents in shapes:
            tree = "auto" if parents is None else hf.Tree(parents)
            extra = dict(node_budget=m) if parents is None else {}
            seconds, calls, outputs = timed_runs(lambda i: target.generate(
                prompt, custom_generate=hf.decode, tree=tree, verifier=name, seed=i, return_dict_in_generate=True,
                draft_model=draft, **extra, **common), repeats, passes)
            stats = [o.multidraft for o in outputs]
            used = stats[-1].tree
            curve, positional = (topk_acceptance, True) if name == "topk" else (acceptance, False)
            verify = sum(s.verify_seconds for s in stats) / sum(s.new_tokens for s in stats) / (plain_seconds / new_tokens)
            rows.append(dict(kind=kind, verifier=name, depth=hf.Tree(used).depth, budget=m, nodes=len(used),
                             parents=used, tokens_per_pass=repeats * new_tokens / calls,
                             predicted_tokens=expected_tokens(used, curve, positional),
                             nodes_per_round=sum(s.tree_nodes for s in stats) / sum(s.row_rounds for s in stats),
                             seconds=seconds, speedup=plain_seconds / seconds,
                             flat_speedup=flat_cost_speedup(used, curve, positional, draft_step, verify)))
    finally:
        hook.remove()
    return rows


def format_tree_rows(rows: List[dict]) -> str:
    lines = ["| shape | verifier | depth | budget | nodes | tokens per target pass (predicted) | nodes scored per "
             "round | wall time (s) | speedup | flat-cost speedup (predicted) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['kind']} | {r['verifier']} | {r['depth']} | {r['budget']} | {r['nodes']} | "
                     f"{r['tokens_per_pass']:.2f} ({r['predicted_tokens']:.2f}) | {r['nodes_per_round']:.1f} | "
                     f"{r['seconds']:.3f} | {r['speedup']:.2f} | {r['flat_speedup']:.2f} |")
    return "\n".join(lines)


def summary(rows: List[dict]) -> str:
    """The comparisons the tree benchmark reports: best tree vs one chain at depth 4 (tokens per pass), auto vs the
    best chain (wall time) and vs ``target.generate``."""
    chain4 = [r for r in rows if r["kind"] == "chain" and r["depth"] == 4 and r["nodes"] == 4]
    trees4 = [r for r in rows if r["kind"] in ("tree", "topk tree") and r["depth"] == 4]
    chains = [r for r in rows if r["kind"] == "chain"]
    autos = [r for r in rows if r["kind"] == "auto"]
    lines = []
    if chain4 and trees4:
        best = max(trees4, key=lambda r: r["tokens_per_pass"])
        lines.append(f"depth 4: best tree {best['kind']} m={best['budget']} {best['tokens_per_pass']:.2f} tokens per "
                     f"pass = {best['tokens_per_pass'] / chain4[0]['tokens_per_pass']:.2f}x one chain "
                     f"({chain4[0]['tokens_per_pass']:.2f})")
    if chains and autos:
        fastest = min(chains, key=lambda r: r["seconds"])
        best = min((r for r in rows if r["kind"] != "auto"), key=lambda r: r["seconds"])
        for r in autos:
            lines.append(f"auto m={r['budget']}: {r['seconds']:.3f} s = {fastest['seconds'] / r['seconds']:.2f}x the "
                         f"fastest chain (D={fastest['depth']}, m={fastest['budget']}), {best['seconds'] / r['seconds']:.2f}x "
                         f"the fastest fixed shape ({best['kind']} D={best['depth']} m={best['budget']}), "
                         f"{r['speedup']:.2f}x target.generate; its last pick {r['parents']}")
    return "\n".join(lines)

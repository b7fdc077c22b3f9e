"""Token trees in multidraft.hf: every shape and every verifier that takes groups is lossless.

The law of the first 3 tokens is checked against the target's enumerated sequence law (seeded
chi-square, as in test_hf.py) for balanced, unbalanced and chain shapes; greedy decoding must
equal `target.generate`; a one-hot draft must make every round's tree one path, each merged node
scored once; kept caches must equal re-encoding with the tree's attention mask and positions.
"""
import numpy as np
import pytest

pytest.importorskip("torch", reason="multidraft.hf needs torch and transformers: pip install 'multidraft[hf]'")
import torch

import multidraft as md
from multidraft import hf
from hf_models import FAMILIES, assert_follows, batch_and_rows, sequence_law, tiny_pair
from test_hf import LEFT_PADDED, MASK, PROMPT, SAMPLES

UNBALANCED = hf.Tree([-1, -1, 0, 0, 2, 1])  # a deep first child, a shallow second one
SHAPES = {"2x2": (2, 2), "3x1": (3, 1), "4x1x1": (4, 1, 1), "unbalanced": UNBALANCED}
GROUP_VERIFIERS = [name for name in md.verifier_names() if md.verifier(name).fixed_n != 1 and name != "naive"]


@pytest.fixture(scope="module")
def pairs():
    return {family: tiny_pair(family) for family in FAMILIES}


def law_cases():
    cases = []
    for i, name in enumerate(GROUP_VERIFIERS):
        shapes = ["2x2", "unbalanced"] if md.verifier(name).fixed_n == 2 else list(SHAPES)
        for j, shape in enumerate(shapes):
            cases.append((name, shape, FAMILIES[(i + j) % len(FAMILIES)]))
    return cases


@pytest.mark.parametrize("name, shape, family", law_cases())
def test_trees_follow_the_target_law(name, shape, family, pairs):
    target, draft = pairs[family]
    sequences, probs = sequence_law(target, PROMPT, 3, 0.8, None, 0.95)
    result = hf.generate(target, draft, torch.tensor([PROMPT] * SAMPLES), 3, tree=SHAPES[shape], verifier=name,
                         temperature=0.8, top_p=0.95, seed=hash((name, shape)) % 2**31)
    assert_follows(result.sequences[:, len(PROMPT):].numpy(), sequences, probs, target.config.vocab_size,
                   f"{name} {shape} {family}")
    tree = SHAPES[shape] if isinstance(SHAPES[shape], hf.Tree) else hf.Tree.branching(SHAPES[shape])
    assert result.stats.tree == tree.parents and result.stats.draft_length == tree.depth


@pytest.mark.parametrize("name, budget, family", [("global_resolution", 6, "llama"), ("spectr", 4, "gemma2"),
                                                  ("sps", 3, "qwen2")])
def test_auto_trees_follow_the_target_law(name, budget, family, pairs):
    """tree="auto" re-plans the shape from the run's statistics (rounds 1, 2, 4, ...): the shape
    depends on the past only, so every round stays exact."""
    target, draft = pairs[family]
    sequences, probs = sequence_law(target, PROMPT, 3, 1.0)
    result = hf.generate(target, draft, torch.tensor([PROMPT] * SAMPLES), 3, tree="auto", node_budget=budget,
                         verifier=name, seed=17)
    assert_follows(result.sequences[:, len(PROMPT):].numpy(), sequences, probs, target.config.vocab_size,
                   f"auto {name} {family}")
    shape = hf.Tree(result.stats.tree)
    assert shape.size <= budget and (name != "sps" or shape.widest_group() == 1)


@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_trees_are_the_target_greedy_output(family, pairs):
    target, draft = pairs[family]
    greedy = target.generate(LEFT_PADDED, attention_mask=MASK, max_new_tokens=14, pad_token_id=0, eos_token_id=None)
    for drafter in (draft, target):
        for tree in ((3, 2, 1), UNBALANCED, "auto"):
            ours = target.generate(LEFT_PADDED, attention_mask=MASK, max_new_tokens=14, pad_token_id=0,
                                   eos_token_id=None, custom_generate=hf.decode, draft_model=drafter, tree=tree)
            assert torch.equal(ours, greedy), tree


def peaked(model, scale=1e4):
    """A copy of ``model`` whose next-token law is one-hot in float64 (logits scaled up)."""
    import copy

    sharp = copy.deepcopy(model)
    with torch.no_grad():
        sharp.get_output_embeddings().weight.mul_(scale)
    return sharp


def test_a_one_hot_draft_scores_each_merged_node_once(pairs):
    """4 chains of 3 from a one-hot draft are one chain: 3 nodes per round (fewer only in the last
    rounds, near max_new_tokens), each read once by the target; the merged node of 4 chains draws
    its 4 slots' children as one group of 4 (of 8 below a (4, 2, 1) tree's merged second level)."""
    target, draft = pairs["llama"]
    sharp = peaked(draft)
    ids = torch.tensor([PROMPT])
    for tree, groups in ((None, {4}), ((4, 2, 1), {4, 8})):
        kwargs = dict(num_drafts=4, draft_length=3) if tree is None else dict(tree=tree)
        s = hf.generate(target, sharp, ids, 40, seed=0, verifier="otlp", **kwargs).stats
        assert 3 * (s.row_rounds - 2) <= s.tree_nodes <= 3 * s.row_rounds, tree
        assert s.target_positions == len(PROMPT) + s.row_rounds - 1 + s.tree_nodes
        assert set(np.flatnonzero(s.group_reached)) == groups, tree


@pytest.mark.parametrize("family", ["llama", "mistral", "gemma2", "gpt2"])
def test_kept_tree_caches_give_what_re_encoding_gives(family, pairs):
    target, draft = pairs[family]
    runs = [hf.generate(target, draft, LEFT_PADDED, 20, tree=UNBALANCED, verifier="spectr", seed=4,
                        attention_mask=MASK, top_p=0.95, kv_cache=kv_cache) for kv_cache in (True, False)]
    assert torch.equal(runs[0].sequences, runs[1].sequences)
    assert runs[0].stats.target_positions < runs[1].stats.target_positions


def test_tree_batches_equal_one_prompt_at_a_time(pairs):
    target, draft = pairs["qwen2"]
    _, _, rows = batch_and_rows(target, draft, 9, 11, tree=(3, 2), verifier="khisti", top_k=5)
    for row, single in rows:
        assert row == single


def test_tree_shapes():
    assert hf.Tree.branching((2, 2)).parents == (-1, -1, 0, 0, 1, 1)
    assert hf.Tree.chains(2, 3).parents == (-1, 0, 1, -1, 3, 4)
    assert UNBALANCED.depth == 3 and UNBALANCED.children[-1] == (0, 1) and UNBALANCED.widest_group() == 2
    assert hf.Tree.branching((3, 1)).depths == (1, 1, 1, 2, 2, 2)


@pytest.mark.parametrize("kwargs, message", [
    (dict(tree=(2, 2), num_drafts=2), "either 'tree'"),
    (dict(tree=(2, 0)), "ints >= 1"),
    (dict(tree=()), "non-empty"),
    (dict(tree=hf.Tree.branching((2, 3)), verifier="spechub"), "exactly 2"),
    (dict(tree=(1, 2), verifier="sps"), "exactly 1"),
    (dict(tree=(50, 50)), "more than 1024"),
    (dict(tree="bushy"), "'auto'"),
    (dict(tree=(2, 2), node_budget=8), "tree='auto' only"),
    (dict(tree="auto", node_budget=0), "node_budget"),
])
def test_bad_trees_raise_clear_errors(kwargs, message, pairs):
    target, draft = pairs["gpt2"]
    with pytest.raises(ValueError, match=message):
        hf.generate(target, draft, torch.tensor([PROMPT]), 4, **kwargs)


@pytest.mark.parametrize("parents, message", [([0], "parents\\[0\\]"), ([-1, 1], "parents\\[1\\]"), ([], "non-empty"),
                                              ([-1, -2], "parents\\[1\\]"), ([-1, 0.5], "parents\\[1\\]")])
def test_bad_parents_raise_clear_errors(parents, message):
    with pytest.raises(ValueError, match=message):
        hf.Tree(parents)


def wide_pair(V=3000):
    """A tiny Llama pair over a vocabulary of V tokens (the defaults must work at any V)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    models = []
    for seed, layers in ((0, 2), (1, 1)):
        torch.manual_seed(seed)
        config = LlamaConfig(vocab_size=V, hidden_size=16, intermediate_size=32, num_attention_heads=2,
                             num_key_value_heads=1, num_hidden_layers=layers, max_position_embeddings=64)
        models.append(LlamaForCausalLM(config).eval())
    return models


def test_defaults_work_at_a_large_vocabulary_and_slow_requests_are_refused_at_once():
    target, draft = wide_pair()
    calls = []
    target.register_forward_hook(lambda *args: calls.append(1))
    ids = torch.tensor([PROMPT])
    for kwargs in (dict(num_drafts=4), dict(tree=(6, 2)), dict(num_drafts=9)):
        s = hf.generate(target, draft, ids, 12, seed=0, **kwargs).stats
        assert s.verifier == "global_resolution" and s.new_tokens == 12
        assert np.flatnonzero(s.group_reached).max() <= 6  # larger groups are drawn at Global Resolution's 6
    calls.clear()
    for kwargs in (dict(verifier="otlp", num_drafts=4, draft_top_k=None), dict(verifier="otlp", num_drafts=4),
                   dict(verifier="otlp", tree=(8, 1), draft_top_k=64)):
        with pytest.raises(ValueError, match="per node at loop speed"):
            hf.generate(target, draft, ids, 12, seed=0, **kwargs)
    assert not calls  # refused before any forward pass
    s = hf.generate(target, draft, ids, 6, seed=0, verifier="otlp", num_drafts=4, draft_top_k=12).stats
    assert s.new_tokens == 6


def test_auto_draft_truncation_keeps_the_mass_it_promises():
    from multidraft.hf._laws import AUTO_DRAFT_MASS, AUTO_DRAFT_TOKENS, truncate_draft

    rng = np.random.default_rng(0)
    for scale in (0.1, 1.0, 4.0, 20.0):
        q = np.exp(rng.standard_normal((50, 500)) * scale)
        q /= q.sum(1, keepdims=True)
        cut = truncate_draft(q, "auto")
        np.testing.assert_allclose(cut.sum(1), 1.0)
        kept = cut > 0
        for row, keep in zip(q, kept):
            order = np.sort(row)[::-1]
            k = keep.sum()
            assert k <= AUTO_DRAFT_TOKENS
            assert k == AUTO_DRAFT_TOKENS or order[:k].sum() >= AUTO_DRAFT_MASS  # enough mass...
            assert k == 1 or order[:k - 1].sum() < AUTO_DRAFT_MASS  # ... with no token to spare
            assert row[keep].min() >= row[~keep].max()  # the most probable ones
    one_hot = np.eye(5)[[2]]
    np.testing.assert_array_equal(truncate_draft(one_hot, "auto"), one_hot)


class AnyCount:
    """A stand-in verifier taking any number of drafts (the round's bookkeeping reads ``fixed_n`` only)."""

    fixed_n = None


def add(tree, node: int, draws):
    """Give ``node`` the group of the first k of ``draws``, k as the tree sizes it."""
    verifier, k = tree.group_verifier(node, AnyCount())
    tree.add_group(node, verifier, None, np.array(draws[:k]))


def test_a_round_merges_equal_draws_and_draws_their_children_together():
    from multidraft.hf._round import RoundTree

    tree = RoundTree(hf.Tree.branching((3, 2)), depth_limit=2)
    add(tree, 0, [5, 7, 5])                         # slots 0 and 2 drew 5: one node
    assert tree.tokens == [-1, 5, 7] and tree.slots[1:] == [[0, 2], [1]]
    assert tree.child_slots(1) == [3, 4, 7, 8] and tree.child_slots(2) == [5, 6]
    add(tree, 1, [1, 1, 2, 1])                      # a group of 4: two distinct children
    assert tree.tokens[3:] == [1, 2] and tree.slots[3:] == [[3, 4, 8], [7]]
    assert tree.child_slots(3) == []                # the depth limit
    assert tree.path(4) == [5, 2] and tree.depths == [0, 1, 1, 2, 2]
    table = tree.ancestors(6)
    assert table[4].tolist() == [True, True, False, False, True, False, False]
    assert table[6].tolist() == [True] + [False] * 5 + [True]  # padding sees the committed tokens and itself
    capped = RoundTree(hf.Tree.chains(4, 2), depth_limit=2, group_cap=2)
    add(capped, 0, [3, 3, 3, 3])                    # the cap: 2 of the 4 slots drawn
    assert capped.tokens == [-1, 3] and capped.slots[1] == [0, 2] and len(capped.groups[0].drafts) == 2


def test_the_same_models_from_several_threads_give_what_one_thread_gives(pairs):
    """Each call keeps its own caches and round trees; models, verifiers and shapes are shared."""
    from concurrent.futures import ThreadPoolExecutor

    target, draft = pairs["mistral"]
    v = md.verifier("rrs_without_replacement")
    run = lambda seed: hf.generate(target, draft, LEFT_PADDED, 12, attention_mask=MASK, tree=UNBALANCED, verifier=v,
                                   seed=seed).sequences
    expected = [run(seed) for seed in range(4)]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(run, range(4)))
    assert all(torch.equal(a, b) for a, b in zip(got, expected))


def test_each_verifier_s_largest_group_at_loop_speed():
    """From each verifier's node_subsets: otlp's network over subsets of at most n of the support,
    Global Resolution's summed groups up to 6, khisti's pairwise weights, fixed n, the others any."""
    from multidraft.hf.planner import largest_group

    expected = {("otlp", 32): 2, ("otlp", 16): 4, ("otlp", 3): None, ("global_resolution", 32): 6,
                ("global_resolution", 8): None, ("khisti", 100): 1, ("khisti", 50): None, ("rrs", 32000): None,
                ("spectr", 10): None, ("sps", 32): 1, ("spechub", 32): 2, ("topk", 32000): None}
    for (name, support), cap in expected.items():
        assert largest_group(md.verifier(name), support) == cap, (name, support)

"""multidraft.hf.planner: the shape search behind tree="auto".

Oracles: closed forms for chains and stars; EVERY parent tuple with at most 7 nodes (5914 trees),
evaluated here independently of the module, for random and adversarial acceptance curves (ties,
zeros, ones, K smaller than the tree) under both position models, against best_trees and
choose_tree; simulated Bernoulli observations for the estimator; a tiny Llama for measure_costs.
"""
import itertools
import threading

import numpy as np
import pytest

from multidraft.hf.planner import (AcceptanceEstimate, best_trees, choose_tree, expected_tokens, measure_costs,
                                    round_seconds)

MAX_NODES = 7
TOL = 1e-12


# ----------------------------------------------------------------------------- the exhaustive oracle

def _structure(parents):
    """(depth, group size of the parent, position in the group) per node, and passes' widths."""
    depth, size, position = [], [], []
    children = {}
    for i, parent in enumerate(parents):
        children.setdefault(parent, []).append(i)
        depth.append(1 if parent < 0 else depth[parent] + 1)
    for i, parent in enumerate(parents):
        size.append(len(children[parent]))
        position.append(children[parent].index(i))
    D = max(depth, default=0)
    widths = [0] * D
    for node in children:
        widths[0 if node < 0 else depth[node]] += 1
    return depth, size, position, widths


@pytest.fixture(scope="module")
def every_tree():
    """All parent tuples with M <= 7 as padded arrays (a padding node has weight 0)."""
    trees = [()]
    for M in range(1, MAX_NODES + 1):
        trees += list(itertools.product(*[range(-1, i) for i in range(M)]))
    n = len(trees)
    parents = np.full((n, MAX_NODES), -1)
    size = np.zeros((n, MAX_NODES), int)
    position = np.zeros((n, MAX_NODES), int)
    real = np.zeros((n, MAX_NODES), bool)
    widths = np.zeros((n, MAX_NODES), int)
    nodes, depths, groups = np.zeros(n, int), np.zeros(n, int), np.zeros(n, int)
    for t, tree in enumerate(trees):
        depth, s, p, w = _structure(tree)
        M = len(tree)
        parents[t, :M], size[t, :M], position[t, :M], real[t, :M] = tree, s, p, True
        widths[t, :len(w)] = w
        nodes[t], depths[t], groups[t] = M, max(depth, default=0), max(s, default=0)
    return dict(trees=trees, parents=parents, size=size, position=position, real=real, widths=widths,
                nodes=nodes, depths=depths, groups=groups)


def oracle_tokens(every, alpha, positional):
    """Expected tokens of every tree (NaN where a group is larger than K), straight from the model."""
    K = len(alpha)
    a = np.concatenate([[0.0], alpha])  # a[k] = alpha(k), a[0] = 0
    size = np.minimum(every["size"], K)
    if positional:
        weight = a[np.minimum(every["position"] + 1, K)] - a[np.minimum(every["position"], K)]
    else:
        weight = a[size] / np.maximum(size, 1)
    weight = np.where(every["real"], weight, 0.0)
    reach = np.zeros_like(weight)
    rows = np.arange(len(weight))
    for i in range(MAX_NODES):
        parent = every["parents"][:, i]
        above = np.where(parent >= 0, reach[rows, np.maximum(parent, 0)], 1.0)
        reach[:, i] = weight[:, i] * above
    tokens = 1.0 + reach.sum(axis=1)
    return np.where(every["groups"] <= K, tokens, np.nan)


def curves(seed, count):
    """Random nondecreasing curves with the adversarial ones: ties, zeros, ones, short K."""
    rng = np.random.default_rng(seed)
    out = [np.zeros(3), np.ones(4), np.array([1.0]), np.array([0.3]), np.array([0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]),
           np.array([0.0, 0.0, 0.9]), np.array([0.2, 1.0, 1.0, 1.0]), np.array([1 - 1e-12] * 7)]
    for _ in range(count):
        K = int(rng.integers(1, MAX_NODES + 1))
        alpha = np.sort(rng.random(K))
        if rng.random() < 0.3:
            alpha = np.round(alpha, 1)  # ties
        if rng.random() < 0.2:
            alpha[-1] = 1.0
        out.append(alpha)
    return out


CURVES = curves(seed=5, count=30)


# ----------------------------------------------------------------------------- expected_tokens

@pytest.mark.parametrize("positional", [False, True])
def test_expected_tokens_chain_and_star_closed_forms(positional):
    alpha = np.array([0.6, 0.7, 0.85, 0.9])
    for M in range(0, 6):
        chain = tuple(range(-1, M - 1))
        assert expected_tokens(chain, alpha, positional) == pytest.approx(sum(0.6 ** j for j in range(M + 1)), abs=TOL)
    for k in range(1, 5):
        assert expected_tokens((-1,) * k, alpha, positional) == pytest.approx(1 + alpha[k - 1], abs=TOL)
    # root with two children, the first carrying a chain of two
    tree = (-1, -1, 0, 2)
    first, second = (alpha[0], alpha[1] - alpha[0]) if positional else (alpha[1] / 2, alpha[1] / 2)
    expect = 1 + first * (1 + 0.6 + 0.36) + second
    assert expected_tokens(tree, alpha, positional) == pytest.approx(expect, abs=TOL)


@pytest.mark.parametrize("positional", [False, True])
def test_expected_tokens_matches_the_oracle_on_every_small_tree(every_tree, positional):
    alpha = np.array([0.4, 0.55, 0.6, 0.7, 0.7, 0.8, 0.95])
    tokens = oracle_tokens(every_tree, alpha, positional)
    for t in range(0, len(every_tree["trees"]), 7):
        assert expected_tokens(every_tree["trees"][t], alpha, positional) == pytest.approx(tokens[t], abs=TOL)


# ----------------------------------------------------------------------------- best_trees

@pytest.mark.parametrize("positional", [False, True])
@pytest.mark.parametrize("case", range(len(CURVES)))
def test_best_trees_matches_exhaustive_enumeration(every_tree, case, positional):
    alpha = CURVES[case]
    tokens = oracle_tokens(every_tree, alpha, positional)
    table = best_trees(alpha, MAX_NODES, MAX_NODES, positional)
    assert table.values.shape == (MAX_NODES + 1, MAX_NODES + 1)
    for m in range(MAX_NODES + 1):
        for d in range(MAX_NODES + 1):
            fits = (every_tree["nodes"] == m) & (every_tree["depths"] <= d) & np.isfinite(tokens)
            if not fits.any():
                assert table.values[m, d] == -np.inf, (m, d)
                continue
            assert table.values[m, d] == pytest.approx(tokens[fits].max(), abs=TOL), (m, d)
            tree = table.tree(m, d)
            depth, size, _, widths = _structure(tree)
            assert len(tree) == m and max(depth, default=0) <= d and max(size, default=0) <= len(alpha)
            assert all(parent < i for i, parent in enumerate(tree))
            assert depth == sorted(depth)  # breadth-first: every depth a contiguous run
            assert expected_tokens(tree, alpha, positional) == pytest.approx(table.values[m, d], abs=TOL)
            assert list(table.widths[m, d, :len(widths)]) == widths and not table.widths[m, d, len(widths):].any()


@pytest.mark.parametrize("positional", [False, True])
def test_best_trees_rebuilds_trees_worth_their_values_beyond_enumeration(positional):
    """Budget 12, depth 5, continuous random curves: near-ties between group sizes are common, and
    every rebuilt tree must be worth exactly its table entry."""
    rng = np.random.default_rng(11 + positional)
    for _ in range(60):
        alpha = np.sort(rng.random(int(rng.integers(1, 11))))
        table = best_trees(alpha, 12, 5, positional)
        finite = np.where(np.isfinite(table.values), table.values, -1.0)
        assert np.all(np.diff(finite, axis=1) >= 0)  # a looser depth limit never loses
        for m, d in zip(*np.nonzero(np.isfinite(table.values))):
            tree = table.tree(int(m), int(d))
            assert expected_tokens(tree, alpha, positional) == pytest.approx(table.values[m, d], abs=TOL)
            widths = _structure(tree)[3]
            assert list(table.widths[m, d, :len(widths)]) == widths and not table.widths[m, d, len(widths):].any()


def test_best_trees_depth_limit_above_the_budget_and_long_curves():
    alpha = 1 - 0.5 ** np.arange(1, 40)
    table = best_trees(alpha, 3, 6)
    assert table.values.shape == (4, 7)
    assert np.array_equal(table.values[:, 3], table.values[:, 6])
    assert table.values[3, 1] == pytest.approx(1 + alpha[2], abs=TOL)  # a star of three


# ----------------------------------------------------------------------------- costs and the choice

def test_round_seconds_counts_one_draft_pass_per_depth():
    target = np.arange(1.0, 10.0)  # target[m] = m + 1 seconds
    draft = np.array([99.0, 0.1, 0.25, 0.5, 0.75])  # entry 0 unused
    tree = (-1, -1, 0, 1, 2)  # passes: root (1), depth 1 (nodes 0 and 1), depth 2 (node 2)
    assert round_seconds(tree, target, draft) == pytest.approx(6 + 0.1 + 0.25 + 0.1, abs=TOL)
    assert round_seconds(tree, lambda m: m + 1.0, lambda w: draft[w]) == pytest.approx(6.45, abs=TOL)
    alpha = [0.5, 0.6]
    with_verify = round_seconds(tree, target, draft, verify_cost=0.01, acceptance=alpha)
    assert with_verify == pytest.approx(6.45 + 0.01 * expected_tokens(tree, alpha), abs=TOL)
    assert round_seconds((), target, draft) == 1.0  # no drafts: one target pass over the new token


@pytest.mark.parametrize("positional", [False, True])
@pytest.mark.parametrize("case", range(0, len(CURVES), 3))
def test_choose_tree_against_every_small_tree(every_tree, case, positional):
    alpha = CURVES[case]
    rng = np.random.default_rng(case)
    tokens = oracle_tokens(every_tree, alpha, positional)
    for flat_draft in (True, False):
        target = np.cumsum(rng.random(MAX_NODES + 1) * rng.choice([0.01, 1.0]))
        target += rng.random() + 1e-3
        draft = np.full(MAX_NODES // 2 + 1, rng.random() * 0.3) if flat_draft else rng.random(MAX_NODES // 2 + 1)
        verify = rng.choice([0.0, 0.05])
        for max_depth in (1, 3, MAX_NODES):
            choice = choose_tree(alpha, target, draft, MAX_NODES, max_depth, positional, verify)
            seconds = (target[every_tree["nodes"]] + np.where(every_tree["widths"] > 0, draft[every_tree["widths"]],
                                                              0.0).sum(axis=1) + verify * tokens)
            fits = (every_tree["nodes"] >= 1) & (every_tree["depths"] <= max_depth) & np.isfinite(tokens)
            best = (tokens / seconds)[fits].max()
            assert choice.tokens_per_second <= best * (1 + TOL)
            assert best <= choice.tokens_per_second * (1 + choice.gap_bound) * (1 + TOL)
            if flat_draft:  # the pick is exactly optimal and the bound says so
                assert choice.tokens_per_second == pytest.approx(best, rel=TOL) and choice.gap_bound < 1e-9
            assert choice.tokens == pytest.approx(expected_tokens(choice.parents, alpha, positional), abs=TOL)
            assert choice.seconds == pytest.approx(
                round_seconds(choice.parents, target, draft, verify, alpha, positional), rel=TOL)
            assert choice.nodes == len(choice.parents) and choice.depth <= max_depth


@pytest.mark.parametrize("positional", [False, True])
def test_flat_cost_gives_the_largest_tree_and_steep_cost_a_single_node(positional):
    alpha = 1 - 0.4 ** (np.arange(1, 17) ** 0.6)
    budget = 24
    flat = choose_tree(alpha, np.full(budget + 1, 0.02), np.zeros(budget // 2 + 1), budget, 6, positional)
    assert flat.nodes == budget and flat.tokens == pytest.approx(flat.table.values[1:, 1:].max(), abs=TOL)
    assert flat.gap_bound == 0.0
    steep = choose_tree(alpha, 0.02 * np.arange(1, budget + 2), np.full(budget // 2 + 1, 1e-4), budget, 6, positional)
    assert steep.parents == (-1,)
    nothing = choose_tree(np.zeros(4), np.full(budget + 1, 0.02), np.zeros(budget // 2 + 1), budget, 6, positional)
    assert nothing.parents == (-1,)  # no tree adds tokens: the smallest, on the tie


def test_a_costly_draft_pass_gives_a_shallow_wide_tree():
    alpha = np.array([0.5, 0.7, 0.8, 0.85, 0.88, 0.9, 0.91, 0.92])
    choice = choose_tree(alpha, np.full(9, 0.01), np.full(5, 0.05), 8, 8)
    assert choice.depth == 1 and choice.parents == (-1,) * 8  # one draft pass, every node at the root


# ----------------------------------------------------------------------------- the estimator

def prior_curve(K, a=0.5, gamma=0.5):
    return 1 - (1 - a) ** (np.arange(1, K + 1) ** gamma)


def test_estimate_without_data_is_the_prior():
    assert np.allclose(AcceptanceEstimate().curve(7), prior_curve(7), atol=1e-15)
    assert np.allclose(AcceptanceEstimate(prior=(0.7, 1.0)).curve(3), prior_curve(3, 0.7, 1.0), atol=1e-15)


def test_estimate_converges_to_the_true_curve():
    truth = np.array([0.55, 0.7, 0.78, 0.82])
    rng = np.random.default_rng(1)
    estimate = AcceptanceEstimate()
    for k, alpha in enumerate(truth, start=1):
        for accepted in rng.random(20000) < alpha:
            estimate.observe(k, bool(accepted))
    curve = estimate.curve(8)
    assert np.abs(curve[:4] - truth).max() < 0.02
    assert np.all(np.diff(curve) >= 0) and curve[-1] <= 1.0 and curve[4] >= curve[3]
    exact = AcceptanceEstimate()
    for _ in range(400):
        for k, alpha in enumerate(truth, start=1):
            exact.observe_exact(k, alpha)
    assert np.abs(exact.curve(4) - truth).max() < 0.01


def test_estimate_is_monotone_on_adversarial_data():
    rng = np.random.default_rng(2)
    for case in range(40):
        estimate = AcceptanceEstimate(prior=(rng.uniform(0.05, 0.95), rng.uniform(0, 2)),
                                      prior_weight=rng.uniform(0.1, 10))
        for _ in range(int(rng.integers(0, 60))):
            k = int(rng.integers(1, 9))
            if rng.random() < 0.5:
                estimate.observe(k, bool(rng.random() < 1.0 / k))  # larger groups accepted LESS often
            else:
                estimate.observe_exact(k, float(rng.choice([0.0, 1.0, rng.random()])))
        for K in (1, 5, 12):
            curve = estimate.curve(K)
            assert curve.shape == (K,) and np.all(np.isfinite(curve))
            assert np.all(np.diff(curve) >= 0) and curve.min() >= 0 and curve.max() <= 1
            best_trees(curve, 4, 3)  # accepted as it is


def test_estimate_extrapolates_unseen_sizes_from_what_was_seen():
    estimate = AcceptanceEstimate()
    for accepted in np.random.default_rng(3).random(300) < 0.9:
        estimate.observe(1, bool(accepted))
    curve = estimate.curve(6)
    assert abs(curve[0] - 0.9) < 0.05 and np.all(np.diff(curve) >= 0) and curve[1] > curve[0]


def test_estimate_counts_from_several_threads():
    estimate = AcceptanceEstimate()

    def work():
        for i in range(500):
            estimate.observe(1 + i % 3, i % 2 == 0)
            if i % 25 == 0:
                estimate.curve(4)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    groups, accepted = estimate.counts()
    assert groups.sum() == 2000 and accepted.sum() == 1000


def test_estimate_rejects_bad_observations():
    estimate = AcceptanceEstimate()
    for call, message in [(lambda: estimate.observe(0, True), "'k' must be >= 1"),
                          (lambda: estimate.observe(1.5, True), "'k' must be an integer"),
                          (lambda: estimate.observe(2, "yes"), "'accepted' must be a bool"),
                          (lambda: estimate.observe_exact(2, 1.5), "'alpha' must be a probability"),
                          (lambda: estimate.observe_exact(2, float("nan")), "'alpha' must be a probability"),
                          (lambda: estimate.curve(0), "'K' must be >= 1"),
                          (lambda: AcceptanceEstimate(prior=(1.0, 0.5)), "'prior' must be"),
                          (lambda: AcceptanceEstimate(prior_weight=0), "prior_weight")]:
        with pytest.raises(ValueError, match=message):
            call()


# ----------------------------------------------------------------------------- errors

@pytest.mark.parametrize("call, message", [
    (lambda: best_trees([0.5, 0.4], 4, 2), "nondecreasing"),
    (lambda: best_trees([0.5, 1.2], 4, 2), r"acceptance\[1\] = 1.2 is not a probability"),
    (lambda: best_trees([], 4, 2), "non-empty"),
    (lambda: best_trees([[0.5]], 4, 2), "1-D"),
    (lambda: best_trees([0.5], 0, 2), "'budget' must be >= 1"),
    (lambda: best_trees([0.5], 2.0, 2), "'budget' must be an integer"),
    (lambda: best_trees([0.5], 2, 0), "'max_depth' must be >= 1"),
    (lambda: best_trees([0.5], 10 ** 6, 2), "'budget' must be <= 1024"),
    (lambda: best_trees([0.5], 2, 10 ** 6), "'max_depth' must be <= 64"),
    (lambda: best_trees([0.5], 2, 2).tree(3, 2), "outside the table"),
    (lambda: best_trees([0.5], 2, 2).tree(2, 1), "no tree has 2 nodes within depth 1"),
    (lambda: expected_tokens((-1, 1), [0.5]), r"parents\[1\] = 1 must be -1"),
    (lambda: expected_tokens((-1, -1), [0.5]), "group has 2 children"),
    (lambda: expected_tokens((-1, 0.5), [0.5]), "integers"),
    (lambda: choose_tree([0.5], np.ones(4), np.ones(3), 4), r"'target_cost' has 4 entries but target_cost\[4\]"),
    (lambda: choose_tree([0.5], np.ones(5), np.ones(2), 4), r"'draft_cost' has 2 entries but draft_cost\[2\]"),
    (lambda: choose_tree([0.5], np.zeros(5), np.ones(3), 4), r"target_cost\[0\] = 0.0 must be"),
    (lambda: choose_tree([0.5], np.ones(5), -np.ones(3), 4), r"draft_cost\[1\] = -1.0 must be"),
    (lambda: choose_tree([0.5], np.ones(5), np.ones(3), 4, verify_cost=-1), "verify_cost"),
    (lambda: round_seconds((-1,), np.ones(2), np.ones(2), verify_cost=0.1), "needs acceptance"),
    (lambda: round_seconds((-1,), lambda m: float("nan"), np.ones(2)), r"target_cost\[0\] = nan"),
])
def test_bad_inputs_raise_value_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# ----------------------------------------------------------------------------- measure_costs

def test_measure_costs_on_a_tiny_llama_leaves_the_cache_as_it_was():
    torch = pytest.importorskip("torch")
    from transformers import DynamicCache
    from hf_models import tiny_model
    from multidraft.hf._cache import cache_keyword

    model = tiny_model("llama", 0)
    context = torch.tensor([[1, 2, 3, 4, 5, 6]])
    costs = measure_costs(model, context[0], [1, 3, 5], repeats=2)
    assert costs.shape == (3,) and np.all(np.isfinite(costs)) and np.all(costs > 0)
    cache = DynamicCache()
    with torch.inference_mode():
        model(input_ids=context, use_cache=True, **{cache_keyword(model): cache})
    before = [(layer.keys.clone(), layer.values.clone()) for layer in cache.layers]
    costs = measure_costs(model, context, np.arange(1, 5), repeats=1, cache=cache)
    assert costs.shape == (4,) and np.all(np.isfinite(costs)) and np.all(costs > 0)
    assert cache.get_seq_length() == 6
    for (keys, values), layer in zip(before, cache.layers):
        assert torch.equal(keys, layer.keys) and torch.equal(values, layer.values)
    for bad, message in [(dict(sizes=[0]), "'sizes' must be"), (dict(sizes=[1], repeats=0), "'repeats' must be >= 1"),
                         (dict(context_ids=torch.zeros(2, 2, 2, dtype=torch.long)), "'context_ids' must be"),
                         (dict(cache=DynamicCache()), "'cache' holds 0 positions")]:
        arguments = dict(context_ids=context, sizes=[1]) | bad
        with pytest.raises(ValueError, match=message):
            measure_costs(model, **arguments)


def test_counts_observe_as_many_single_groups():
    one, many = AcceptanceEstimate(), AcceptanceEstimate()
    for k, groups, accepted in ((1, 7, 5), (3, 4, 4), (2, 0, 0), (5, 9, 0)):
        for i in range(groups):
            one.observe(k, i < accepted)
        many.observe_counts(k, groups, accepted)
    np.testing.assert_array_equal(one.counts()[0], many.counts()[0])
    np.testing.assert_array_equal(one.counts()[1], many.counts()[1])
    np.testing.assert_array_equal(one.curve(6), many.curve(6))
    with pytest.raises(ValueError, match="must be at most 'groups'"):
        many.observe_counts(2, 3, 4)


def test_the_auto_planner_models_top_k_drafts_as_positional_whatever_the_verifier(monkeypatch):
    """tree="auto" plans with the positional model exactly when the verifier draws top-k drafts
    (its scheme), the "topk" verifier or another one given scheme="topk"."""
    import multidraft as md
    from multidraft.hf.planner import auto

    monkeypatch.setattr(auto, "cost_curve", lambda model, context, largest: np.linspace(1.0, 2.0, largest + 1))
    for verifier, positional in [(md.verifier("topk"), True), (md.verifier("otlp", scheme="topk"), True),
                                 (md.verifier("otlp"), False), (md.verifier("global_resolution"), False)]:
        assert auto.AutoTree(None, None, verifier, 8, None, None).positional is positional, verifier.name

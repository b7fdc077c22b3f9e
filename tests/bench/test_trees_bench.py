"""The token-tree rows of the generation benchmark run end to end on tiny models."""
import json

import numpy as np
import pytest

pytest.importorskip("torch", reason="the generation benchmark needs torch and transformers")
import torch

import multidraft as md
from multidraft import hf
from multidraft.bench import trees
from hf_models import tiny_pair
PROMPT = [1, 2, 3]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """A next-token-pairs file of the tiny Llama pair's laws at a few contexts."""
    target, draft = tiny_pair("llama")
    ids = torch.tensor([[1, 2, 3, 4, 5, 6, 7, 8, 9]])
    with torch.inference_mode():
        logits = target(ids).logits[0]
        p, q = torch.softmax(logits.double(), -1).numpy(), torch.softmax(draft(ids).logits[0].double(), -1).numpy()
    path = tmp_path_factory.mktemp("pairs") / "pairs.npz"
    np.savez(path, p=p, q=q, target_logits=logits.numpy(), token_counts=np.ones(p.shape[1], np.int64),
             meta=np.array(json.dumps({"corpus": "tiny"})))
    return path


def test_pair_acceptance_is_the_mean_exact_acceptance(dataset):
    alpha = trees.pair_acceptance(dataset, "topk", 4)
    data = np.load(dataset)
    p, q = data["p"], hf._laws.truncate_draft(data["q"], "auto")
    expected = [np.mean(md.verifier("topk").acceptance(p, q, k)) for k in range(1, 5)]
    np.testing.assert_allclose(alpha, np.maximum.accumulate(expected))
    assert np.all(np.diff(alpha) >= 0)


def test_the_grid_has_each_kind_at_each_depth_and_budget(dataset):
    alpha = trees.pair_acceptance(dataset, "global_resolution", 4)
    rows = trees.grid(alpha, trees.pair_acceptance(dataset, "topk", 4), [2, 3], [4, 6], "global_resolution")
    assert len(rows) == 3 * 2 * 2
    for kind, name, D, m, parents in rows:
        shape = hf.Tree(parents)
        assert shape.depth <= D and shape.size <= m, (kind, D, m)
        if kind == "chain":
            assert shape == hf.Tree.chains(max(1, m // D), D) and name == ("sps" if m // D <= 1 else "global_resolution")


def test_tree_rows_run_on_tiny_models(dataset):
    target, draft = tiny_pair("llama")
    rows = trees.compare_trees(target, draft, torch.tensor([PROMPT]), new_tokens=5, repeats=1, dataset=dataset,
                               depths=[2], budgets=[4])
    assert [r["kind"] for r in rows] == ["chain", "tree", "topk tree", "auto"]
    for r in rows:
        assert r["tokens_per_pass"] >= 1 and 1 <= r["predicted_tokens"] <= 1 + r["nodes"]
        assert 1 <= r["nodes_per_round"] <= 4 and r["seconds"] > 0 and r["flat_speedup"] > 0
    table = trees.format_tree_rows(rows)
    assert table.count("\n") == 1 + len(rows) and "| topk tree | topk | " in table
    assert "auto m=4" in trees.summary(rows)


def test_many_rounds_reports_a_mean_and_its_error():
    from multidraft.bench.generation import format_many_rounds, many_rounds

    target, draft = tiny_pair("gpt2")
    prompts = torch.tensor([[0, 1, 2, 3], [4, 5, 6, 7]])
    rows = many_rounds(target, draft, prompts, torch.ones_like(prompts), [("sps", 1), ("otlp", 2)], 3, 6, 3, None)
    for r in rows:
        assert 1 <= r["tokens_per_pass"] <= 4 and r["standard_error"] >= 0
        assert r["reached"][0] > 0 and np.all(r["acceptance"] <= 1)
        assert r["seconds"] > r["draft_seconds"] > 0 and r["seconds"] > r["verify_seconds"] > 0
    assert format_many_rounds(rows).count("\n") == 3

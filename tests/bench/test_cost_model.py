"""The speculative-decoding cost model (multidraft.bench.cost_model) against hand computations."""
import numpy as np
import pytest

from multidraft.bench import cost_model as cm


def test_speedup_matches_a_hand_computation():
    # a = (0.8, 0.5): E = 1 + 0.8 + 0.8 * 0.5 = 2.2 tokens; a round costs 2 * 0.1 + 1 + 0.05 = 1.25
    assert cm.expected_tokens([0.8, 0.5]) == pytest.approx(2.2)
    assert cm.round_cost(2, 0.1, 0.05) == pytest.approx(1.25)
    assert cm.predicted_speedup([0.8, 0.5], 0.1, 0.05) == pytest.approx(2.2 / 1.25)


def test_constant_acceptance_gives_the_geometric_series():
    alpha, L = 0.7, 5  # Leviathan et al.: (1 - alpha^(L + 1)) / (1 - alpha)
    assert cm.expected_tokens([alpha] * L) == pytest.approx((1 - alpha ** (L + 1)) / (1 - alpha))
    assert cm.expected_tokens([0.0] * L) == 1.0 and cm.expected_tokens([1.0] * L) == L + 1


def test_best_draft_length():
    # L = 1: 1.9 / 1.2 = 1.58; L = 2: 2.71 / 1.4 = 1.94; L = 3: 2.791 / 1.6 = 1.74
    L, speedup = cm.best_draft_length([0.9, 0.9, 0.1], 0.2)
    assert L == 2 and speedup == pytest.approx(2.71 / 1.4)


def test_measured_costs_from_generation_statistics():
    hf = pytest.importorskip("multidraft.hf")
    stats = hf.GenerationStats(num_drafts=2, draft_length=4, verifier="otlp", target_calls=10, draft_seconds=0.8,
                               target_seconds=1.0, verify_seconds=0.3)
    costs = cm.measured_costs(stats, 0.05)  # a draft pass 0.02 s, a target pass 0.1 s, verification 0.03 s per round
    assert costs.cost_ratio == pytest.approx(0.2) and costs.overhead == pytest.approx(0.3)
    assert costs.target_step == pytest.approx(2.0)  # a target pass costs two plain steps of 0.05 s
    assert cm.predicted_speedup([0.8, 0.5], 0.1, 0.05, target_step=2.0) == pytest.approx(2.2 / 1.25 / 2)


@pytest.mark.parametrize("call, match", [
    (lambda: cm.expected_tokens([]), "'acceptance'"),
    (lambda: cm.expected_tokens([0.5, np.nan]), "'acceptance'"),
    (lambda: cm.predicted_speedup([1.2], 0.1), "'acceptance'"),
    (lambda: cm.predicted_speedup([0.5], -0.1), "'cost_ratio'"),
    (lambda: cm.predicted_speedup([0.5], 0.1, np.inf), "'overhead'"),
    (lambda: cm.round_cost(0, 0.1), "'draft_length'"),
    (lambda: cm.predicted_speedup([0.5], 0.1, target_step=0), "'target_step'"),
])
def test_refusals(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_prediction_table():
    table = cm.format_predictions({"sps": [0.9, 0.9, 0.1]}, [0.2, 1.0])
    # c = 1: L = 1 gives 1.9 / 2 = 0.95, more positions only cost more
    assert table.splitlines()[2] == f"| sps | {2.71 / 1.4:.2f}x (L = 2) | 0.95x (L = 1) |"

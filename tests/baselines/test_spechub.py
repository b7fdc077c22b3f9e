"""SpecHub ([HUB] Section 4; p = TARGET, q = DRAFT). Exact losslessness, acceptance by enumeration
and draft probabilities are in core/test_lossless.py (scheme "hub"); here: the paper's properties,
golden values and the toy study of its Table 4."""
import numpy as np
import pytest

import multidraft as md
from conftest import HUB, TOL, case_id

SPECHUB = md.verifier("spechub")


def test_golden_example_of_figure_4():
    """[HUB] Figures 4 and 5: q = (.5, .3, .2), p = (.1, .6, .3): SpecHub accepts always; a, b, c
    accepted .1, .6, .3."""
    p, q = np.array([0.1, 0.6, 0.3]), np.array([0.5, 0.3, 0.2])
    assert SPECHUB.acceptance(p, q, 2) == pytest.approx(1.0, abs=1e-12)
    tuples, probs = md.draft_scheme(q, 2, scheme="hub").enumerate()
    accepted = np.zeros(3)
    for w, prob in zip(tuples, probs):
        law = SPECHUB.transport(p, q, w)
        accepted[np.unique(w)] += prob * law[np.unique(w)]
    np.testing.assert_allclose(accepted, p, atol=1e-12)


@pytest.mark.parametrize("case", HUB, ids=case_id)
def test_closed_form_and_optimal_for_its_own_scheme(case):
    """The acceptance p(a) + sum_{x != a} min(p(x), q(x) / (1 - q(a))), written independently here.
    It is the optimum (relaxed-OTLP min cut) of SpecHub's own draft scheme."""
    p, q = case.p64 / case.p64.sum(), case.q64
    a = int(np.argmax(q))
    others = np.arange(len(q)) != a
    off_hub = q[others].sum()  # 0 for a one-token draft, which SpecHub verifies as SpS: p(a)
    closed_form = p[a] + (np.minimum(p[others], q[others] / off_hub).sum() if off_hub > 0 else 0.0)
    acceptance = SPECHUB.acceptance(case.p, case.q, 2)
    assert abs(acceptance - min(closed_form, 1.0)) <= TOL
    assert abs(acceptance - md.optimal_acceptance(case.p, case.q, 2, scheme="hub")) <= TOL


@pytest.mark.parametrize("seed", range(40))
def test_theorem_3_beats_rrs_when_the_hub_is_heavy(seed):
    """[HUB] Theorem 3: if q(a) / (1 - q(a)) >= 1 - sum min(p, q), SpecHub accepts at least as often as RRS."""
    rng = np.random.default_rng(seed)
    V = int(rng.integers(3, 9))
    p, q = rng.dirichlet(np.full(V, 0.5)), rng.dirichlet(np.full(V, 0.5))
    a = int(np.argmax(q))
    if q[a] / (1 - q[a]) >= 1 - md.acceptance_rate(p, q):
        assert SPECHUB.acceptance(p, q, 2) >= md.verifier("rrs").acceptance(p, q, 2) - TOL


def test_theorem_3_condition_matters():
    """A counterexample: the condition fails and SpecHub (0.4433) < RRS (0.4533)."""
    p, q = np.array([0.02, 0.94, 0.04]), np.array([0.37, 0.23, 0.40])
    assert SPECHUB.acceptance(p, q, 2) == pytest.approx(0.4433, abs=5e-5)
    assert md.verifier("rrs").acceptance(p, q, 2) == pytest.approx(0.4533, abs=5e-5)


@pytest.mark.parametrize("q_hub, p_hub", [(0.999, 0.2), (0.6, 0.0), (1 - 1e-9, 0.5)])
def test_degenerate_hubs_stay_lossless(q_hub, p_hub):
    """Edge cases of the hub scheme: q(a) near 1, p(a) = 0; float64 with guarded ratios."""
    V = 5
    q = np.full(V, (1 - q_hub) / (V - 1)); q[0] = q_hub
    p = np.full(V, (1 - p_hub) / (V - 1)); p[0] = p_hub
    tuples, probs = md.draft_scheme(q, 2, scheme="hub").enumerate()
    laws = SPECHUB.transport(np.tile(p, (len(tuples), 1)), np.tile(q, (len(tuples), 1)), tuples)
    assert laws.min() >= 0
    np.testing.assert_allclose(probs @ laws, p, atol=1e-12)


def test_only_two_drafts():
    with pytest.raises(ValueError, match="'n'"):
        SPECHUB.acceptance(np.full(4, 0.25), np.full(4, 0.25), 3)
    with pytest.raises(ValueError, match="'n'"):
        md.draft_scheme(np.full(4, 0.25), 3, scheme="hub")


# [HUB] Table 4: n = 50, k = 2; (T, lambda) -> (RRS, RRSw, OTM, OTMw, SpecHub), means over pairs
TABLE4 = {(0.1, 0.7): (0.6273, 0.7120, 0.6380, 0.7345, 0.7402), (0.1, 0.5): (0.3323, 0.4057, 0.3346, 0.4125, 0.4123),
          (0.25, 0.7): (0.7354, 0.7653, 0.7846, 0.8321, 0.8113), (0.25, 0.5): (0.4564, 0.4978, 0.4743, 0.5245, 0.4968),
          (0.5, 0.7): (0.8090, 0.8122, 0.9037, 0.9150, 0.8500), (0.5, 0.5): (0.6456, 0.6593, 0.7052, 0.7206, 0.6403)}


def softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


@pytest.mark.parametrize("T, lam", TABLE4)
def test_toy_study_of_table_4(T, lam):
    """The paper's recipe with N(0, 1) logits (uniform logits do not reproduce it),
    p = softmax(u_p / T), q = softmax((lam u_p + (1 - lam) u_q) / T); every value exact, 400 pairs;
    within 0.05, with the structural orderings exact for every pair."""
    rng = np.random.default_rng(0)
    rows = []
    for _ in range(400):
        up, uq = rng.standard_normal(50), rng.standard_normal(50)
        p, q = softmax(up / T), softmax((lam * up + (1 - lam) * uq) / T)
        rrs, rrsw = md.verifier("rrs").acceptance(p, q, 2), md.verifier("rrs_without_replacement").acceptance(p, q, 2)
        otm, otmw = md.optimal_acceptance(p, q, 2), md.optimal_acceptance(p, q, 2, scheme="without_replacement")
        hub = SPECHUB.acceptance(p, q, 2)
        assert otm >= rrs - TOL and otmw >= rrsw - TOL
        assert abs(hub - md.optimal_acceptance(p, q, 2, scheme="hub")) <= TOL
        rows.append((rrs, rrsw, otm, otmw, hub))
    np.testing.assert_allclose(np.mean(rows, axis=0), TABLE4[T, lam], atol=0.05)

"""Khisti et al.'s canonical decomposition ([CD]; p = TARGET, q = DRAFT here, the paper swaps
the letters). Exact losslessness and acceptance by enumeration are in core/test_lossless.py (every
registered verifier, identical and independent drafts); here: the theorems and golden values."""
import numpy as np
import pytest

import multidraft as md
from conftest import IID, INDEPENDENT, TOL, case_id

KHISTI = md.verifier("khisti")

# Golden values computed independently (not printed in [CD]) (target, draft, 1 - TV, P*_2, P*_3, P*_4)
GOLDEN = [
    ((.2, .3, .5), (.5, .3, .2), 0.70, 0.86, 0.988, 1.0),
    ((.1, .2, .3, .4), (.4, .3, .2, .1), 0.60, 0.79, 0.871, 0.9439),
    ((.3, .3, .2, .1, .1), (.6, .2, .1, .05, .05), 0.70, 0.94, 1.0, 1.0),
]


@pytest.mark.parametrize("p, q, single, two, three, four", GOLDEN)
def test_golden_optima(p, q, single, two, three, four):
    p, q = np.array(p), np.array(q)
    for n, value in zip((1, 2, 3, 4), (single, two, three, four)):
        assert md.optimal_acceptance(p, q, n) == pytest.approx(value, abs=5e-5)
    assert md.khisti.optimal_acceptance_two_drafts(p, q) == pytest.approx(two, abs=1e-12)
    assert KHISTI.acceptance(p, q, 2) == pytest.approx(two, abs=1e-12)


@pytest.mark.parametrize("case", [c for c in IID if c.n >= 2] + [c for c in INDEPENDENT if c.n == 2], ids=case_id)
def test_two_drafts_reach_the_optimum(case):
    """Theorem 1: with the optimal weights the decomposition reaches P* (= alpha*, Theorem 3)."""
    v = md.verifier("khisti", scheme="independent" if case.scheme == "independent" else "iid")
    args = (case.p, case.q) if case.scheme == "independent" else (case.p, case.q, case.n)
    alpha_star = md.optimal_acceptance(*args)
    acceptance = v.acceptance(*args)
    if case.n == 2:
        assert abs(acceptance - alpha_star) <= TOL
    else:  # successive pairwise selection: valid, never above the optimum
        assert acceptance <= alpha_star + TOL


@pytest.mark.parametrize("t", [0.1, 0.2499, 0.25, 0.5, 0.75, 0.7501, 0.9])
def test_theorem_2_example_1(t):
    """Example 1: a uniform draft on two tokens accepts always iff 0.25 <= p(0) <= 0.75."""
    p, q = np.array([t, 1 - t]), np.array([0.5, 0.5])
    assert md.khisti.accepts_always(p, q) == (0.25 <= t <= 0.75)
    assert (md.optimal_acceptance(p, q, 2) >= 1 - 1e-12) == (0.25 <= t <= 0.75)


@pytest.mark.parametrize("case", [c for c in IID if c.V <= 6][:120], ids=case_id)
def test_theorem_2_predicate_by_enumeration(case):
    """P* = 1 iff p(S) >= q(S)^n for every S, checked over all subsets."""
    p, q = case.p64 / case.p64.sum(), case.q64
    masks = np.array(np.meshgrid(*[[False, True]] * case.V)).reshape(case.V, -1).T
    condition = all(p[m].sum() >= q[m].sum() ** case.n - 1e-12 for m in masks)
    assert md.khisti.accepts_always(case.p, case.q, case.n) == condition


@pytest.mark.parametrize("s, value", list(enumerate([0.88, 0.88, 0.92, 0.94, 0.94, 0.94])))
def test_truncated_lp_golden_case_c(s, value):
    """Algorithm 2 on the golden case C (the third row above), s = 0..5 (values to two decimals)."""
    p, q = np.array([.3, .3, .2, .1, .1]), np.array([.6, .2, .1, .05, .05])
    assert md.verifier("khisti", truncation=s).acceptance(p, q, 2) == pytest.approx(value, abs=5e-3)


@pytest.mark.parametrize("case", [c for c in IID if c.n == 2], ids=case_id)
@pytest.mark.parametrize("s", [0, 1, 2, 4])
def test_truncated_lp_guarantee(case, s):
    """Eq. (12): acceptance >= P* - sum over Omega_2 of (p - q^2)^+, Omega_1 = top s by p - q^2."""
    p, q = case.p64 / case.p64.sum(), case.q64
    order = sorted(range(case.V), key=lambda y: (-(p[y] - q[y] ** 2), y))
    penalty = sum(max(p[y] - q[y] ** 2, 0.0) for y in order[s:])
    acceptance = md.verifier("khisti", truncation=s).acceptance(case.p, case.q, 2)
    alpha_star = md.optimal_acceptance(case.p, case.q, 2)
    assert alpha_star - penalty - TOL <= acceptance <= alpha_star + TOL

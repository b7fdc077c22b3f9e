"""alpha*, H* and the exact OTLP solvers against the independent oracle (p = TARGET, q = DRAFT)."""
import numpy as np
import pytest

import multidraft as md
import oracle
from conftest import (ALL_CASES, IID, INDEPENDENT, PLAN_METHODS, RANDOM, TOL, WITHOUT_REPLACEMENT, case_id,
                      dirichlet, plan_id)

IID_AND_WR = IID + WITHOUT_REPLACEMENT


def tagged(cases, tag):
    return [c for c in cases if tag in c.tags]


@pytest.mark.parametrize("case", ALL_CASES, ids=case_id)
def test_optimal_acceptance_matches_brute_force(case):
    args, kwargs = case.optimum_args()
    assert abs(md.optimal_acceptance(*args, **kwargs) - case.brute[0]) <= TOL


@pytest.mark.parametrize("case", ALL_CASES, ids=case_id)
def test_optimal_subset_is_the_smallest_minimiser(case):
    args, kwargs = case.optimum_args()
    alpha, H = md.optimal_subset(*args, **kwargs)
    H = np.asarray(H)
    assert H.dtype == bool and H.shape == (case.V,)
    best, min_psi, H_small, ambiguous = case.brute
    assert abs(alpha - best) <= TOL
    assert case.psi(H) <= min_psi + TOL, "H is not a minimiser of psi"
    if not ambiguous:
        np.testing.assert_array_equal(H, H_small, err_msg="H is not the smallest minimiser")


@pytest.mark.parametrize("plan_method", PLAN_METHODS, ids=plan_id)
@pytest.mark.parametrize("case", ALL_CASES, ids=case_id)
def test_solve_otlp_alpha_matches_lp(case, plan_method):
    plan = case.solve(plan_method)
    assert plan.method == plan_method[0]
    assert abs(plan.alpha - case.lp[0]) <= TOL
    assert abs(plan.alpha - case.brute[0]) <= TOL


@pytest.mark.parametrize("case", [c for c in IID_AND_WR if c.n == 1], ids=case_id)
def test_single_draft_is_acceptance_rate(case):
    expected = oracle.single_draft_acceptance(case.p64, case.q64)
    assert abs(md.acceptance_rate(case.p, case.q) - expected) <= TOL
    assert abs(md.optimal_acceptance(case.p, case.q, 1, scheme=case.scheme) - expected) <= TOL


@pytest.mark.parametrize("scheme", ["iid", "without_replacement"])
@pytest.mark.parametrize("case", RANDOM[:60], ids=case_id)
def test_more_drafts_never_hurt(case, scheme):
    ns = range(1, (np.count_nonzero(case.q) if scheme == "without_replacement" else 5) + 1)
    alphas = [md.optimal_acceptance(case.p, case.q, n, scheme=scheme) for n in ns]
    assert np.all(np.diff(alphas) >= -1e-12), alphas


@pytest.mark.parametrize("case", IID, ids=case_id)
def test_naive_lower_bound(case):
    bound = float(case.p64 @ (1.0 - (1.0 - case.q64) ** case.n))
    assert md.optimal_acceptance(case.p, case.q, case.n) >= bound - TOL


@pytest.mark.parametrize("case", tagged(IID_AND_WR, "p_eq_q"), ids=case_id)
def test_p_equal_q_accepts_always(case):
    alpha, H = md.optimal_subset(case.p, case.q, case.n, scheme=case.scheme)
    assert abs(alpha - 1.0) <= TOL
    assert not np.any(H), "alpha* = 1 must give the empty H*"


@pytest.mark.parametrize("case", tagged(IID_AND_WR, "disjoint"), ids=case_id)
def test_disjoint_supports_never_accept(case):
    assert abs(md.optimal_acceptance(case.p, case.q, case.n, scheme=case.scheme)) <= TOL


@pytest.mark.parametrize("case", tagged(IID, "onehot_q"), ids=case_id)
def test_one_hot_draft_accepts_its_target_mass(case):
    a = int(np.argmax(case.q64))
    assert abs(md.optimal_acceptance(case.p, case.q, case.n) - case.p64[a]) <= TOL


@pytest.mark.parametrize("case", tagged(INDEPENDENT, "same_rows"), ids=case_id)
def test_identical_independent_drafts_equal_iid(case):
    iid = md.optimal_acceptance(case.p, case.q[0], case.n)
    assert abs(md.optimal_acceptance(case.p, case.q) - iid) <= TOL
    _, H = md.optimal_subset(case.p, case.q)
    _, H_iid = md.optimal_subset(case.p, case.q[0], case.n)
    np.testing.assert_array_equal(H, H_iid)


@pytest.mark.parametrize("scheme", ["iid", "without_replacement"])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_batched_optimum_equals_rows(scheme, n):
    rng = np.random.default_rng(n)
    p, q = dirichlet(rng, 5, 0.5, 6), dirichlet(rng, 5, 0.5, 6)
    rows = [md.optimal_acceptance(p[b], q[b], n, scheme=scheme) for b in range(6)]
    np.testing.assert_allclose(md.optimal_acceptance(p, q, n, scheme=scheme), rows, rtol=0, atol=1e-15)
    np.testing.assert_allclose(md.acceptance_rate(p, q), [md.acceptance_rate(p[b], q[b]) for b in range(6)],
                               rtol=0, atol=1e-15)

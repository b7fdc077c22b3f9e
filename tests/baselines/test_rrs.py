"""Recursive rejection sampling (SpecInfer; [HUB] Section 2, Algorithm 1). Exact losslessness and
acceptance-by-enumeration of "rrs" and "rrs_without_replacement" are in core/test_lossless.py (every
registered verifier); here: golden values, an independent acceptance formula, and alpha* bounds.
p = TARGET, q = DRAFT."""
import numpy as np
import pytest

import multidraft as md
from conftest import IID, TOL, case_id


def rrs_acceptance_formula(p, q, n):
    """[HUB] Algorithm 1, written independently: 1 - prod_i (1 - beta_i), p_{i+1} = norm((p_i - q)^+)."""
    p = p / p.sum()
    reject = 1.0
    for _ in range(n):
        beta = np.minimum(p, q).sum()
        reject *= 1.0 - beta
        residual = np.maximum(p - q, 0.0)
        if residual.sum() == 0:
            break
        p = residual / residual.sum()
    return 1.0 - reject


def test_golden_values_of_seed_004_figure_4():
    """[HUB] Figure 4: q = (.5, .3, .2), p = (.1, .6, .3): RRSw 0.94, RRS 0.80, LP(q x q) 0.85, LP(Q_wo) 1."""
    p, q = np.array([0.1, 0.6, 0.3]), np.array([0.5, 0.3, 0.2])
    assert md.verifier("rrs_without_replacement").acceptance(p, q, 2) == pytest.approx(0.94, abs=1e-12)
    assert md.verifier("rrs").acceptance(p, q, 2) == pytest.approx(0.80, abs=1e-12)
    assert md.optimal_acceptance(p, q, 2) == pytest.approx(0.85, abs=1e-12)
    assert md.optimal_acceptance(p, q, 2, scheme="without_replacement") == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("case", IID, ids=case_id)
def test_acceptance_formula_and_optimality_bound(case):
    rrs = md.verifier("rrs").acceptance(case.p, case.q, case.n)
    assert abs(rrs - rrs_acceptance_formula(case.p64, case.q64, case.n)) <= TOL
    assert rrs <= md.optimal_acceptance(case.p, case.q, case.n) + TOL
    if np.count_nonzero(case.q64) >= case.n:
        rrsw = md.verifier("rrs_without_replacement").acceptance(case.p, case.q, case.n)
        assert rrsw <= md.optimal_acceptance(case.p, case.q, case.n, scheme="without_replacement") + TOL


@pytest.mark.parametrize("name", ["rrs", "rrs_without_replacement"])
def test_p_equal_q_accepts_always(name):
    p = np.random.default_rng(1).dirichlet(np.ones(6))
    assert md.verifier(name).acceptance(p, p, 3) == pytest.approx(1.0, abs=1e-12)


def test_single_draft_is_speculative_sampling():
    rng = np.random.default_rng(2)
    p, q = rng.dirichlet(np.ones(7)), rng.dirichlet(np.ones(7))
    for name in ("rrs", "rrs_without_replacement"):
        v = md.verifier(name)
        assert v.acceptance(p, q, 1) == pytest.approx(md.acceptance_rate(p, q), abs=1e-14)
        for y in range(7):
            np.testing.assert_allclose(v.transport(p, q, [y]), md.verifier("sps").transport(p, q, [y]), atol=1e-15)


def test_exact_acceptance_without_replacement_refuses_huge_enumerations():
    p = q = np.full(2000, 1 / 2000)
    with pytest.raises(ValueError, match="too large"):
        md.verifier("rrs_without_replacement").acceptance(p, q, 3)

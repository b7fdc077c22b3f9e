"""SpecTr K-SEQ (Sun et al.'s K-sequential selection, a baseline of [CD] Section 5), in this
project's notation p = TARGET, q = DRAFT (Khisti et al. use the opposite letters). Losslessness
and acceptance-by-enumeration are in core/test_lossless.py (every registered verifier); here:
golden values and guarantees."""
import numpy as np
import pytest

import multidraft as md
from conftest import IID, TOL, case_id

SPECTR, RRS = md.verifier("spectr"), md.verifier("rrs")

# Golden values computed independently (not printed in [CD]): (target, draft, SpecTr K=2, rho*, SpecInfer K=2, P*_2)
GOLDEN = [
    ((.2, .3, .5), (.5, .3, .2), 0.791355, 1.4568, 0.76, 0.86),
    ((.1, .2, .3, .4), (.4, .3, .2, .1), 0.75, 1.5, 0.72, 0.79),
    ((.3, .3, .2, .1, .1), (.6, .2, .1, .05, .05), 0.853238, 1.3831, 0.82, 0.94),
]


@pytest.mark.parametrize("p, q, spectr, rho, specinfer, optimum", GOLDEN)
def test_golden_cases(p, q, spectr, rho, specinfer, optimum):
    p, q = np.array(p), np.array(q)
    assert SPECTR.acceptance(p, q, 2) == pytest.approx(spectr, abs=5e-7)
    assert SPECTR.rho(p, q, 2) == pytest.approx(rho, abs=5e-5)
    assert RRS.acceptance(p, q, 2) == pytest.approx(specinfer, abs=1e-12)
    assert md.optimal_acceptance(p, q, 2) == pytest.approx(optimum, abs=1e-12)


# Figure 2 of Khisti et al. (left plot): uniform draft on 3 tokens, target (1/3, t, 2/3 - t).
@pytest.mark.parametrize("t, optimal, spectr, specinfer", [
    (0.05, 0.9389, 0.8470, 0.8111), (0.20, 1.0, 0.9449, 0.9111), (0.45, 1.0, 0.9545, 0.9222), (0.60, 0.9556, 0.8587, 0.8222),
])
def test_figure_2_reference_points(t, optimal, spectr, specinfer):
    p, q = np.array([1 / 3, t, 2 / 3 - t]), np.full(3, 1 / 3)
    assert md.optimal_acceptance(p, q, 2) == pytest.approx(optimal, abs=5e-5)
    assert SPECTR.acceptance(p, q, 2) == pytest.approx(spectr, abs=5e-5)
    assert RRS.acceptance(p, q, 2) == pytest.approx(specinfer, abs=5e-5)


@pytest.mark.parametrize("case", IID, ids=case_id)
def test_guarantee_between_one_minus_one_over_e_and_the_optimum(case):
    """SpecTr's (1 - 1/e) approximation guarantee, and no method beats alpha*."""
    alpha_star = md.optimal_acceptance(case.p, case.q, case.n)
    acceptance = SPECTR.acceptance(case.p, case.q, case.n)
    assert (1 - np.exp(-1)) * alpha_star - TOL <= acceptance <= alpha_star + TOL
    assert 1 - TOL <= SPECTR.rho(case.p, case.q, case.n) <= case.n + TOL


def test_single_draft_is_speculative_sampling():
    rng = np.random.default_rng(4)
    p, q = rng.dirichlet(np.ones(6)), rng.dirichlet(np.ones(6))
    assert SPECTR.rho(p, q, 1) == 1.0
    for y in range(6):
        np.testing.assert_allclose(SPECTR.transport(p, q, [y]), md.verifier("sps").transport(p, q, [y]), atol=1e-15)

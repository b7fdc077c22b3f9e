"""Global Resolution's core plan through the extension's test-only hooks (``_core._testing``):
the summation paths (implicit and stored full-size terms, interpolated pair sums, Laplace and grid
sums, single terms) forced one way or the other and compared with enumeration at the same point,
the work budget, and the inner system's warm start. The public contract is in
test_global_resolution.py, whose instances and checks these tests share. p = TARGET, q = DRAFT.
"""
import numpy as np
import pytest

import multidraft as md
from conftest import Case, case_id, dirichlet
from test_global_resolution import CASES, check_against_enumeration, pair_instance


@pytest.mark.parametrize("case", [c for c in CASES if c.n >= 2][::3], ids=case_id)
def test_implicit_full_size_terms_match_the_stored_shifted_ones(case):
    """The n-subsets are enumerated implicitly with unshifted powers e^a; forcing the fallback
    (every term stored and shifted by its own maximum, as for |a| > 600) gives the same plan."""
    from multidraft import _core
    draft = md.draft_scheme(case.q, case.n)
    args = (case.p64, draft.q, case.n, 1e-4, 50, 2e6, False)
    implicit, stored = _core.GlobalResolutionPlan(*args), _core._testing.global_resolution_plan(*args, unshifted_limit=0.0)
    for name in ("outer", "inner"):
        a, b = implicit.diagnostics[name], stored.diagnostics[name]
        assert (a["truncation_size"], a["terms"], a["iterations"]) == (b["truncation_size"], b["terms"], b["iterations"])
        assert a["gradient_l1"] == pytest.approx(b["gradient_l1"], rel=1e-6, abs=1e-13)
    assert implicit.alpha == pytest.approx(stored.alpha, abs=1e-12)
    tuples, _ = case.support
    np.testing.assert_allclose(implicit.transport(tuples, draft.V), stored.transport(tuples, draft.V), atol=1e-10)


class CorePlan:
    """The core's plan with the test-only options (the extension's _testing hooks), behind the
    transport of md.GlobalResolution."""

    def __init__(self, case, tau, max_terms=2e6, **options):
        from multidraft import _core
        self.V = case.V
        self.core = _core._testing.global_resolution_plan(case.p64, md.draft_scheme(case.q, case.n).q, case.n, tau,
                                                          50, max_terms, False, **options)
        self.alpha, self.alpha_star, self.success = self.core.alpha, self.core.alpha_star, self.core.success
        self.exact, self.law_error_bound = self.core.exact, self.core.law_error_bound
        self.kept, self.alpha_error_bound = self.core.kept, self.core.alpha_error_bound
        self.acceptance_bound = self.core.acceptance_bound
        self.diagnostics = self.core.diagnostics

    def transport(self, tuples):
        return self.core.transport(np.asarray(tuples, dtype=np.int64), self.V)


@pytest.mark.parametrize("seed", range(12))
def test_pair_passes_on_dozens_of_tokens_against_enumeration(seed):
    """n = 2 with |T| > 10: conjugate gradients and the enumerated four-sibling pair passes
    (full_subsets.hpp), which the V <= 8 cases never reach, checked on all V**2 draft tuples."""
    rng = np.random.default_rng(seed)
    case = pair_instance(seed, int(rng.integers(24, 49)))
    for tau in (1e-3, 1e-4):
        for exact in (True, False):
            plan = CorePlan(case, tau, interpolation=False, exact=exact)
            assert not any(plan.diagnostics[s]["interpolated"] for s in ("outer", "inner"))
            check_against_enumeration(case, plan, tau)


@pytest.mark.parametrize("seed", range(12))
def test_interpolated_pair_sums_match_the_enumerated_ones(seed):
    """Up to 3000 tokens: interpolated and enumerated pair sums give the same Newton path, alpha and
    transport (the interpolation's certified relative error is about 1e-10, its actual one 1e-15)."""
    rng = np.random.default_rng(seed)
    case = pair_instance(seed, int(rng.integers(200, 3001)))
    for tau in (1e-3, 1e-4):
        # Pair interpolation only: from 2000 tokens the grid sums them where it pays (tested above).
        fast = CorePlan(case, tau, grid="never")
        direct = CorePlan(case, tau, max_terms=1e7, interpolation=False)
        for name in ("outer", "inner"):
            a, b = fast.diagnostics[name], direct.diagnostics[name]
            assert not b["interpolated"] and a["within_budget"] and b["within_budget"]
            assert (a["truncation_size"], a["iterations"]) == (b["truncation_size"], b["iterations"])
            assert a["gradient_l1"] == pytest.approx(b["gradient_l1"], rel=1e-6, abs=1e-8)  # + certified error
        assert fast.alpha == pytest.approx(direct.alpha, abs=1e-11)
        drafts = rng.choice(case.V, size=(50, 2), p=case.q64 / case.q64.sum())
        np.testing.assert_allclose(fast.transport(drafts), direct.transport(drafts), rtol=0, atol=1e-9)


def derivative_instance(seed):
    """A grouped objective and a point where summation pays, with the adversarial shapes: equal
    masses and equal a (span 0), a dominant mass, masses down to 1e-12, spans up to 150 (n = 2) or
    400 (n = 3, 4). Every fourth instance allows no enumeration (work budget: the singles), so
    LaplaceSums takes n = 2 wherever the pair interpolation cannot (|a| > 150) or does not pay."""
    rng = np.random.default_rng(900 + seed)
    n = 2 + seed % 3
    m = {2: int(rng.integers(60, 400)), 3: int(rng.integers(50, 120)), 4: int(rng.integers(20, 45))}[n]
    q = rng.dirichlet(np.full(m, (0.05, 0.5, 5.0)[seed % 3])) * rng.uniform(0.5, 1.0)
    spans = (0.0, 1.0, 4.0, 10.0, 25.0, 150.0, 400.0) if n == 2 or seed % 4 == 3 else (0.0, 1.0, 3.0, 6.0, 40.0)
    span = spans[seed % len(spans)]
    a = rng.uniform(-span / 2, span / 2, m) + rng.normal(0, 3)
    a = np.clip(a, -300, 300)
    shape = seed % 5
    if shape == 0:  # ties
        q[:] = q.mean()
        a[: m // 2] = a[0]
    elif shape == 1:  # a dominant mass
        q *= 1e-3 / q.sum()
        q[0] = 1 - 1e-12 - q[1:].sum()
    elif shape == 2:  # tiny masses
        q[: m // 3] = 1e-12
    slack = bool(seed % 4 < 2)
    bases = [float(rng.uniform(0, 0.4))] + ([float(rng.uniform(0, 0.4))] if slack else [])
    max_terms = float(m) if seed % 4 == 3 else 1e12
    return q, n, bases, slack, a, rng.normal(size=m), max_terms


@pytest.mark.parametrize("seed", range(180))
def test_summed_terms_match_enumeration_at_the_same_point(seed):
    """The summed terms (n = 2: pairs by interpolation, pair_sums.hpp, or every term by the Laplace
    transform, laplace_sums.hpp; n = 3, 4: every term by the Laplace transform) against the
    enumerated ones at one point: the gradient within the certified bound it reports, the rest to
    rounding."""
    from multidraft import _core
    q, n, bases, slack, a, v, max_terms = derivative_instance(seed)
    fast = _core._testing.objective_derivatives(q, n, bases, slack, a, v, True, max_terms)
    exact = _core._testing.objective_derivatives(q, n, bases, slack, a, v, False)
    assert not exact["interpolated"] and exact["gradient_error"] == 0
    if max_terms < 1e12:
        assert fast["interpolated"]  # enumerating is forbidden
    if not fast["interpolated"]:  # not worth it at this span: the same enumeration
        assert np.array_equal(fast["gradient"], exact["gradient"])
        return
    assert fast["gradient_error"] <= 1e-8  # the certified bound
    assert np.abs(fast["gradient"] - exact["gradient"]).sum() <= fast["gradient_error"] + 1e-14
    # Differences of positive sums, each within about 2e-10 relative (LaplaceSums::relative_error(2));
    # LaplaceSums' Hessian-vector products take every other node, about 1e-4 relative.
    # On the grid (from about 100 variables at span 0), the Hessian takes 7 Chebyshev terms: 1e-5.
    for key, tolerance in (("diagonal", 1e-5 if fast["grid"] else 1e-9),
                           ("hessian_times", 1e-3 if fast["laplace"] else 1e-9)):
        np.testing.assert_allclose(fast[key], exact[key], rtol=tolerance, atol=tolerance * np.abs(exact[key]).max())
    assert abs(fast["accepted"] - exact["accepted"]) <= fast["gradient_error"] + 1e-14  # same sums, other weights


@pytest.mark.parametrize("seed", [s for s in range(180) if derivative_instance(s)[1] > 2 or s % 4 == 3])
def test_coarse_laplace_rule_bound_holds(seed):
    """LaplaceSums' coarse rule (Newton iterates; about a third of the nodes) against enumeration
    at the same point: the gradient and the accepted mass within the bound it reports (which the
    stopping test adds to the gradient norm), that bound about 5e-6 relative, and the curvature
    good enough for conjugate gradients."""
    from multidraft import _core
    q, n, bases, slack, a, v, max_terms = derivative_instance(seed)
    coarse = _core._testing.objective_derivatives(q, n, bases, slack, a, v, True, max_terms, coarse=True)
    exact = _core._testing.objective_derivatives(q, n, bases, slack, a, v, False)
    if not coarse["laplace"]:
        return
    error = np.abs(coarse["gradient"] - exact["gradient"]).sum()
    assert error <= coarse["gradient_error"] + 1e-14
    assert abs(coarse["accepted"] - exact["accepted"]) <= coarse["gradient_error"] + 1e-14
    mass = np.abs(exact["gradient"]).sum() + 2 * abs(exact["accepted"]) + 1e-300  # gradient = allocation here
    assert coarse["gradient_error"] <= 1e-5 * mass
    for key in ("diagonal", "hessian_times"):
        np.testing.assert_allclose(coarse[key], exact[key], rtol=1e-3, atol=1e-3 * np.abs(exact[key]).max())


@pytest.mark.parametrize("seed", range(180))
def test_grid_sums_match_enumeration_at_the_same_point(seed):
    """Laplace sums with the variables interpolated on a grid over log x (laplace_interpolation.hpp,
    forced at these small sizes, n = 2 included) against the enumerated terms at one point, with
    the certified and the coarse rules: the gradient and the accepted mass within the bound each
    reports (certified: at most 1e-8; coarse: 1e-3 of the mass), the Hessian's diagonal and
    products (7 Chebyshev terms) good to 1e-5. The variables come in three orders: random (the
    grid sorts them by piece), by increasing and by decreasing a (it keeps the caller's order, in
    runs of one piece each that end inside a block)."""
    from multidraft import _core
    q, n, bases, slack, a, v, max_terms = derivative_instance(seed)
    exact = _core._testing.objective_derivatives(q, n, bases, slack, a, v, False)
    mass = np.abs(exact["gradient"]).sum() + 2 * abs(exact["accepted"]) + 1e-300  # gradient = allocation here
    by_a = np.argsort(a, kind="stable")
    for order, coarse in ((np.arange(len(a)), False), (np.arange(len(a)), True), (by_a, False), (by_a[::-1], True)):
        grid = _core._testing.objective_derivatives(q[order], n, bases, slack, a[order], v[order], True, max_terms,
                                                    coarse=coarse, grid="always")
        assert grid["grid"] and grid["laplace"]
        assert np.abs(grid["gradient"] - exact["gradient"][order]).sum() <= grid["gradient_error"] + 1e-14
        assert abs(grid["accepted"] - exact["accepted"]) <= grid["gradient_error"] + 1e-14
        assert grid["gradient_error"] <= (1e-3 * mass if coarse else 1e-8)  # coarse: 2e-4 with a dominant mass
        tolerance = 1e-3 if coarse else 1e-5
        for key in ("diagonal", "hessian_times"):
            np.testing.assert_allclose(grid[key], exact[key][order], rtol=tolerance,
                                       atol=tolerance * np.abs(exact[key]).max())


@pytest.mark.parametrize("seed", [s for s in range(60) if derivative_instance(s)[3]])
def test_grid_level_matches_enumeration(seed):
    """An inner point moved to its level on the grid (LaplaceInterpolation::Level, found at the
    nodes alone): the enumerated rejected mass sum_U w_U / (1 + X_U) at the shifted point is the
    aim, and the gradient there is the enumerated one within the reported bound (certified and
    coarse). The aim is the rejected mass at a known shift of the point."""
    from multidraft import _core
    q, n, bases, slack, a, v, max_terms = derivative_instance(seed)
    total_weight = (bases[0] + q.sum()) ** n - bases[0] ** n

    def rejected(point):  # the objective's weights (base 0) never accepted: target 0, gradient = allocation
        exact = _core._testing.objective_derivatives(q, n, bases, True, point, v, False)
        return total_weight - exact["gradient"].sum(), exact

    aim, _ = rejected(a + (-1.5, 0.4, 2.0)[seed % 3])
    for coarse in (False, True):
        grid = _core._testing.objective_derivatives(q, n, bases, True, a, v, True, max_terms, coarse=coarse,
                                                    grid="always", level_aim=aim)
        assert grid["grid"] and -30 <= grid["shift"] <= 30
        found, exact = rejected(a + grid["shift"])
        assert abs(found - aim) <= 1e-6 * aim  # the nodes' coarse rule: 3.3e-8 relative, and 1e-9 asked
        assert np.abs(grid["gradient"] - exact["gradient"]).sum() <= grid["gradient_error"] + 1e-14


@pytest.mark.parametrize("seed", range(9))
def test_grid_plans_against_enumeration(seed):
    """Plans whose every grouped term is summed on the grid (forced; a work budget of V terms,
    the singles, forbids enumerating the others), n = 2, 3, 4: the exact and the raw plans on all V**n tuples, with
    the adversarial shapes (p == q, zeros in q, a dominant draft token)."""
    rng = np.random.default_rng(4400 + seed)
    n = 2 + seed % 3
    V = {2: int(rng.integers(40, 61)), 3: int(rng.integers(24, 33)), 4: int(rng.integers(12, 16))}[n]
    p, q = dirichlet(rng, V, 1.0), dirichlet(rng, V, 1.0)
    shape = seed // 3
    if shape == 0:  # p == q: alpha* = 1
        q = p.copy()
    elif shape == 1:  # draft top-k: zeros in q
        q[np.argsort(q)[: V // 4]] = 0.0
        q /= q.sum()
    else:  # a dominant draft token
        q *= 1e-3 / q.sum()
        q[0] = 1 - q[1:].sum()
    case = Case(f"grid{seed}-V{V}-n{n}", p, q, n)
    for tau in (1e-3, 1e-4):
        for exact in (True, False):
            plan = CorePlan(case, tau, max_terms=V, exact=exact, grid="always")
            check_against_enumeration(case, plan, tau)


def test_full_vocabulary_grid_plans_match_laplace_sums():
    """A flat full vocabulary of 2500 tokens (|T| ~ 2450) at n = 2, 3 and 4: the grid, where it
    pays, and LaplaceSums alone (or pair interpolation) both reach the stopping threshold, with
    certified rows and an acceptance within the stopping rule's guarantee of alpha*; their points
    differ (other Newton iterates: the grid's passes move inner points to their level, and other
    coarse rules)."""
    from multidraft.bench.distributions import make_pairs
    p, q = make_pairs("flat", V=2500, k=2500, count=1, seed=5)
    for n in (2, 3, 4):
        case = Case(f"flat-full-vocabulary-2500-n{n}", p[0], q[0], n)
        fast, direct = CorePlan(case, 1e-3), CorePlan(case, 1e-3, grid="never")
        assert fast.success and direct.success
        assert max(fast.diagnostics[s]["truncation_size"] for s in ("outer", "inner")) > 2000
        for plan in (fast, direct):
            assert plan.alpha_star - 10 * 1e-3 <= plan.alpha <= plan.alpha_star + 1e-12
            assert plan.law_error_bound <= 1e-8


def test_flat_inner_start_from_the_partners_law():
    """Flat full vocabularies (the inner system over thousands of members, n = 2 and 3, tau = 1e-4):
    started from the law of the partners' worth (PartnerMeanField) instead of its mean, one Newton
    step reaches the stopping threshold (the mean-field start took two on these rows), and the plans
    keep their guarantees."""
    from multidraft import _core
    from multidraft.bench.distributions import make_pairs
    for V, n in ((4000, 2), (8000, 3)):
        p, q = make_pairs("flat", V=V, k=V, count=3, seed=5)
        for i in range(3):
            plan = _core._testing.global_resolution_plan(p[i], md.draft_scheme(q[i], n).q, n, 1e-4, 50, 2e6, False)
            inner = plan.diagnostics["inner"]
            assert inner["truncation_size"] > 2000 and inner["converged"]
            assert inner["iterations"] == 1
            assert plan.success and plan.law_error_bound <= 1e-8
            assert plan.alpha_star - 10 * 1e-4 <= plan.alpha <= plan.alpha_star + 1e-12


@pytest.mark.parametrize("seed", range(12))
def test_laplace_sums_against_enumeration(seed):
    """n = 3 on 30-40 tokens and n = 4 on 14-18, every grouped term summed through the Laplace
    transform (laplace_sums.hpp: a work budget of 50 terms forbids enumerating them) and Newton by
    conjugate gradients: the exact and the raw plans on all V**n tuples, with the adversarial
    shapes (p == q, zeros in q, a dominant draft token, ties)."""
    rng = np.random.default_rng(seed)
    n = 3 + seed % 2
    V = int(rng.integers(30, 41)) if n == 3 else int(rng.integers(14, 19))
    conc = (0.3, 2.0, 10.0)[seed % 3]
    p, q = dirichlet(rng, V, conc), dirichlet(rng, V, conc)
    shape = (seed // 2) % 4
    if shape == 0:  # p == q: alpha* = 1
        q = p.copy()
    elif shape == 1:  # draft top-k: zeros in q
        q[np.argsort(q)[: V // 4]] = 0.0
        q /= q.sum()
    elif shape == 2:  # a dominant draft token
        q *= 1e-3 / q.sum()
        q[0] = 1 - q[1:].sum()
    else:  # ties: q takes four values only
        q = np.repeat(rng.dirichlet(np.ones(4)), -(-V // 4))[:V] + 0.0
        q /= q.sum()
    case = Case(f"laplace{seed}-V{V}-n{n}-c{conc}", p, q, n)
    used = False
    for tau in (1e-3, 1e-4):
        for exact in (True, False):
            plan = CorePlan(case, tau, max_terms=50, exact=exact)
            used = used or any(plan.diagnostics[s]["interpolated"] for s in ("outer", "inner"))
            check_against_enumeration(case, plan, tau)
    assert used or shape == 0


def test_interpolated_terms_do_not_count_against_the_work_budget():
    """A flat full vocabulary of 3000 tokens at n = 2 (|T| ~ 2950): 4.4 million pairs, far over
    max_terms = 1e5, are summed (on the grid); the plan meets the same guarantee as the one that
    enumerates them."""
    from multidraft.bench.distributions import make_pairs
    p, q = make_pairs("flat", V=3000, k=3000, count=1, seed=3)
    case = Case("flat-full-vocabulary-3000", p[0], q[0], 2)
    fast = CorePlan(case, 1e-4, max_terms=1e5)
    direct = CorePlan(case, 1e-4, max_terms=1e7, interpolation=False)
    assert fast.success and direct.success
    assert fast.diagnostics["inner"]["interpolated"] and fast.diagnostics["inner"]["truncation_size"] > 2000
    assert all(fast.diagnostics[s]["within_budget"] for s in ("outer", "inner"))
    # Summed on the grid (|T| > 2000), whose Newton iterates take a coarse rule and move to their
    # level: another path to the same stopping threshold.
    for plan in (fast, direct):
        assert plan.alpha_star - 10 * 1e-4 <= plan.alpha <= plan.alpha_star + 1e-12


@pytest.mark.parametrize("max_terms", [50, 1e7], ids=["summed", "enumerated"])
def test_inner_level_jump_when_the_targets_take_every_term(max_terms):
    """A peaked full vocabulary (V = k = 40, n = 3, tau = 1e-4) whose inner targets take every
    term's weight (delta <= 0): the minimiser lies at infinity along 1, where Newton alone moves by
    about 1 per iteration as the gradient falls by e (7 to 8 iterations); the level jump
    (ConvexObjective::level_shift) ends it in at most 4. Summed (LaplaceSums) or enumerated, the
    exact and raw plans keep their promises on all V**n tuples."""
    from multidraft.bench.distributions import derive_seed, make_pairs
    p, q = make_pairs("peaked", V=40, k=40, count=6, seed=derive_seed(1, "peaked", 40))
    case = Case("peaked-full-vocabulary-40", p[1], q[1], 3)
    for exact in (True, False):
        plan = CorePlan(case, 1e-4, max_terms=max_terms, exact=exact)
        inner = plan.diagnostics["inner"]
        assert inner["truncation_size"] >= 30 and inner["interpolated"] == (max_terms == 50)
        assert inner["iterations"] <= 4
        check_against_enumeration(case, plan, 1e-4)


def test_a_point_that_needs_enumeration_beyond_the_budget_is_refused():
    """With every point forced onto the stored, shifted path (as beyond |a| = 600), the pairs cannot
    be interpolated: the solve stops there and reports the budget, not a wrong plan."""
    rng = np.random.default_rng(12)
    case = Case("budget", dirichlet(rng, 3000, 1.0), dirichlet(rng, 3000, 1.0), 2)
    plan = CorePlan(case, 1e-4, max_terms=1e5, unshifted_limit=0.0)
    assert not plan.success
    assert not all(plan.diagnostics[s]["within_budget"] for s in ("outer", "inner"))


def single_term_cases():
    """Masses for the closed-form singles: random, with zeros (no positive weight: compacted
    away), ties, one-hot, a mass of 1 - 1e-12, tiny and float32-rounded ones; one or two bases,
    including a zero base."""
    rng = np.random.default_rng(77)
    for k in range(24):
        m = int(rng.integers(1, 300))
        q = dirichlet(rng, m, (0.05, 1.0, 20.0)[k % 3])
        if k % 4 == 0:
            q[rng.random(m) < 0.3] = 0.0
        if k % 4 == 1:
            q = np.round(q * 20) / 20
        if k % 4 == 2:
            q = q.astype(np.float32).astype(np.float64)
        bases = [float(rng.random())] + ([float(rng.random() * (k % 3))] if k % 2 else [])
        yield pytest.param(q, 2 + k % 5, bases, id=f"s{k}-m{m}")
    yield pytest.param(np.array([0.0, 1.0, 0.0]), 3, [0.0, 0.5], id="one-hot")
    yield pytest.param(np.array([1.0 - 1e-12, 1e-12, 0.0, 1e-300]), 4, [1e-12], id="mass-1-1e-12")


@pytest.mark.parametrize("q, n, bases", list(single_term_cases()))
def test_single_terms_against_the_closed_form(q, n, bases):
    """write_single_terms' weights n! [x^n] e^{b x} (e^{q_u x} - 1) = (b + q_u)^n - b^n (the
    tuples over {u} and a block of mass b that use u), computed exactly in rationals; a single
    is stored, in order, exactly when some base gives it a positive weight (in floating point:
    4 b^3 q_u underflows for q_u = 1e-300)."""
    from fractions import Fraction
    from multidraft import _core

    members, offsets, weights = _core._testing.single_terms(q, n, bases)
    expected = [[(Fraction(b) + Fraction(x)) ** n - Fraction(b) ** n for x in q] for b in bases]
    stored = [u for u in range(len(q)) if any(float(row[u]) > 0 for row in expected)]
    assert members.tolist() == stored and offsets.tolist() == list(range(len(stored) + 1))
    for row, got in zip(expected, weights):
        want = np.array([float(row[u]) for u in stored])
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=0.0)

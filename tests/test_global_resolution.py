"""Global Resolution ([GR] §6, Algorithm 1) against the exact oracle, by enumeration.

The default (exact) plan must meet p to 1e-9 in L1 on every instance, with an acceptance between
alpha* - acceptance_bound and alpha*. The raw plan (exact=False): whenever ``success`` is true
its transport must meet p within 15 tau in L1 and its acceptance must be within 10 tau of
alpha*; ``success`` is false only when the bound really was not met; the fallback path is
exactly lossless. p = TARGET, q = DRAFT.
"""
import numpy as np
import pytest

import multidraft as md
from conftest import IID, TOL, Case, case_id, dirichlet

# More instances on top of the shared i.i.d. ones: larger V, all concentrations, n up to 4.
def extra_cases(count=200, seed=606):
    rng = np.random.default_rng(seed)
    cases = []
    for k in range(count):
        V, n = int(rng.integers(4, 9)), int(rng.integers(1, 5))
        if V ** n > 5000:
            n = 2
        conc = (0.1, 0.5, 2.0, 10.0)[k % 4]
        p, q = dirichlet(rng, V, conc), dirichlet(rng, V, conc)
        if k % 5 == 0:  # draft top-k: zeros in q, p stays full
            q[np.argsort(q)[: V // 2]] = 0.0
            q /= q.sum()
        cases.append(Case(f"gr{k}-V{V}-n{n}-c{conc}", p, q, n))
    return cases


CASES = IID + extra_cases()


def enumerate_plan(case, plan):
    """(L1 distance of the output marginal to p, enumerated acceptance) over all tuples."""
    tuples, probs = case.support
    laws = plan.transport(tuples)
    assert laws.min() >= -1e-15
    np.testing.assert_allclose(laws.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    tuples = np.asarray(tuples).reshape(len(probs), -1)
    first = np.ones(tuples.shape, dtype=bool)  # each distinct draft counted once
    for i in range(tuples.shape[1]):
        for j in range(i):
            first[:, i] &= tuples[:, i] != tuples[:, j]
    accepted = (probs[:, None] * first * np.take_along_axis(laws, tuples, axis=1)).sum()
    return np.abs(probs @ laws - case.p64 / case.p64.sum()).sum(), accepted  # the package samples p / sum(p)


def check_exact_plan(case, plan, l1, accepted):
    """The exact plan: the output law is p (beyond rounding, up to the interpolation's certified
    error), alpha is the probability that a proposal is kept (a residual draw may also hit a
    draft), and 0 <= alpha* - alpha <= acceptance_bound (the bound derived in global_resolution.hpp)."""
    assert plan.exact
    assert l1 <= TOL  # the certified law_error_bound of interpolated sums (<= 1e-8) is never reached
    assert plan.law_error_bound <= 1e-8
    assert plan.alpha <= accepted + 1e-12
    assert accepted <= plan.alpha_star + TOL
    assert -1e-12 <= plan.alpha_star - plan.alpha <= plan.acceptance_bound + 1e-12


@pytest.mark.parametrize("exact", [True, False], ids=["exact", "raw"])
@pytest.mark.parametrize("tau", [1e-2, 1e-3, 1e-4])
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_bounds_hold_whenever_success(case, tau, exact):
    plan = md.GlobalResolution(case.p, case.q, case.n, tau=tau, exact=exact)
    l1, accepted = enumerate_plan(case, plan)
    alpha_star = case.brute[0]
    assert abs(plan.alpha_star - alpha_star) <= TOL
    if exact:
        check_exact_plan(case, plan, l1, accepted)
        if plan.success:
            assert alpha_star - plan.alpha <= 10 * tau
        return
    assert abs(accepted - plan.alpha) <= TOL, "alpha must be the plan's own acceptance"
    # The certified bounds of Lemma 6.6 hold whatever success says ...
    assert l1 <= plan.l1_bound + 1e-12
    assert abs(accepted - alpha_star) <= plan.acceptance_bound + 1e-12
    if plan.success:  # ... and success means they are within the promise
        assert l1 <= 15 * tau and abs(accepted - alpha_star) <= 10 * tau
    else:
        assert plan.l1_bound > 15 * tau or plan.acceptance_bound > 10 * tau


def exact_instances(count=300, seed=4242):
    """Random and adversarial instances for n = 2..4 on which the exact plan is enumerated:
    zeros in p or q, p == q, one-hot drafts and targets, disjoint supports, ties, a mass of
    1 - 1e-12, float32 input."""
    rng = np.random.default_rng(seed)
    cases = []
    for k in range(count):
        n = 2 + k % 3
        V = int(rng.integers(3, 7 if n < 4 else 6))
        conc = (0.05, 0.3, 1.0, 5.0)[k % 4]
        p, q = dirichlet(rng, V, conc), dirichlet(rng, V, conc)
        shape = k % 9
        if shape == 0:
            q = p.copy()
        elif shape == 1:  # draft top-k and target zeros
            q[np.argsort(q)[: V // 2]] = 0.0
            p[np.argsort(p)[: V // 3]] = 0.0
        elif shape == 2:  # one-hot draft
            q = np.eye(V)[int(rng.integers(V))]
        elif shape == 3:  # one-hot target
            p = np.eye(V)[int(rng.integers(V))]
        elif shape == 4:  # disjoint supports
            order = rng.permutation(V)
            p[order[: V // 2]] = 0.0
            q[order[V // 2:]] = 0.0
        elif shape == 5:  # ties
            q = np.repeat(rng.dirichlet(np.ones(2)), -(-V // 2))[:V] + 0.0
        p, q = p / p.sum(), q / q.sum()
        if shape == 6:
            p = p * (1 - 1e-12)
        elif shape == 7:
            p, q = p.astype(np.float32), q.astype(np.float32)
        cases.append(Case(f"exact{k}-V{V}-n{n}-c{conc}-s{shape}", p, q, n))
    return cases


@pytest.mark.parametrize("tau", [1e-3, 1e-1])
@pytest.mark.parametrize("case", exact_instances(), ids=case_id)
def test_exact_plan_is_lossless_by_enumeration(case, tau):
    """L1 <= 1e-9 on every instance, also with a coarse tau (large truncated parts)."""
    plan = md.GlobalResolution(case.p, case.q, case.n, tau=tau)
    l1, accepted = enumerate_plan(case, plan)
    check_exact_plan(case, plan, l1, accepted)
    assert plan.law_error_bound == 0.0  # nothing is interpolated at this size


@pytest.mark.parametrize("case", exact_instances(count=12, seed=77), ids=case_id)
def test_exact_plan_over_budget_stays_exact(case):
    """A system refused by the work budget gets an empty truncation set: its tuples propose their
    first draft; the law is still exactly p."""
    plan = md.GlobalResolution(case.p, case.q, case.n, tau=1e-4, max_terms=0)
    l1, accepted = enumerate_plan(case, plan)
    check_exact_plan(case, plan, l1, accepted)


@pytest.mark.parametrize("case", exact_instances(count=6, seed=91), ids=case_id)
def test_samples_follow_the_transport(case):
    """plan.sample (the core's draw, which builds no law) against plan.transport: chi-square
    with fixed seeds at the most likely tuple."""
    from scipy.stats import chisquare
    plan = md.GlobalResolution(case.p, case.q, case.n, tau=1e-2)
    tuples, probs = case.support
    w = tuples[int(np.argmax(probs))]
    law = plan.transport(w)
    draws = np.bincount([plan.sample(w, seed) for seed in range(4000)], minlength=case.V)
    assert np.all(draws[law == 0] == 0)
    keep = law > 0
    if keep.sum() > 1:
        assert chisquare(draws[keep], 4000 * law[keep] / law[keep].sum()).pvalue > 1e-4


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


def test_success_rate_on_the_oracle_instances():
    failures = [c.name for c in CASES if not md.GlobalResolution(c.p, c.q, c.n, tau=1e-3).success]
    assert len(failures) <= 0.01 * len(CASES), failures


@pytest.mark.parametrize("case", CASES[::7], ids=case_id)
def test_paper_threshold_bound_is_reported_honestly(case):
    """Algorithm 1's 5 tau threshold (spec §8.3): the bound is checked, not assumed."""
    plan = md.GlobalResolution(case.p, case.q, case.n, tau=5e-2, paper_threshold=True, exact=False)
    l1, accepted = enumerate_plan(case, plan)
    assert l1 <= plan.l1_bound + 1e-12
    assert plan.success == (plan.l1_bound <= 15 * 5e-2 and plan.acceptance_bound <= 10 * 5e-2)


@pytest.mark.parametrize("case", [c for c in CASES if c.n >= 2][::5], ids=case_id)
def test_fallback_is_exactly_lossless(case):
    """A zero work budget makes every non-trivial system fail; the fallback must then be exact."""
    plan = md.GlobalResolution(case.p, case.q, case.n, tau=1e-3, max_terms=0, fallback=True)
    l1, accepted = enumerate_plan(case, plan)
    if plan.used_fallback:
        assert not plan.success
        assert l1 <= TOL and abs(accepted - case.brute[0]) <= TOL and abs(plan.alpha - case.brute[0]) <= TOL
    else:  # nothing to solve: both truncation sets are empty
        d = plan.diagnostics
        assert plan.success and d["outer"]["truncation_size"] == 0 and d["inner"]["truncation_size"] == 0


def test_a_failed_budget_is_reported():
    rng = np.random.default_rng(3)
    p, q = dirichlet(rng, 40, 1.0), dirichlet(rng, 40, 1.0)
    plan = md.GlobalResolution(p, q, 3, tau=1e-4, max_terms=10)
    assert not plan.success and not plan.used_fallback
    d = plan.diagnostics
    assert not (d["outer"]["within_budget"] and d["inner"]["within_budget"])


@pytest.mark.parametrize("case", [c for c in IID if c.n == 1], ids=case_id)
def test_single_draft_reproduces_the_closed_form(case):
    """n = 1: Theta_T separates with e^a / (1 + e^a) = p/q, so GR is the SpS closed form (spec §3)."""
    plan = md.GlobalResolution(case.p, case.q, 1, tau=1e-10, exact=False)
    sps = md.verifier("sps")
    for (w,), _ in zip(*case.support):
        np.testing.assert_allclose(plan.transport([w]), sps.transport(case.p, case.q, [w]), rtol=0, atol=1e-7)


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
        self.acceptance_bound = self.core.acceptance_bound
        self.diagnostics = self.core.diagnostics

    def transport(self, tuples):
        return self.core.transport(np.asarray(tuples, dtype=np.int64), self.V)


def check_against_enumeration(case, plan, tau):
    assert plan.success
    l1, accepted = enumerate_plan(case, plan)
    if plan.exact:
        check_exact_plan(case, plan, l1, accepted)
    else:
        assert l1 <= 15 * tau + TOL
        assert abs(accepted - plan.alpha) <= 1e-9
    assert abs(plan.alpha - plan.alpha_star) <= 10 * tau + TOL


def pair_instance(seed, V):
    """n = 2 instances with the adversarial shapes: p == q, zeros in q, ties, a dominant token,
    a target mass 1 - 1e-12, float32 inputs; concentrations from peaked (wide ranges of alpha,
    many interpolation pieces) to flat."""
    rng = np.random.default_rng(700 + seed)
    conc = (0.05, 0.3, 1.0, 5.0)[seed % 4]
    p, q = dirichlet(rng, V, conc), dirichlet(rng, V, conc)
    shape = seed % 6
    if shape == 0:  # p == q: alpha* = 1
        q = p.copy()
    elif shape == 1:  # draft top-k: zeros in q
        q[np.argsort(q)[: V // 4]] = 0.0
        q /= q.sum()
    elif shape == 2:  # ties: q takes four values only
        q = np.repeat(rng.dirichlet(np.ones(4)), -(-V // 4))[:V] + 0.0
        q /= q.sum()
    elif shape == 3:  # a dominant target token
        p = 0.02 * p
        p[int(rng.integers(V))] += 0.98
    elif shape == 4:  # target mass 1 - 1e-12 (within the package's normalisation tolerance)
        p = p / p.sum() * (1 - 1e-12)
    else:  # float32 input
        p, q = p.astype(np.float32), q.astype(np.float32)
    return Case(f"pairs{seed}-V{V}-c{conc}", p, q, 2)


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
def test_interpolated_pair_sums_against_enumeration(seed):
    """n = 2 on 200-240 tokens: the pair terms summed by Chebyshev interpolation of their Stieltjes
    transform (pair_sums.hpp), checked on all V**2 draft tuples."""
    rng = np.random.default_rng(seed)
    case = pair_instance(seed, int(rng.integers(200, 241)))
    used = False
    for tau in (1e-3, 1e-4):
        plan = md.GlobalResolution(case.p, case.q, 2, tau=tau)
        used = used or any(plan.diagnostics[s]["interpolated"] for s in ("outer", "inner"))
        check_against_enumeration(case, plan, tau)
    assert used


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


def test_large_vocabulary_bounds_against_exact_plan():
    """Beyond enumeration: compare with the exact max-flow plan on draft tuples of a V = 3000 pair."""
    rng = np.random.default_rng(8)
    logits = rng.standard_t(3, size=3000) * 2
    p = np.exp(logits - logits.max()); p /= p.sum()
    q = np.exp(logits + rng.normal(0, 1, 3000)); q[np.argsort(q)[:-40]] = 0; q /= q.sum()
    plan = md.GlobalResolution(p, q, 2, tau=1e-4)
    exact = md.solve_otlp(p, q, 2, method="maxflow_cs")
    assert plan.success and abs(plan.alpha - exact.alpha) <= 10 * 1e-4
    assert abs(plan.alpha_star - exact.alpha) <= 1e-12


@pytest.mark.parametrize("scheme, q_shape", [("without_replacement", (5,)), ("independent", (2, 5))])
def test_non_iid_schemes_are_refused(scheme, q_shape):
    p = np.full(5, 0.2)
    q = np.full(q_shape, 0.2)
    with pytest.raises(ValueError, match="i.i.d."):
        md.GlobalResolution(p, q, 2, scheme=scheme)


@pytest.mark.parametrize("tau", [0, -1e-3, 1.5, float("nan")])
def test_bad_tau(tau):
    with pytest.raises(ValueError, match="'tau'"):
        md.GlobalResolution(np.full(4, 0.25), np.full(4, 0.25), 2, tau=tau)


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


def expected_truncation(masses, block, n, tau):
    """Spec §8.2 by brute force: the smallest prefix, by decreasing mass, whose leftover R gives
    block^n - (block - R)^n <= tau; returns (size, its error)."""
    ordered = np.sort(np.asarray(masses, dtype=np.float64))[::-1]
    for size in range(len(ordered) + 1):
        leftover = ordered[size:][::-1].sum()  # summed from the lightest, as the core does
        with np.errstate(divide="ignore"):  # log1p(-1) = -inf: nothing kept, error block^n
            error = -block ** n * np.expm1(n * np.log1p(-min(leftover / block, 1.0))) if block > 0 else 0.0
        if error <= tau:
            return size, error
    raise AssertionError("the full set always passes")


def truncation_instances():
    rng = np.random.default_rng(818)
    instances = []
    for k in range(60):
        V, n = int(rng.integers(5, 400)), int(rng.integers(2, 5))
        p, q = dirichlet(rng, V, (0.05, 0.3, 1.0, 5.0)[k % 4]), dirichlet(rng, V, (0.05, 0.3, 1.0, 5.0)[k % 3])
        if k % 3 == 0:  # ties: q on a few levels
            q = np.round(q * 40) + (rng.random(V) < 0.5)
            q /= q.sum()
        tau = (1e-2, 1e-3, 1e-5)[k % 3]
        instances.append(pytest.param(p, q, n, tau, id=f"t{k}-V{V}-n{n}-tau{tau}"))
    # Over 4096 candidates in a system: the core narrows them to the lightest by buckets of
    # their leading key bits, then sorts those. Most leave (peaked), a few hundred (nearly flat),
    # ties on a few levels across the narrowing's cut, a tail 1e-15 light.
    for k, conc in enumerate((0.02, 0.3, 50.0)):
        p, q = dirichlet(rng, 12000, conc), dirichlet(rng, 12000, conc)
        instances.append(pytest.param(p, q, 2 + k, 1e-3, id=f"large{k}-V12000-c{conc}"))
    p, q = dirichlet(rng, 12000, 1.0), np.round(dirichlet(rng, 12000, 1.0) * 3e4) + 1.0
    instances.append(pytest.param(p, q / q.sum(), 2, 1e-3, id="large-ties-V12000"))
    q = np.concatenate([dirichlet(rng, 50, 1.0), np.full(11950, 1e-15)])
    instances.append(pytest.param(dirichlet(rng, 12000, 1.0), q / q.sum(), 3, 1e-4, id="large-tail-V12000"))
    return instances


@pytest.mark.parametrize("p, q, n, tau", truncation_instances())
def test_truncation_sets_are_the_minimal_prefixes_by_decreasing_q(p, q, n, tau):
    """Both systems' T against the brute-force definition (sizes and errors; with ties the members
    may differ, the size and leftover mass cannot): outer T among the draft support outside H*
    with the block Q(support), inner T among H* with p > 0 with the block Q(H*), and no inner T
    at all when Q(H*)^n <= tau."""
    d = md.GlobalResolution(p, q, n, tau).diagnostics
    _, H = md.optimal_subset(p, q, n)
    support = q > 0
    outer = support & ~H
    size, error = expected_truncation(q[outer], q[support].sum(), n, tau)
    assert d["outer"]["truncation_size"] == size
    assert d["outer"]["truncation_error"] == pytest.approx(error, rel=1e-9, abs=1e-300)
    inner, block = H & (p > 0), q[H].sum()
    size, error = expected_truncation(q[inner], block, n, tau)
    if block ** n <= tau:
        size, error = 0, block ** n
    assert d["inner"]["truncation_size"] == size
    assert d["inner"]["truncation_error"] == pytest.approx(error, rel=1e-9, abs=1e-300)


@pytest.mark.parametrize("k, index", [(100, 17), (1000, 13)])
def test_outer_system_with_tokens_heading_to_minus_infinity_converges(k, index):
    """Peaked Table 1 instances at tau = 1e-4 whose outer targets make some tokens' minimiser lie
    at -infinity (a target equal to the mass of the terms the token cannot share): their Newton
    components are huge, and scaling the whole step to the 30-per-step cap froze the other tokens
    (gradient stuck at 7.5e-4 and 1.9e-3 against thresholds of 2.6e-4 and 2.0e-4, while the LP
    optimum over the allocations is 3.3e-5). Clipping each component, around the median in the
    outer system's gauge, lets them converge."""
    from multidraft.bench.distributions import derive_seed, make_pairs

    p_all, q_all = make_pairs("peaked", 32000, k, 20, derive_seed(20240611, "peaked", k))
    plan = md.GlobalResolution(p_all[index], q_all[index], 2, 1e-4)
    assert plan.success
    assert plan.diagnostics["outer"]["gradient_l1"] < 3e-4

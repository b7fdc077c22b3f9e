"""Global Resolution ([GR] Section 6, Algorithm 1) through its public contract, against the exact
oracle, by enumeration.

The default (exact) plan must meet p to 1e-9 in L1 on every instance, with an acceptance between
alpha* - acceptance_bound and alpha*. The raw plan (exact=False): whenever ``success`` is true
its transport must meet p within 15 tau in L1 and its acceptance must be within 10 tau of
alpha*; ``success`` is false only when the bound really was not met; the fallback path is
exactly lossless. p = TARGET, q = DRAFT. The core's plan with its test-only options (the
summation paths forced one way or the other) is tested in test_internals.py.
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
    error), alpha is P(output in drafts) (kept proposals and residual draws that hit a draft;
    test_acceptance.py checks it to 1e-12), and 0 <= alpha* - alpha <= acceptance_bound (the bound
    derived in global_resolution.hpp)."""
    assert plan.exact
    assert l1 <= TOL  # the certified law_error_bound of interpolated sums (<= 1e-8) is never reached
    assert plan.law_error_bound <= 1e-8
    assert abs(plan.alpha - accepted) <= 1e-12 + plan.alpha_error_bound
    assert plan.kept <= accepted + 1e-12
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


def test_success_rate_on_the_oracle_instances():
    failures = [c.name for c in CASES if not md.GlobalResolution(c.p, c.q, c.n, tau=1e-3).success]
    assert len(failures) <= 0.01 * len(CASES), failures


@pytest.mark.parametrize("case", CASES[::7], ids=case_id)
def test_paper_threshold_bound_is_reported_honestly(case):
    """Algorithm 1's 5 tau threshold (see docs/design/certified-bounds.md): the bound is checked, not assumed."""
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
    """n = 1: Theta_T separates with e^a / (1 + e^a) = p/q, so GR is the SpS closed form of [NH]."""
    plan = md.GlobalResolution(case.p, case.q, 1, tau=1e-10, exact=False)
    sps = md.verifier("sps")
    for (w,), _ in zip(*case.support):
        np.testing.assert_allclose(plan.transport([w]), sps.transport(case.p, case.q, [w]), rtol=0, atol=1e-7)


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


def expected_truncation(masses, block, n, tau):
    """[GR] Algorithm 1's minimal T by brute force: the smallest prefix, by decreasing mass, whose leftover R gives
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

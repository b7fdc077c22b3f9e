"""Global Resolution's acceptance is P(output in drafts), for every plan: the exact plan (whose
residual draw may land on a draft), the raw plan (exact=False) and the fallback rows (the exact
max-flow plan's alpha*). Oracle: every draft tuple enumerated on tiny vocabularies,
sum_w P(w) sum_{x in set(w)} transport(w)(x), matched to 1e-12; on top, the frequency of verify's
accepted flag in seeded sampling. p = TARGET, q = DRAFT. The derivation is in
docs/design/output-correction.md, "Acceptance".
"""
import numpy as np
import pytest

import multidraft as md
from multidraft import _core
from conftest import Case, adversarial_pairs, dirichlet, normalised

ORACLE_TOL = 1e-12


def cases(count=160, seed=3131):
    """Random Dirichlet pairs (V <= 8, n = 2..4, V**n <= 4096; top-k zeros in q, zeros in p,
    near-equal p and q), and every adversarial pair at n = 2, 3, 4."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(count):
        n = 2 + k % 3
        V = int(rng.integers(2, 9 if n == 2 else 7 if n == 3 else 5))
        conc = (0.1, 0.5, 2.0, 10.0)[k % 4]
        p, q = dirichlet(rng, V, conc), dirichlet(rng, V, conc)
        if k % 5 == 1:  # a top-k draft: zeros in q
            q[np.argsort(q)[: V // 2]] = 0.0
        if k % 7 == 2:  # zeros in p
            p[np.argsort(p)[: V // 3]] = 0.0
        if k % 11 == 3:  # p and q equal but for a rounding-sized move
            q = p * (1 + 1e-9 * rng.standard_normal(V))
        out.append(Case(f"acc{k}-V{V}-n{n}-c{conc}", normalised(p), normalised(np.abs(q)), n))
    out += [Case(f"{name}-n{n}", p, q, n) for name, p, q, _ in adversarial_pairs() for n in (2, 3, 4)]
    return out


CASES = cases()


def enumerated_acceptance(case, plan):
    """sum_w P(w) sum_{x in set(w)} pi(x | w) over every tuple of positive probability."""
    tuples, probs = case.support
    tuples = np.asarray(tuples).reshape(len(probs), -1)
    laws = plan.transport(tuples)
    first = np.ones(tuples.shape, dtype=bool)  # each distinct draft counted once
    for i in range(tuples.shape[1]):
        for j in range(i):
            first[:, i] &= tuples[:, i] != tuples[:, j]
    return float((probs[:, None] * first * np.take_along_axis(laws, tuples, axis=1)).sum())


def core_plan(case, tau, exact=True, **options):
    return _core._testing.global_resolution_plan(case.p64, md.draft_scheme(case.q, case.n).q, case.n, tau, 50, 2e6,
                                                 False, exact, **options)


@pytest.mark.parametrize("tau", [1e-3, 1e-8])
@pytest.mark.parametrize("exact", [True, False], ids=["exact", "raw"])
def test_alpha_is_the_enumerated_acceptance(tau, exact):
    """alpha equals the enumerated P(output in drafts) to 1e-12 on every case, with no error bound
    (every subset enumerated); kept <= alpha <= alpha* (+ rounding)."""
    worst, gaps = 0.0, []
    for case in CASES:
        plan = md.GlobalResolution(case.p, case.q, case.n, tau=tau, exact=exact)
        oracle = enumerated_acceptance(case, plan)
        assert plan.alpha_error_bound == 0.0, case
        assert abs(plan.alpha - oracle) <= ORACLE_TOL, (case, plan.alpha, oracle)
        assert plan.kept <= plan.alpha + ORACLE_TOL, case
        if exact:
            assert plan.alpha <= plan.alpha_star + 1e-9, case
        worst = max(worst, abs(plan.alpha - oracle))
        gaps.append(plan.alpha - plan.kept)
    if exact and tau == 1e-3:
        assert max(gaps) > 1e-4  # the residual does land on drafts: kept alone would fail the oracle


def test_verifier_acceptance_is_the_plans_alpha():
    """md.verifier('global_resolution').acceptance is the same number as the plan's alpha (one
    meaning of acceptance through the core's verifier registry), exact, raw and fallback."""
    for case in CASES[::4]:
        for options in ({}, {"exact": False}, {"fallback": True, "max_iterations": 0, "tau": 1e-8}):
            verifier = md.verifier("global_resolution", **options)
            plan = verifier.plan(case.p, case.q, case.n)
            assert verifier.acceptance(case.p64, case.q64, case.n) == pytest.approx(plan.alpha, abs=1e-15), case


def test_fallback_rows_accept_alpha_star():
    """Rows that fall back use the exact max-flow plan: alpha is its acceptance alpha*, which the
    enumeration of that plan's transport confirms."""
    fell_back = 0
    for case in CASES:
        plan = md.GlobalResolution(case.p, case.q, case.n, tau=1e-8, fallback=True, max_iterations=0)
        if not plan.used_fallback:
            continue
        fell_back += 1
        assert abs(plan.alpha - enumerated_acceptance(case, plan)) <= ORACLE_TOL, case
        assert plan.alpha == pytest.approx(plan.alpha_star, abs=1e-12)
        assert md.verifier("global_resolution", tau=1e-8, fallback=True, max_iterations=0).acceptance(
            case.p64, case.q64, case.n) == pytest.approx(plan.alpha, abs=1e-15)
    assert fell_back >= 10


@pytest.mark.parametrize("tau", [1e-3, 1e-8])
def test_bounded_acceptance_contains_the_truth(tau):
    """Past the enumeration limit (forced to 0 here) alpha carries a certified bound:
    |alpha - enumerated| <= alpha_error_bound; the bound is positive only where a subset case
    was bounded, and the exact value is in [kept-side low, high]."""
    bounded = 0
    for case in CASES:
        plan = core_plan(case, tau, acceptance_enumeration=0.0)
        wrapped = md.GlobalResolution(case.p, case.q, case.n, tau=tau)  # same transport, enumerated alpha
        oracle = enumerated_acceptance(case, wrapped)
        assert abs(plan.alpha - oracle) <= plan.alpha_error_bound + ORACLE_TOL, (case, plan.alpha, oracle)
        assert plan.alpha - plan.alpha_error_bound <= oracle + ORACLE_TOL
        assert abs(wrapped.alpha - oracle) <= ORACLE_TOL
        bounded += plan.alpha_error_bound > 0
    assert bounded >= 20


def test_sampled_acceptance_frequency():
    """The frequency of verify's accepted flag over seeded draws matches alpha (5 sigma), on cases
    where the residual adds to the kept mass."""
    rng = np.random.default_rng(31)
    verifier = md.verifier("global_resolution", tau=1e-3)
    checked = 0
    for case in CASES:
        plan = md.GlobalResolution(case.p, case.q, case.n, tau=1e-3)
        if plan.alpha - plan.kept < 1e-3:
            continue
        draws = 40000
        drafts = rng.choice(case.V, size=(draws, case.n), p=case.q64)
        p = np.broadcast_to(case.p64, (draws, case.V)).copy()
        q = np.broadcast_to(case.q64, (draws, case.V)).copy()
        _, accepted = verifier.verify(p, q, drafts, rng=int(rng.integers(2**31)))
        sigma = np.sqrt(plan.alpha * (1 - plan.alpha) / draws) + 1e-12
        assert abs(accepted.mean() - plan.alpha) <= 5 * sigma, (case, accepted.mean(), plan.alpha, plan.kept)
        checked += 1
        if checked == 4:
            break
    assert checked >= 2


def test_acceptance_from_several_threads_equals_one_thread():
    """The acceptance's per-thread buffers: the same verifier from 4 threads at once, on rows of
    different sizes (buffers grow and shrink), gives what one thread gives."""
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(5)
    v = md.verifier("global_resolution")
    rows = []
    for V in (5, 40, 300, 12, 2000):
        p, q = rng.dirichlet(np.full(V, 0.3)), rng.dirichlet(np.full(V, 0.3))
        rows.append((p, q, int(rng.integers(2, 5))))
    expected = [v.acceptance(p, q, n) for p, q, n in rows]
    with ThreadPoolExecutor(4) as pool:
        for _ in range(3):
            got = list(pool.map(lambda row: v.acceptance(*row), rows * 4))
            assert got == expected * 4

"""[OOV]'s lemmas and theorems as numeric tests.

Statements the paper words too strongly are tested in their exact form, with negative tests
where the blanket claim fails: RDK does not always beat TLI (Theorem 5.1 allows a loss of
eps = ||M^T p - p||_1), and Eq. (3) approximates M^T q' only for near-uniform q' (Theorem 5.4).
"""
import math

import numpy as np
import pytest

import multidraft as md

rdk = md.rdk
TOL = 1e-9


def random_matrix(rng, V):
    M = rng.random((V, V)) ** 3
    return rdk.AffinityMatrix.from_dense(M / M.sum(axis=1, keepdims=True))


def random_instance(rng):
    """(p, q0 = TLI output, M) with a random pruned set and a random row-stochastic M."""
    V = int(rng.integers(2, 12))
    p = rng.dirichlet(np.full(V, 0.5))
    vmap = rdk.VocabularyMap.pruned(rng.choice(V, size=int(rng.integers(1, V + 1)), replace=False), V)
    return p, vmap.tli(rng.dirichlet(np.full(V, 0.5))), random_matrix(rng, V)


def l1(x, y):
    return float(np.abs(np.asarray(x) - np.asarray(y)).sum())


def test_lemma_2_3_acceptance_is_one_minus_total_variation():
    rng = np.random.default_rng(0)
    for _ in range(500):
        V = int(rng.integers(1, 20))
        p, q = rng.dirichlet(np.full(V, 0.4), size=2)
        kernel = np.maximum(q - p, 0)  # Definition 2.2
        alpha = md.acceptance_rate(p, q)
        assert abs(alpha - (1 - kernel.sum())) < TOL and abs(alpha - (1 - 0.5 * l1(p, q))) < TOL


def test_lemma_b1_row_stochastic_map_is_l1_nonexpansive():
    rng = np.random.default_rng(1)
    for _ in range(500):
        V = int(rng.integers(1, 12))
        M = random_matrix(rng, V).to_dense()
        x, y = rng.normal(size=(2, V))  # any real vectors
        assert l1(M.T @ x, M.T @ y) <= l1(x, y) + TOL


def test_theorem_5_1_and_its_corollary_hold_on_random_instances():
    rng = np.random.default_rng(2)
    for _ in range(2000):
        p, q0, M = random_instance(rng)
        p_prime = M.proposal(q0)
        eps = l1(M.proposal(p), p)
        assert l1(p_prime, p) <= l1(q0, p) + eps + TOL  # Theorem 5.1
        assert md.acceptance_rate(p, p_prime) >= md.acceptance_rate(p, q0) - 0.5 * eps - TOL  # + Lemma 2.3


def test_rdk_can_lose_to_tli_negative():
    """No blanket 'RDK >= TLI': a uniform M on a draft that already matches the target loses."""
    V = 4
    p = np.array([0.7, 0.1, 0.1, 0.1])
    q0 = rdk.VocabularyMap.pruned([0], V).tli(np.array([0.6, 0.2, 0.1, 0.1]))  # = e_0
    uniform = rdk.AffinityMatrix.from_dense(np.full((V, V), 1 / V))
    alpha_rdk, alpha_tli = md.acceptance_rate(p, uniform.proposal(q0)), md.acceptance_rate(p, q0)
    assert alpha_rdk < alpha_tli - 0.1  # 0.55 against 0.7
    assert alpha_rdk >= alpha_tli - 0.5 * l1(uniform.proposal(p), p) - TOL  # the corollary still holds


def test_theorem_5_2_softmax_is_half_lipschitz_in_l1():
    rng = np.random.default_rng(3)
    worst = 0.0
    for _ in range(3000):
        V = int(rng.integers(2, 30))
        z = rng.standard_t(5, size=V) * 3
        eta = rng.normal(size=V) * rng.choice([0.01, 0.3, 3.0])
        soft = lambda x: np.exp(x - x.max()) / np.exp(x - x.max()).sum()
        ratio = l1(soft(z + eta), soft(z)) / np.abs(eta).sum()
        worst = max(worst, ratio)
    assert worst <= 0.5 + TOL


def theorem_5_3_acceptances(p1, a):
    """alpha_TLI and alpha_RDK for m = 2, q' = e_1 (token 0 shared, token 1 OOV), M = [[a, 1-a], [1-a, a]],
    computed through the package."""
    p = np.array([p1, 1 - p1])
    q0 = rdk.VocabularyMap.pruned([0], 2).tli(np.array([0.8, 0.2]))
    M = rdk.AffinityMatrix.from_dense(np.array([[a, 1 - a], [1 - a, a]]))
    return md.acceptance_rate(p, q0), md.acceptance_rate(p, M.proposal(q0))


def test_theorem_5_3_monte_carlo():
    """z ~ N(mu, M) with mu_2 = mu_1 + 6 sqrt(a) (the theorem's 3-sigma separation): P(alpha_TLI <=
    alpha_RDK) >= 99.46%."""
    rng = np.random.default_rng(4)
    for a in (0.5, 0.7, 0.9, 0.99):
        M = np.array([[a, 1 - a], [1 - a, a]])
        z = rng.multivariate_normal([0.0, 6 * math.sqrt(a)], M, size=20_000)
        p1 = 1 / (1 + np.exp(z[:, 1] - z[:, 0]))
        tli = p1
        rdk_alpha = 1 - np.abs(p1 - a)  # exact form, checked against the package below
        for k in range(0, 20_000, 4000):
            assert np.allclose(theorem_5_3_acceptances(p1[k], a), (tli[k], rdk_alpha[k]), atol=TOL)
        assert np.mean(tli <= rdk_alpha) >= 0.9946


def test_theorem_5_3_exact_condition():
    """With 2 tokens and q' = e_1: alpha_RDK >= alpha_TLI  <=>  p_1 <= (1 + M_11) / 2."""
    for p1 in np.linspace(0.0, 1.0, 41):
        for a in np.linspace(0.5, 1.0, 21):
            tli, rdk_alpha = theorem_5_3_acceptances(p1, a)
            assert abs(tli - p1) < TOL and abs(rdk_alpha - (1 - abs(p1 - a))) < TOL
            if abs(p1 - (1 + a) / 2) > 1e-9:  # off the boundary, where both sides agree
                assert (rdk_alpha >= tli) == (p1 <= (1 + a) / 2)


def test_theorem_5_3_constant():
    inside = math.erf(3 / math.sqrt(2))  # P(|Z| <= 3)
    assert abs(inside**2 - 0.9946) < 1e-4 and abs((1 - 2 * (1 - inside)) - 0.9946) < 1e-4


def test_masked_never_beats_tli():
    rng = np.random.default_rng(5)
    for _ in range(1000):
        V = int(rng.integers(1, 12))
        p, q = rng.dirichlet(np.full(V, 0.5), size=2)
        vmap = rdk.VocabularyMap.pruned(rng.choice(V, size=int(rng.integers(1, V + 1)), replace=False), V)
        if vmap.shared_mass(q) > 0:
            assert rdk.masked_acceptance(p, vmap.masked(q)) <= md.acceptance_rate(p, vmap.tli(q)) + TOL


def rank_one_matrix(p, theta):
    """M with Omega / tau = theta 1 p^T (Theorem 5.4's assumption): every row is softmax(theta p)."""
    row = np.exp(theta * p) / np.exp(theta * p).sum()
    return rdk.AffinityMatrix.from_dense(np.tile(row, (len(p), 1)))


@pytest.mark.parametrize("N", [100, 300, 1000])
def test_theorem_5_4_in_its_regime(N):
    """(a) q' uniform => p_Taylor uniform exactly; (b) with q' uniform and Omega/tau = theta 1 p^T
    and theta = p^T q' (= 1/N here) the gap ||p_Taylor - M^T q'||_1 shrinks like 1/N^2 (about
    1.5e-4 at N = 100)."""
    rng = np.random.default_rng(N)
    p = rng.dirichlet(np.ones(N))
    uniform = np.full(N, 1 / N)
    taylor = rdk.taylor_proposal(uniform, p)  # prior = p (oracle), n_eff = N: the theorem's setting
    np.testing.assert_allclose(taylor, uniform, atol=1e-15)
    gap = l1(taylor, rank_one_matrix(p, p @ uniform).proposal(uniform))
    assert gap * N**2 < 5.0


@pytest.mark.parametrize("N", [100, 300, 1000])
def test_theorem_5_4_fails_outside_its_regime_negative(N):
    """With a pruned, non-uniform q' the gap is O(1) for every N: do not assume p_Taylor ~ M^T q'."""
    rng = np.random.default_rng(N + 1)
    logits = rng.standard_t(5, size=N)
    p = np.exp(logits) / np.exp(logits).sum()
    noisy = logits + rng.normal(size=N)
    q = np.exp(noisy) / np.exp(noisy).sum()
    q_prime = rdk.VocabularyMap.frequency_ranked(np.argsort(np.argsort(p)), N // 4).tli(q)
    gap = l1(rdk.taylor_proposal(q_prime, p), rank_one_matrix(p, p @ q_prime).proposal(q_prime))
    assert gap > 1.0


def test_faithful_taylor_is_numerically_tli_at_full_vocabulary():
    """Eq. (3) as printed: with n_eff = |T| the first-order form moves at most 1/|T| of the mass."""
    rng = np.random.default_rng(6)
    N = 50_000
    logits = rng.standard_t(5, size=N) * 0.7
    p = np.exp(logits) / np.exp(logits).sum()
    noisy = logits + rng.normal(scale=0.5, size=N)
    q = np.exp(noisy) / np.exp(noisy).sum()
    q_prime = rdk.VocabularyMap.pruned(np.argsort(-p)[:500], N).tli(q)
    taylor = rdk.taylor_proposal(q_prime, p)
    assert l1(taylor, q_prime) <= 2 / N
    assert abs(md.acceptance_rate(p, taylor) - md.acceptance_rate(p, q_prime)) <= 1 / N
    tuned = rdk.taylor_proposal(q_prime, p, n_eff=1.0)  # n_eff exposed: more mass onto the prior
    assert l1(tuned, q_prime) > 100 * l1(taylor, q_prime)

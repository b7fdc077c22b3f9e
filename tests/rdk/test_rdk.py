"""[OOV] (RDK): vocabulary maps, the affinity matrix, the proposals and their verification.

Every fast path is checked against an independent NumPy oracle written here; losslessness is
checked exactly by enumeration (sum over drafts of P(d) * transport(d) == p) for every proposal,
with chi-square sampling tests on top. p = TARGET, q = DRAFTER.
"""
import itertools

import numpy as np
import pytest
from scipy import stats

import multidraft as md
from oracle import tuple_probability

rdk = md.rdk
TOL = 1e-12


# ----------------------------------------------------------------------------- oracles

def oracle_frequency_ranked(counts, size):
    return np.lexsort((np.arange(len(counts)), -np.asarray(counts)))[:size]


def oracle_tli(q, mapping, target_size):
    out = np.zeros(target_size)
    for d, t in enumerate(mapping):
        if t >= 0:
            out[t] += q[d]
    return out / out.sum(), out


def oracle_affinity(samples, tau, top_k, rows, kind="covariance"):
    """Dense M: Eq. (2) on the top-k entries of each row in rows (renormalised), e_i elsewhere."""
    V = samples.shape[1]
    omega = (np.cov if kind == "covariance" else np.corrcoef)(samples, rowvar=False).reshape(V, V)
    V = omega.shape[0]
    M = np.eye(V)
    for i in rows:
        top = np.lexsort((np.arange(V), -omega[i]))[:top_k]
        w = np.exp((omega[i, top] - omega[i, top].max()) / tau)
        M[i] = 0.0
        M[i, top] = w / w.sum()
    return M


def oracle_taylor(q_prime, prior, n_eff):
    theta = prior @ q_prime
    tilde = (n_eff * q_prime + theta * prior) / (n_eff + prior)
    return tilde / tilde.sum()


def oracle_sps(p, r, d):
    """Speculative sampling's output law given draft d from proposal r, residual over all tokens."""
    accept = min(1.0, p[d] / r[d])
    residual = np.maximum(p - r, 0.0)
    law = (1 - accept) * (residual / residual.sum() if residual.sum() > 0 else p)
    law[d] += accept
    return law


def random_stochastic(rng, V, density=0.5):
    M = rng.random((V, V)) * (rng.random((V, V)) < density)
    M[np.arange(V), rng.integers(0, V, V)] += 0.1  # no empty row
    return M / M.sum(axis=1, keepdims=True)


def pruned_instance(rng, V, kept_size, concentration=0.5):
    """(p, q, VocabularyMap) in the pruned regime with FR-pruning on random counts."""
    p = rng.dirichlet(np.full(V, concentration))
    q = rng.dirichlet(np.full(V, concentration))
    counts = rng.integers(0, 5, V)
    return p, q, rdk.VocabularyMap.frequency_ranked(counts, kept_size)


def proposals(p, q, vmap, M, prior, n_eff):
    """Every distribution-valued proposal of one instance: {name: r (V,)}."""
    q_prime = vmap.tli(q)
    return {"tli": q_prime, "rdk": M.proposal(q_prime), "taylor": rdk.taylor_proposal(q_prime, prior, n_eff)}


def enumerated_law(p, r):
    """sum_d r(d) * transport(p, r, d) by the package, one row per draft d with r(d) > 0."""
    drafts = np.flatnonzero(r > 0)
    laws = rdk.transport(np.tile(p, (len(drafts), 1)), np.tile(r, (len(drafts), 1)), drafts[:, None])
    return r[drafts] @ laws, laws, drafts


# ----------------------------------------------------------------------------- vocabulary maps

def test_frequency_ranked_matches_oracle_with_ties():
    rng = np.random.default_rng(1)
    for _ in range(50):
        V = int(rng.integers(1, 40))
        counts = rng.integers(0, 4, V)  # many ties
        for size in {1, V, int(rng.integers(1, V + 1))}:
            assert np.array_equal(rdk.frequency_ranked(counts, size), oracle_frequency_ranked(counts, size))
    assert list(rdk.frequency_ranked([3, 5, 5, 0, 3], 4)) == [1, 2, 0, 4]


@pytest.mark.parametrize("counts,size,match", [
    ([1.0, 2.0], 1, "integer"), ([1, -2], 1, "negative"), ([1, 2], 3, "exceeds"), ([1, 2], 0, ">= 1"),
    ([[1, 2]], 1, "1-D"), ([], 1, "non-empty"),
])
def test_frequency_ranked_rejects(counts, size, match):
    with pytest.raises(ValueError, match=match):
        rdk.frequency_ranked(np.array(counts), size)


def test_pruned_map_sets():
    vmap = rdk.VocabularyMap.frequency_ranked(np.array([5, 1, 9, 0, 5]), 3)
    assert list(vmap.shared) == [0, 2, 4]
    assert list(vmap.target_only) == [1, 3]
    assert list(vmap.unmapped) == [1, 3]  # the pruned drafter ids


def test_intersection_map_heterogeneous_tli_matches_oracle():
    draft_vocab = ["a", "b", "zz", "c", "yy"]
    target_vocab = ["c", "x", "a", "b", "w"]
    vmap = rdk.VocabularyMap.intersection(draft_vocab, target_vocab)
    assert list(vmap.draft_to_target) == [2, 3, -1, 0, -1]
    assert list(vmap.shared) == [0, 2, 3] and list(vmap.target_only) == [1, 4] and list(vmap.unmapped) == [2, 4]
    rng = np.random.default_rng(2)
    q = rng.dirichlet(np.ones(5), size=7)
    q_prime = vmap.tli(q)
    masked = vmap.masked(q)
    for b in range(7):
        tli, mask = oracle_tli(q[b], vmap.draft_to_target, 5)
        np.testing.assert_allclose(q_prime[b], tli, atol=TOL)
        np.testing.assert_allclose(masked[b], mask, atol=TOL)
    np.testing.assert_allclose(vmap.shared_mass(q), masked.sum(axis=1), atol=TOL)


def test_vocabulary_map_errors():
    with pytest.raises(ValueError, match="I is empty"):
        rdk.VocabularyMap.intersection(["a"], ["b"])
    with pytest.raises(ValueError, match="not injective"):
        rdk.VocabularyMap([0, 0], 2)
    with pytest.raises(ValueError, match="repeated"):
        rdk.VocabularyMap.intersection(["a", "a"], ["a"])
    with pytest.raises(ValueError, match="out of range"):
        rdk.VocabularyMap([0, 5], 3)
    vmap = rdk.VocabularyMap.pruned([0, 1], 4)
    with pytest.raises(ValueError, match="no mass on the shared vocabulary"):
        vmap.tli([0.0, 0.0, 0.5, 0.5])
    with pytest.raises(ValueError, match="vocabulary size 3"):
        vmap.tli([0.5, 0.5, 0.0])
    with pytest.raises(ValueError, match="'q'"):
        vmap.tli([0.5, 0.7, 0.0, 0.0])
    with pytest.raises(ValueError, match="'q'"):
        vmap.tli([np.nan, 1.0, 0.0, 0.0])


def test_tli_float32_and_zero_entries_define_I_by_vocabulary():
    vmap = rdk.VocabularyMap.pruned([0, 2], 4)
    q = np.array([0.0, 0.25, 0.5, 0.25], dtype=np.float32)
    np.testing.assert_array_equal(vmap.tli(q), [0.0, 0.0, 1.0, 0.0])
    assert list(vmap.shared) == [0, 2]  # q(0) = 0 does not remove token 0 from I (membership, [OOV] Section 2)


# ----------------------------------------------------------------------------- affinity matrix

@pytest.mark.parametrize("V,K,top_k,tau", [(7, 30, 7, 1.0), (20, 50, 4, 0.3), (33, 10, 1, 2.0), (50, 5, 9, 10.0)])
def test_affinity_matrix_matches_dense_oracle(V, K, top_k, tau):
    rng = np.random.default_rng(V)
    samples = rng.standard_t(5, size=(K, V)) * 2.0
    rows = np.sort(rng.choice(V, size=max(1, V // 2), replace=False))
    M = rdk.AffinityMatrix.from_calibration(samples, tau, top_k, rows)
    np.testing.assert_allclose(M.to_dense(), oracle_affinity(samples, tau, top_k, rows), atol=1e-12)
    assert M.nnz == len(rows) * top_k + (V - len(rows))
    full = rdk.AffinityMatrix.from_calibration(samples.astype(np.float32), tau, top_k)
    np.testing.assert_allclose(full.to_dense(), oracle_affinity(samples.astype(np.float32).astype(np.float64), tau,
                                                                top_k, range(V)), atol=1e-12)


def test_affinity_matrix_from_correlation_matches_oracle():
    rng = np.random.default_rng(21)
    samples = rng.standard_t(5, size=(30, 15)) * rng.uniform(0.5, 3, size=15)
    rows = np.array([0, 4, 9, 14])
    M = rdk.AffinityMatrix.from_calibration(samples, 0.2, 5, rows, omega="correlation")
    np.testing.assert_allclose(M.to_dense(), oracle_affinity(samples, 0.2, 5, rows, "correlation"), atol=1e-10)
    sharp = rdk.AffinityMatrix.from_calibration(samples, 1e-6, 5, omega="correlation").to_dense()
    np.testing.assert_allclose(sharp, np.eye(15), atol=1e-12)  # the diagonal 1 is each row's maximum
    constant = samples.copy()
    constant[:, 4] = 2.0
    with pytest.raises(ValueError, match="token 4"):
        rdk.affinity_scores(constant, 5, rows, omega="correlation")
    with pytest.raises(ValueError, match="'omega'"):
        rdk.affinity_scores(samples, 5, omega="cov")


def test_affinity_top_k_equals_renormalised_full_softmax():
    """Top-k of the full Eq. (2) row, renormalised, is what the matrix holds (sparse storage,
    renormalised as Assumption 4.1 needs)."""
    rng = np.random.default_rng(3)
    samples = rng.normal(size=(40, 12))
    omega = np.cov(samples, rowvar=False)
    full = np.exp(omega / 0.5) / np.exp(omega / 0.5).sum(axis=1, keepdims=True)  # Eq. (2), dense
    M = rdk.AffinityMatrix.from_calibration(samples, 0.5, 4).to_dense()
    for i in range(12):
        top = np.argsort(-full[i])[:4]
        expected = np.zeros(12)
        expected[top] = full[i, top] / full[i, top].sum()
        np.testing.assert_allclose(M[i], expected, atol=1e-12)


def test_affinity_ties_break_to_smaller_column_and_tau_limits():
    # integer samples: every covariance entry is exact, so equal entries tie exactly
    samples = np.array([[1, 1, 1, 0], [-1, -1, -1, 0], [1, 1, 1, 0], [-1, -1, -1, 0]], dtype=float)
    scores = rdk.affinity_scores(samples, 2)
    assert [list(scores.indices[scores.indptr[i]:scores.indptr[i + 1]]) for i in range(4)] == [[0, 1], [0, 1], [0, 1],
                                                                                               [0, 1]]
    np.testing.assert_allclose(scores.matrix(1e-9).to_dense()[0], [0.5, 0.5, 0, 0])  # tau -> 0: ties split
    rng = np.random.default_rng(4)
    wide = rdk.affinity_scores(rng.normal(size=(20, 6)), 6)
    np.testing.assert_allclose(wide.matrix(1e9).to_dense(), np.full((6, 6), 1 / 6), atol=1e-8)  # tau -> inf: uniform
    assert np.all(np.isin(wide.matrix(1e-6).to_dense(), [0.0, 1.0]))  # no ties here: hard argmax


def test_affinity_scores_restrict_equals_direct():
    rng = np.random.default_rng(5)
    samples = rng.normal(size=(15, 30))
    scores = rdk.affinity_scores(samples, 5)
    rows = np.array([3, 17, 29, 0])
    direct = rdk.affinity_scores(samples, 5, rows)
    np.testing.assert_allclose(scores.restrict(rows).matrix(0.7).to_dense(), direct.matrix(0.7).to_dense(), atol=0)
    with pytest.raises(ValueError, match="not computed"):
        direct.restrict([1])


@pytest.mark.parametrize("indptr,indices,values,match", [
    ([0, 1, 2], [0, 1], [1.0, -0.0 - 1e-3], "invalid entry"),
    ([0, 1, 2], [0, 1], [1.0, np.nan], "invalid entry"),
    ([0, 1, 2], [0, 1], [1.0, 0.5], "row 1 sums to 0.5"),
    ([0, 1, 2], [0, 2], [1.0, 1.0], "out of range"),
    ([0, 2, 1], [0, 1], [1.0, 1.0], "indptr"),
    ([0, 1, 3], [0, 1], [1.0, 1.0], "indptr"),
    ([0, 1, 1], [0], [1.0], "row 1 sums to 0"),
    ([0, 1, 2], [0, 1, 1], [1.0, 1.0], "shape"),
    ([1.0, 2.0], [0], [1.0], "integer"),
])
def test_affinity_matrix_validation(indptr, indices, values, match):
    with pytest.raises(ValueError, match=match):
        rdk.AffinityMatrix(np.array(indptr), np.array(indices), np.array(values))


def test_affinity_matrix_renormalise_flag():
    M = rdk.AffinityMatrix(np.array([0, 2, 2, 3]), np.array([0, 2, 1]), np.array([2.0, 2.0, 0.0]), renormalise=True)
    np.testing.assert_allclose(M.to_dense(), [[0.5, 0, 0.5], [0, 1, 0], [0, 0, 1]])  # empty and zero rows -> e_i
    with pytest.raises(ValueError, match="square"):
        rdk.AffinityMatrix.from_dense(np.ones((2, 3)) / 3)
    with pytest.raises(ValueError, match="invalid entry"):
        rdk.AffinityMatrix.from_dense(np.array([[np.inf, 0], [0, 1]]))


@pytest.mark.parametrize("kwargs,match", [
    ({"samples": np.ones((1, 4))}, "at least 2 contexts"),
    ({"samples": np.full((3, 4), np.nan)}, "not finite"),
    ({"samples": np.ones(4)}, "2-D"),
    ({"top_k": 5}, "exceeds"),
    ({"top_k": 0}, ">= 1"),
    ({"rows": [0, 0]}, "repeated"),
    ({"rows": [4]}, "out of range"),
])
def test_affinity_scores_validation(kwargs, match):
    args = {"samples": np.random.default_rng(0).normal(size=(5, 4)), "top_k": 2, **kwargs}
    with pytest.raises(ValueError, match=match):
        rdk.affinity_scores(**args)


@pytest.mark.parametrize("tau", [0.0, -1.0, np.inf, np.nan, True])
def test_affinity_rejects_bad_tau(tau):
    scores = rdk.affinity_scores(np.random.default_rng(0).normal(size=(5, 4)), 2)
    with pytest.raises(ValueError, match="tau"):
        scores.matrix(tau)


def test_dense_size_limit():
    with pytest.raises(ValueError, match="MAX_DENSE_VOCAB"):
        rdk.AffinityMatrix.identity(rdk.MAX_DENSE_VOCAB + 1).to_dense()


def test_select_temperature_is_the_argmax_of_held_out_acceptance():
    rng = np.random.default_rng(6)
    V = 30
    logits = rng.standard_t(5, size=(120, V))
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    vmap = rdk.VocabularyMap.frequency_ranked(np.round(p.sum(axis=0) * 100).astype(np.int64), 10)
    scores = rdk.affinity_scores(logits[:80], 8, vmap.shared)
    noisy = logits[80:] + rng.normal(size=(40, V))
    q_prime = vmap.tli(np.exp(noisy) / np.exp(noisy).sum(axis=1, keepdims=True))
    taus = [0.05, 0.5, 2.0, 20.0]
    best, means = rdk.select_temperature(scores, taus, p[80:], q_prime)
    expected = [np.mean(np.minimum(p[80:], q_prime @ oracle_affinity(logits[:80], t, 8, vmap.shared)).sum(axis=1))
                for t in taus]
    np.testing.assert_allclose(means, expected, atol=1e-12)
    assert best == taus[int(np.argmax(expected))]
    with pytest.raises(ValueError, match="must both be"):
        rdk.select_temperature(scores, taus, p[80:90], q_prime)


# ----------------------------------------------------------------------------- proposals

def test_rdk_proposal_matches_dense_oracle_batched_and_float32():
    rng = np.random.default_rng(7)
    for _ in range(100):
        V = int(rng.integers(1, 12))
        M = rdk.AffinityMatrix.from_dense(random_stochastic(rng, V))
        q_prime = rng.dirichlet(np.full(V, 0.5), size=4)
        q_prime[0] = np.eye(V)[rng.integers(V)]
        out = M.proposal(q_prime)
        np.testing.assert_allclose(out, q_prime @ M.to_dense(), atol=TOL)
        assert np.all(out >= 0) and np.allclose(out.sum(axis=1), 1, atol=TOL)  # Assumption 4.1 consequence
        np.testing.assert_allclose(rdk.rdk_proposal(q_prime[1], M), out[1], atol=0)
    dyadic = np.array([0.25, 0.5, 0.25], dtype=np.float32)
    np.testing.assert_allclose(rdk.AffinityMatrix.identity(3).proposal(dyadic), dyadic, atol=0)
    with pytest.raises(ValueError, match="vocabulary size 2"):
        rdk.AffinityMatrix.identity(3).proposal([0.5, 0.5])


def test_identity_matrix_reduces_rdk_to_tli():
    rng = np.random.default_rng(8)
    p, q, vmap = pruned_instance(rng, 9, 4)
    q_prime = vmap.tli(q)
    # equal up to the normalisation of q' by its float64 sum (an ulp)
    np.testing.assert_allclose(rdk.AffinityMatrix.identity(9).proposal(q_prime), q_prime, rtol=1e-15, atol=0)
    draws = rdk.AffinityMatrix.identity(9).sample(q_prime, 200, rng=3)
    assert np.all(np.isin(draws, vmap.shared))


def test_two_stage_sampling_follows_the_marginal_chi_square():
    rng = np.random.default_rng(9)
    V = 8
    M = rdk.AffinityMatrix.from_dense(random_stochastic(rng, V, 0.4))
    q_prime = rdk.VocabularyMap.pruned([1, 4, 6], V).tli(rng.dirichlet(np.ones(V)))
    p_prime = M.proposal(q_prime)
    draws = M.sample(q_prime, 200_000, rng=11)
    observed = np.bincount(draws, minlength=V)
    support = p_prime > 0
    assert np.all(observed[~support] == 0)
    assert stats.chisquare(observed[support], 200_000 * p_prime[support]).pvalue > 1e-3
    batch = M.sample(np.tile(q_prime, (3, 1)), 5, rng=[1, 2, 3])
    assert np.array_equal(batch[1], M.sample(q_prime, 5, rng=2))  # batch == loop with per-row seeds


def test_taylor_matches_oracle_and_its_exact_properties():
    rng = np.random.default_rng(10)
    for _ in range(200):
        V = int(rng.integers(2, 15))
        q_prime = rdk.VocabularyMap.pruned(np.arange(int(rng.integers(1, V + 1))), V).tli(rng.dirichlet(np.ones(V)))
        prior = rng.dirichlet(np.full(V, 0.7))
        n_eff = float(rng.choice([V, 0.5, 3.0]))
        out = rdk.taylor_proposal(q_prime, prior, n_eff)
        np.testing.assert_allclose(out, oracle_taylor(q_prime, prior, n_eff), atol=TOL)
        # magnitude bound (unnormalised, each entry moves by at most prior_t / n_eff):
        # ||p_T - q'||_1 <= 2 / n_eff and |alpha gap| <= 1 / n_eff
        p = rng.dirichlet(np.ones(V))
        assert np.abs(out - q_prime).sum() <= 2 / n_eff + TOL
        assert abs(md.acceptance_rate(p, out) - md.acceptance_rate(p, q_prime)) <= 1 / n_eff + TOL
        np.testing.assert_allclose(rdk.taylor_proposal(q_prime, np.zeros(V)), q_prime, atol=TOL)  # pi = 0
        disjoint = np.where(q_prime > 0, 0.0, 1.0)  # theta = 0
        np.testing.assert_allclose(rdk.taylor_proposal(q_prime, disjoint, n_eff), q_prime, atol=TOL)
        np.testing.assert_allclose(rdk.taylor_proposal(np.full(V, 1 / V), prior, n_eff), np.full(V, 1 / V), atol=TOL)
        theta = prior @ q_prime
        if theta > 0:  # support is I union supp(pi)
            assert np.array_equal(out > 0, (q_prime > 0) | (prior > 0))


@pytest.mark.parametrize("kwargs,match", [
    ({"prior": [0.5, -0.5, 1.0]}, "prior"), ({"prior": [0.5, 0.5]}, "length"), ({"n_eff": 0.0}, "n_eff"),
    ({"n_eff": np.nan}, "n_eff"), ({"q_prime": [0.5, 0.5, 0.5]}, "q_prime"),
])
def test_taylor_validation(kwargs, match):
    args = {"q_prime": [0.5, 0.5, 0.0], "prior": [1 / 3] * 3, **kwargs}
    with pytest.raises(ValueError, match=match):
        rdk.taylor_proposal(**args)


def test_priors():
    np.testing.assert_allclose(rdk.unigram_prior(np.array([1, 3, 0])), [0.25, 0.75, 0.0])
    with pytest.raises(ValueError, match="all zero"):
        rdk.unigram_prior(np.zeros(3, dtype=int))
    rng = np.random.default_rng(12)
    direction = np.array([3.0, -1.0, 0.0, 0.5])
    samples = rng.normal(size=(200, 1)) * direction + 1e-3 * rng.normal(size=(200, 4))
    np.testing.assert_allclose(rdk.leading_component_prior(samples), np.abs(direction) / 4.5, atol=1e-3)
    with pytest.raises(ValueError, match="do not vary"):
        rdk.leading_component_prior(np.ones((3, 4)))


# ----------------------------------------------------------------------------- losslessness (exact)

def instances(count, seed):
    """Random and adversarial (p, q, vmap, M, prior, n_eff) in the pruned and heterogeneous regimes."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(count):
        V = int(rng.integers(2, 9))
        p, q, vmap = pruned_instance(rng, V, int(rng.integers(1, V + 1)), (0.3, 3.0)[k % 2])
        if k % 5 == 0:  # heterogeneous: a drafter with extra tokens the target lacks (F non-empty)
            Vd, shared = V + int(rng.integers(1, 4)), int(rng.integers(1, V + 1))
            mapping = np.full(Vd, -1)
            mapping[rng.choice(Vd, shared, replace=False)] = rng.choice(V, shared, replace=False)
            q = rng.dirichlet(np.ones(Vd))
            vmap = rdk.VocabularyMap(mapping, V)
        M = rdk.AffinityMatrix.from_dense(random_stochastic(rng, V)) if k % 3 else \
            rdk.AffinityMatrix.from_calibration(rng.standard_t(5, size=(10, V)), 0.5, max(1, V // 2), vmap.shared)
        out.append((f"rand{k}", p, q, vmap, M, rng.dirichlet(np.ones(V)), float(rng.choice([V, 1.0, 0.1]))))
    V = 5
    vmap = rdk.VocabularyMap.pruned([0, 1], V)
    uniform = rdk.AffinityMatrix.from_dense(np.full((V, V), 1 / V))
    q = np.array([0.5, 0.2, 0.1, 0.1, 0.1])
    out += [
        ("onehot_p_oov", np.eye(V)[4], q, vmap, uniform, np.full(V, 0.2), 1.0),   # target only on an OOV token
        ("onehot_p_shared", np.eye(V)[0], q, vmap, uniform, np.full(V, 0.2), 1.0),
        ("p_zero_where_proposal_positive", np.array([0, 0, 0.5, 0.5, 0]), q, vmap, uniform, np.eye(V)[4], 0.5),
        ("p_equals_proposal", np.full(V, 0.2), q, vmap, uniform, np.full(V, 0.2), 1.0),
        ("identity_M", np.array([0.3, 0.1, 0.2, 0.2, 0.2]), q, vmap, rdk.AffinityMatrix.identity(V), np.eye(V)[0], 5.0),
        ("mass_short", np.array([0.3, 0.1, 0.2, 0.2, 0.2 - 1e-12]), q, vmap, uniform, np.full(V, 0.2), 5.0),
        ("float32", np.array([0.25, 0.125, 0.125, 0.25, 0.25], dtype=np.float32), q.astype(np.float32), vmap, uniform,
         np.full(V, 0.2, dtype=np.float32), 2.0),
    ]
    return out


INSTANCES = instances(120, 13)


@pytest.mark.parametrize("instance", INSTANCES, ids=lambda c: c[0])
def test_every_proposal_is_lossless_by_enumeration(instance):
    name, p, q, vmap, M, prior, n_eff = instance
    p64 = np.asarray(p, dtype=np.float64)
    for kind, r in proposals(p, q, vmap, M, prior, n_eff).items():
        law, laws, drafts = enumerated_law(p, r)
        np.testing.assert_allclose(law, p64 / p64.sum(), atol=1e-10, err_msg=kind)
        for d, row in zip(drafts, laws):  # the package's law is speculative sampling's, residual over all T
            np.testing.assert_allclose(row, oracle_sps(p64 / p64.sum(), r, d), atol=1e-12, err_msg=kind)
        # acceptance meaning: P(accepted) = sum min(p, r)
        accepted = sum(r[d] * laws[k][d] for k, d in enumerate(drafts))
        np.testing.assert_allclose(accepted, np.minimum(p64, r).sum(), atol=1e-10)
    # masked baseline: drafts are shared ids (prob q(d)) or -1 (prob 1 - q(I)), residual (p - q_mask)^+
    q_mask = vmap.masked(q)
    shared = np.flatnonzero(q_mask > 0)
    dropped = [-1] if 1 - q_mask.sum() > 0 else []  # the unpruned drafter drew a token outside I
    drafts = np.concatenate([shared, dropped]).astype(np.int64)
    weights = np.concatenate([q_mask[shared], [1 - q_mask.sum()] * len(dropped)])
    laws = rdk.masked_transport(np.tile(p, (len(drafts), 1)), np.tile(q_mask, (len(drafts), 1)), drafts[:, None])
    np.testing.assert_allclose(weights @ laws, p64 / p64.sum(), atol=1e-10, err_msg="masked")
    alpha = sum(w * law[d] for w, law, d in zip(weights, laws, shared))
    np.testing.assert_allclose(alpha, rdk.masked_acceptance(p, q_mask), atol=1e-10)
    assert rdk.masked_acceptance(p, q_mask) <= md.acceptance_rate(p, vmap.tli(q)) + TOL  # masked <= TLI


def test_masked_discard_draft_is_always_rejected():
    p = np.array([0.1, 0.2, 0.7])
    q_mask = np.array([0.5, 0.0, 0.0])
    law = rdk.masked_transport(p, q_mask, [-1])
    np.testing.assert_allclose(law, [0.0, 0.2 / 0.9, 0.7 / 0.9])
    token, accepted = rdk.masked_verify(p, q_mask, [-1], rng=1)
    assert token in (1, 2) and not accepted
    with pytest.raises(ValueError, match="sum to at most 1"):
        rdk.masked_acceptance(p, np.array([0.9, 0.9, 0.0]))
    with pytest.raises(ValueError, match="shape"):
        rdk.masked_acceptance(p, np.array([0.5, 0.0]))


def test_verifying_with_anything_but_the_marginal_breaks_losslessness():
    """A toy implementation's mistake: accept ratio from q'(i) instead of p'(j) is not lossless."""
    p = np.array([0.2, 0.3, 0.5])
    q_prime = np.array([1.0, 0.0, 0.0])
    M = rdk.AffinityMatrix.from_dense(np.array([[0.5, 0.25, 0.25], [0, 1, 0], [0, 0, 1]]))
    p_prime = M.proposal(q_prime)
    np.testing.assert_allclose(enumerated_law(p, p_prime)[0], p, atol=1e-12)
    wrong = sum(p_prime[d] * oracle_sps(p, np.where(np.arange(3) == d, q_prime[0], p_prime), d) for d in range(3))
    assert np.abs(wrong - p).sum() > 1e-3


# ----------------------------------------------------------------------------- sampling (chi-square)

@pytest.mark.parametrize("kind", ["tli", "rdk", "taylor", "masked"])
def test_verified_tokens_follow_the_target_chi_square(kind):
    rng = np.random.default_rng(14)
    V, B = 6, 60_000
    p, q, vmap = pruned_instance(rng, V, 3, 1.0)
    M = rdk.AffinityMatrix.from_dense(random_stochastic(rng, V))
    q_prime = vmap.tli(q)
    if kind == "masked":  # draw from the unpruned drafter; a token outside I is drafted as -1
        d = rng.choice(V, size=B, p=q)
        d = np.where(np.isin(d, vmap.shared), d, -1)[:, None]
        tokens, accepted = rdk.masked_verify(np.tile(p, (B, 1)), np.tile(vmap.masked(q), (B, 1)), d, rng)
        alpha = rdk.masked_acceptance(p, vmap.masked(q))
    else:
        r = {"tli": q_prime, "rdk": M.proposal(q_prime), "taylor": rdk.taylor_proposal(q_prime, np.ones(V) / V, 1.0)}[kind]
        d = M.sample(np.tile(q_prime, (B, 1)), 1, rng) if kind == "rdk" else rng.choice(V, size=(B, 1), p=r)
        tokens, accepted = rdk.verify(np.tile(p, (B, 1)), np.tile(r, (B, 1)), d, rng)
        alpha = md.acceptance_rate(p, r)
    assert stats.chisquare(np.bincount(tokens, minlength=V), B * p).pvalue > 1e-3
    assert abs(accepted.mean() - alpha) < 5 * np.sqrt(alpha * (1 - alpha) / B) + 1e-9


def bigram_chain(rng, V, kept):
    """Toy bigram 'LMs': target P[a] (V, V), drafter Q[a] over a pruned vocabulary (its input side
    reads every token, so OOV drafted tokens are fed back), and an affinity matrix."""
    P = rng.dirichlet(np.ones(V), size=V)
    Q = rng.dirichlet(np.ones(V), size=V)
    vmap = rdk.VocabularyMap.pruned(kept, V)
    return P, vmap.tli(Q), rdk.AffinityMatrix.from_dense(random_stochastic(rng, V))


def test_lookahead_block_joint_law_exact_and_sampled():
    """Lookahead 2 with RDK drafting OOV tokens fed back: the first two emitted tokens follow the
    target chain exactly (enumeration over drafts and verification outcomes) and by sampling."""
    rng = np.random.default_rng(15)
    V, start = 4, 0
    P, Qp, M = bigram_chain(rng, V, [0, 1])
    R = M.proposal(Qp)  # R[a]: RDK proposal after token a (rows of a batch)

    def first_token_law(a):  # a fresh block after context a: its first emitted token
        return sum(R[a, d] * rdk.transport(P[a], R[a], [d]) for d in range(V) if R[a, d] > 0)

    joint = np.zeros((V, V))
    for d1 in np.flatnonzero(R[start] > 0):
        law1 = rdk.transport(P[start], R[start], [d1])
        for t1 in range(V):
            if law1[t1] == 0:
                continue
            if t1 == d1:  # accepted (a rejection never re-emits d1): verify d2 drafted after d1
                second = sum(R[d1, d2] * rdk.transport(P[d1], R[d1], [d2]) for d2 in np.flatnonzero(R[d1] > 0))
            else:  # rejected: the block ends; the next block starts after t1
                second = first_token_law(t1)
            joint[t1] += R[start, d1] * law1[t1] * second
    np.testing.assert_allclose(joint, P[start][:, None] * P, atol=1e-12)

    counts = np.zeros((V, V))
    runs = 6000
    seeds = rng.integers(0, 2**62, size=(runs, 4))
    for s in seeds:
        d = [int(M.sample(Qp[start], 1, rng=int(s[0]))[0])]
        d.append(int(M.sample(Qp[d[0]], 1, rng=int(s[1]))[0]))
        out = rdk.verify_block(np.stack([P[start], P[d[0]], P[d[1]]]), np.stack([R[start], R[d[0]]]), d, int(s[2]))
        if len(out) == 1:  # next block from the emitted token
            d2 = int(M.sample(Qp[out[0]], 1, rng=int(s[3]))[0])
            out = np.append(out, rdk.verify_block(np.stack([P[out[0]], P[d2]]), R[out[0]][None], [d2], int(s[3]) + 1)[0])
        counts[out[0], out[1]] += 1
    expected = runs * P[start][:, None] * P
    keep = expected.ravel() > 0
    assert stats.chisquare(counts.ravel()[keep], expected.ravel()[keep]).pvalue > 1e-3


def test_verify_block_validation_and_bonus():
    p = np.array([[0.5, 0.5], [0.0, 1.0]])
    assert list(rdk.verify_block(p, [[0.5, 0.5]], [0], rng=0))[-1] in (0, 1)
    out = rdk.verify_block(np.array([[1.0, 0.0], [0.0, 1.0]]), [[1.0, 0.0]], [0], rng=0)
    assert list(out) == [0, 1]  # accepted for sure, bonus from p[L]
    with pytest.raises(ValueError, match=r"\(L \+ 1, V\)"):
        rdk.verify_block(p[:1], [[0.5, 0.5]], [0])
    with pytest.raises(ValueError, match="probability zero"):
        rdk.verify_block(p, [[1.0, 0.0]], [1])


# ----------------------------------------------------------------------------- multi-draft

MULTI_DRAFT = [("otlp", {}), ("spectr", {}), ("khisti", {}), ("rrs", {}), ("naive", {})]


@pytest.mark.parametrize("name,options", MULTI_DRAFT, ids=[m[0] for m in MULTI_DRAFT])
@pytest.mark.parametrize("n", [2, 3])
def test_rdk_proposal_as_iid_multi_draft_distribution_is_lossless(name, options, n):
    rng = np.random.default_rng(16)
    v = md.verifier(name, **options)
    for _ in range(6):
        V = int(rng.integers(2, 6))
        p, q, vmap = pruned_instance(rng, V, int(rng.integers(1, V)), 1.0)
        p_prime = rdk.AffinityMatrix.from_dense(random_stochastic(rng, V)).proposal(vmap.tli(q))
        support = np.flatnonzero(p_prime > 0)
        tuples = np.array(list(itertools.product(support, repeat=n)))
        weights = np.array([tuple_probability("iid", p_prime, w) for w in tuples])  # independent oracle
        laws = v.transport(np.tile(p, (len(tuples), 1)), np.tile(p_prime, (len(tuples), 1)), tuples)
        np.testing.assert_allclose(weights @ laws, p, atol=1e-9)
        accepted = sum(w * law[np.unique(t)].sum() for w, law, t in zip(weights, laws, tuples))
        np.testing.assert_allclose(accepted, v.acceptance(p, p_prime, n), atol=1e-9)


def test_two_stage_drafts_with_otlp_sampled():
    rng = np.random.default_rng(17)
    V, B, n = 5, 20_000, 2
    p, q, vmap = pruned_instance(rng, V, 2, 1.0)
    M = rdk.AffinityMatrix.from_dense(random_stochastic(rng, V))
    q_prime = vmap.tli(q)
    p_prime = M.proposal(q_prime)
    drafts = M.sample(np.tile(q_prime, (B, 1)), n, rng)
    tokens, accepted = md.verifier("otlp").verify(np.tile(p, (B, 1)), np.tile(p_prime, (B, 1)), drafts, rng)
    assert stats.chisquare(np.bincount(tokens, minlength=V), B * p).pvalue > 1e-3
    alpha = md.optimal_acceptance(p, p_prime, n)
    assert abs(accepted.mean() - alpha) < 5 * np.sqrt(alpha * (1 - alpha) / B) + 1e-9

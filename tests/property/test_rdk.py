"""``md.rdk`` ([OOV]) on drawn vocabularies and distributions: vocabulary maps (TLI, the masked
baseline, FR pruning, string intersection), affinity matrices (dense round trip, the proposal
p' = M^T q', its two-stage sampler), the first-order proposal and its priors, calibration, and the
samplers (speculative sampling with a proposal, draft blocks, the masked baseline's discard
sampler, lossless by enumeration). p = TARGET, q = DRAFTER. Every test runs twice: CPU tensors on
the host route (the NumPy body), then on the accelerator's route (multidraft.rdk._on_device).
"""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from multidraft import _device, rdk

from .strategies import TOL, examples, law, row, stored, to_numpy


@pytest.fixture(scope="module", autouse=True, params=["host route", "device route"])
def route(request):
    """Whether CPU tensors take the host route (as in use) or the path of an accelerator's tensors."""
    previous = _device.CPU_ON_HOST
    _device.CPU_ON_HOST = request.param == "host route"
    yield request.param
    _device.CPU_ON_HOST = previous


@st.composite
def vocabulary_map(draw):
    """(VocabularyMap, drafter size, target size): a partial injective map with a non-empty image."""
    Vt, Vd = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    targets = draw(st.permutations(range(Vt)))
    mapping = [targets[i] if i < Vt and draw(st.booleans()) else -1 for i in range(Vd)]
    if all(t < 0 for t in mapping):
        k = draw(st.integers(0, min(Vd, Vt) - 1))
        mapping[k] = targets[k]
    return rdk.VocabularyMap(np.array(mapping), Vt), Vd, Vt


@examples(1.0)
@given(data=st.data())
def test_vocabulary_map_tli_and_masked(data):
    """TLI is q on the shared set, renormalised ([OOV] Eq. 1); masked is the same without the
    renormalisation; shared_mass is q(I); a row with q(I) = 0 is refused by TLI."""
    vmap, Vd, Vt = data.draw(vocabulary_map(), label="map")
    q = data.draw(stored(data.draw(row(Vd), label="q values")), label="q")
    q64 = law(q)
    mapped = np.zeros(Vt)
    for d, t in enumerate(vmap.draft_to_target):
        if t >= 0:
            mapped[t] = q64[d]
    mass = float(to_numpy(vmap.shared_mass(q)))
    assert abs(mass - mapped.sum()) <= TOL
    np.testing.assert_allclose(to_numpy(vmap.masked(q)), mapped, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(vmap.shared, np.sort(vmap.draft_to_target[vmap.draft_to_target >= 0]))
    np.testing.assert_array_equal(np.union1d(vmap.shared, vmap.target_only), np.arange(Vt))
    if mass > 0:
        np.testing.assert_allclose(to_numpy(vmap.tli(q)), mapped / mapped.sum(), rtol=1e-12, atol=1e-300)
    else:
        with pytest.raises(ValueError, match="'q'"):
            vmap.tli(q)


@examples(1.0)
@given(counts=st.lists(st.integers(0, 5), min_size=1, max_size=8), data=st.data())
def test_frequency_ranked_and_pruned(counts, data):
    """The size most frequent ids, ties by ascending id (Algorithm 3); the pruned map keeps them."""
    size = data.draw(st.integers(1, len(counts)), label="size")
    kept = to_numpy(rdk.frequency_ranked(np.array(counts), size))
    expected = sorted(range(len(counts)), key=lambda t: (-counts[t], t))[:size]
    np.testing.assert_array_equal(kept, expected)
    vmap = rdk.VocabularyMap.frequency_ranked(np.array(counts), size)
    np.testing.assert_array_equal(vmap.shared, np.sort(expected))
    with pytest.raises(ValueError, match="'size'"):
        rdk.frequency_ranked(np.array(counts), len(counts) + 1)


@examples(0.5)
@given(draft=st.lists(st.sampled_from("abcdefg"), unique=True, min_size=1),
       target=st.lists(st.sampled_from("abcdefg"), unique=True, min_size=1))
def test_intersection_maps_equal_strings(draft, target):
    if not set(draft) & set(target):
        with pytest.raises(ValueError):
            rdk.VocabularyMap.intersection(draft, target)
        return
    vmap = rdk.VocabularyMap.intersection(draft, target)
    for d, t in enumerate(vmap.draft_to_target):
        assert (target[t] == draft[d]) if t >= 0 else draft[d] not in target


@st.composite
def stochastic_matrix(draw, V):
    rows = []
    for _ in range(V):
        r = draw(row(V))
        rows.append(r / r.sum())
    return np.array(rows)


@examples(1.0)
@given(data=st.data(), seed=st.integers(0, 2**63 - 1))
def test_affinity_proposal_and_sampler(data, seed):
    """from_dense round-trips; proposal is M^T q' (Algorithm 1) and sums to 1; identity gives q';
    the two-stage sampler draws tokens of positive proposal mass, batch == loop of per-row seeds."""
    V = data.draw(st.integers(1, 6), label="V")
    M = data.draw(stochastic_matrix(V), label="M")
    A = rdk.AffinityMatrix.from_dense(M)
    np.testing.assert_allclose(A.to_dense(), M, rtol=0, atol=1e-15)
    B = data.draw(st.integers(1, 3), label="B")
    qp = np.stack([data.draw(row(V)) for _ in range(B)])
    stored_qp = data.draw(stored(qp), label="q'")
    proposal = to_numpy(A.proposal(stored_qp))
    np.testing.assert_allclose(proposal, law(stored_qp) @ M, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(to_numpy(rdk.rdk_proposal(stored_qp, A)), proposal, rtol=0, atol=0)
    np.testing.assert_allclose(to_numpy(rdk.AffinityMatrix.identity(V).proposal(stored_qp)), law(stored_qp),
                               rtol=0, atol=1e-15)
    n = data.draw(st.integers(1, 3), label="n")
    seeds = [seed + b for b in range(B)]
    draws = to_numpy(A.sample(stored_qp, n, seeds))
    assert draws.shape == (B, n)
    for b in range(B):
        assert np.all(proposal[b][draws[b]] > 0), "drew a token of proposal mass 0"
        np.testing.assert_array_equal(to_numpy(A.sample(stored_qp[b], n, seeds[b])), draws[b])


@examples(0.5)
@given(data=st.data())
def test_affinity_matrix_renormalises_or_refuses(data):
    V = data.draw(st.integers(1, 5), label="V")
    M = np.array([data.draw(st.lists(st.sampled_from((0.0, 0.5, 1.0, 3.0)), min_size=V, max_size=V)) for _ in range(V)])
    A = rdk.AffinityMatrix.from_dense(M, renormalise=True)
    dense = A.to_dense()
    np.testing.assert_allclose(dense.sum(axis=1), 1.0, rtol=0, atol=1e-15)
    for i in range(V):
        expected = np.eye(V)[i] if M[i].sum() == 0 else M[i] / M[i].sum()
        np.testing.assert_allclose(dense[i], expected, rtol=0, atol=1e-15)
    if np.any(np.abs(M.sum(axis=1) - 1) > 1e-6):
        with pytest.raises(ValueError, match="row-stochastic"):
            rdk.AffinityMatrix.from_dense(M)


@examples(1.0)
@given(data=st.data())
def test_taylor_proposal_and_priors(data):
    """Eq. (3) sums to 1 and moves q' by at most 2 / n_eff in L1 (its docstring); the unigram prior
    is counts / sum; the leading-component prior is a distribution."""
    V = data.draw(st.integers(1, 6), label="V")
    qp = data.draw(stored(data.draw(row(V))), label="q'")
    counts = np.array(data.draw(st.lists(st.integers(0, 9), min_size=V, max_size=V)))
    if counts.sum() == 0:
        with pytest.raises(ValueError, match="'token_counts'"):
            rdk.unigram_prior(counts)
        counts[0] = 1
    prior = to_numpy(rdk.unigram_prior(counts))
    np.testing.assert_allclose(prior, counts / counts.sum(), rtol=1e-15)
    n_eff = data.draw(st.one_of(st.none(), st.floats(0.5, 100.0)), label="n_eff")
    taylor = to_numpy(rdk.taylor_proposal(qp, prior, n_eff))
    assert taylor.min() >= 0 and abs(taylor.sum() - 1.0) <= 1e-12
    assert np.abs(taylor - law(qp)).sum() <= 2.0 / (V if n_eff is None else n_eff) + 1e-12
    samples = np.array([data.draw(st.lists(st.floats(-5, 5), min_size=V, max_size=V)) for _ in range(3)])
    if np.any(samples - samples.mean(axis=0)):
        leading = to_numpy(rdk.leading_component_prior(samples))
        assert leading.min() >= 0 and abs(leading.sum() - 1.0) <= 1e-12


@examples(0.5)
@given(data=st.data())
def test_affinity_scores_and_temperature_selection(data):
    """Eq. (2)'s top-k rows make a row-stochastic M at any tau, identity rows outside ``rows``;
    select_temperature returns the tau of the largest mean acceptance among its means."""
    V = data.draw(st.integers(2, 6), label="V")
    samples = np.array([data.draw(st.lists(st.floats(-5, 5), min_size=V, max_size=V)) for _ in range(4)])
    top_k = data.draw(st.integers(1, V), label="top_k")
    scores = rdk.affinity_scores(samples, top_k)
    taus = data.draw(st.lists(st.sampled_from((0.01, 0.1, 1.0, 10.0)), min_size=1, max_size=3), label="taus")
    for tau in taus:
        dense = scores.matrix(tau).to_dense()
        np.testing.assert_allclose(dense.sum(axis=1), 1.0, rtol=0, atol=1e-12)
        assert np.all((dense > 0).sum(axis=1) <= top_k)
    p = np.stack([data.draw(row(V)) for _ in range(2)])
    qp = np.stack([data.draw(row(V)) for _ in range(2)])
    best, means = rdk.select_temperature(scores, taus, p, qp)
    assert best in taus and means[taus.index(best)] == np.max(means)
    with pytest.raises(ValueError, match="'tau'"):
        scores.matrix(0.0)


@examples(1.0)
@given(data=st.data(), seed=st.integers(0, 2**63 - 1))
def test_verification_with_a_proposal(data, seed):
    """rdk.transport / verify are speculative sampling with the proposal (lossless by enumeration);
    verify_block emits the accepted prefix of the drafts then one token (at most L + 1), per seed."""
    V, L = data.draw(st.integers(1, 6), label="V"), data.draw(st.integers(1, 3), label="L")
    p = data.draw(stored(np.stack([data.draw(row(V)) for _ in range(L + 1)])), label="p")
    proposals = data.draw(stored(np.stack([data.draw(row(V)) for _ in range(L)])), label="proposals")
    p64, r64 = law(p), law(proposals)
    law_sum = sum(r64[0][d] * to_numpy(rdk.transport(p[0], proposals[0], np.array([d])))
                  for d in range(V) if r64[0][d] > 0)
    assert np.abs(law_sum - p64[0]).sum() <= TOL
    drafts = np.array([int(np.argmax(r64[j])) for j in range(L)])
    token, accepted = to_numpy(rdk.verify(p[0], proposals[0], drafts[:1], seed))
    assert bool(accepted) == (int(token) == drafts[0]) and p64[0][int(token)] > 0
    emitted = to_numpy(rdk.verify_block(p, proposals, drafts, seed))
    assert 1 <= len(emitted) <= L + 1
    np.testing.assert_array_equal(emitted[:-1], drafts[:len(emitted) - 1])
    np.testing.assert_array_equal(to_numpy(rdk.verify_block(p, proposals, drafts, seed)), emitted)


@examples(1.0)
@given(data=st.data(), seed=st.integers(0, 2**63 - 1))
def test_masked_baseline_is_lossless(data, seed):
    """The discard sampler: sum_d q_mask(d) T(d) + (1 - q(I)) T(-1) = p by enumeration, acceptance
    sum min(p, q_mask), verify's token has positive target mass."""
    vmap, Vd, Vt = data.draw(vocabulary_map(), label="map")
    q = data.draw(stored(data.draw(row(Vd), label="q values")), label="q")
    p = data.draw(stored(data.draw(row(Vt), label="p values")), label="p")
    masked = vmap.masked(q)  # a tensor for a tensor q
    q_mask = to_numpy(masked)
    dropped = max(1.0 - q_mask.sum(), 0.0)
    total = sum(q_mask[d] * to_numpy(rdk.masked_transport(p, masked, np.array([d]))) for d in range(Vt) if q_mask[d] > 0)
    if dropped > 0:
        total = total + dropped * to_numpy(rdk.masked_transport(p, masked, np.array([-1])))
    p64 = law(p)
    assert np.abs(total - p64).sum() <= TOL
    assert abs(float(to_numpy(rdk.masked_acceptance(p, masked))) - np.minimum(p64, q_mask).sum()) <= TOL
    draft = -1 if dropped > 0 else int(np.argmax(q_mask))  # a dropped drafter token, if it has mass
    token, accepted = to_numpy(rdk.masked_verify(p, masked, np.array([draft]), seed))
    assert p64[int(token)] > 0 and bool(accepted) == (int(token) == draft)

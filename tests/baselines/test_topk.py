"""Deterministic top-n drafts verified by naive rejection: ``md.verifier("topk")`` (p = TARGET,
q = DRAFT). The drafts are the n most probable tokens of q (ties by lowest id, a support of k < n
padded by repeats of the k-th); the output is a sample of p, accepted iff it is a draft.

Exactness against the oracle's own top tuple (tests/oracle.py) on hundreds of random and
adversarial instances; core/test_lossless.py enumerates the scheme for every verifier that takes
it ("topk", "otlp" with scheme="topk") and core/test_optimum.py its optimum.
"""
import numpy as np
import pytest
from scipy import stats

import multidraft as md
import oracle
from multidraft import _core
from multidraft import _validation as check
from conftest import TOPK, TOL, case_id, dirichlet

TOPK_VERIFIER = md.verifier("topk")


def grid_instance(rng):
    """p and q on a coarse grid (frequent ties and zeros in q), V in 2..8, n in 1..5."""
    V, n = int(rng.integers(2, 9)), int(rng.integers(1, 6))
    q = rng.integers(0, 4, V).astype(float)
    q[rng.integers(V)] += 1.0  # at least one token of positive mass
    p = rng.integers(0, 3, V).astype(float) if rng.random() < 0.5 else dirichlet(rng, V, 0.5)
    p[rng.integers(V)] += 1.0
    return p / p.sum(), q / q.sum(), n


GRID = [grid_instance(np.random.default_rng(seed)) for seed in range(300)]


def exact_checks(p, q, n):
    """Drafts, tuple law, transport, acceptance and the otlp optimum against the oracle."""
    p64, q64 = p / p.sum(), q / q.sum()
    top = oracle.top_tuple(q64, n)
    drafts = TOPK_VERIFIER.draft(q, n, 0)
    assert tuple(drafts.tolist()) == top
    assert np.all(q64[drafts] > 0), "a zero-mass token was drafted"
    assert TOPK_VERIFIER.draft_probability(q, drafts) == 1.0
    # Enumerate every tuple over the support of q (the oracle's law is one tuple of mass 1).
    tuples, probs = oracle.draft_law("topk", q64, n)
    assert probs.sum() == 1.0 and np.count_nonzero(probs) == 1
    np.testing.assert_array_equal(md.draft_scheme(q, n, scheme="topk").enumerate()[0], tuples[probs > 0])
    law = TOPK_VERIFIER.transport(p, q, drafts)
    np.testing.assert_allclose(law, p64, rtol=0, atol=1e-15)
    expected = float(sum(p64[t] for t in set(top)))
    assert abs(TOPK_VERIFIER.acceptance(p, q, n) - expected) <= 1e-15
    assert abs(law[np.unique(drafts)].sum() - expected) <= 1e-15
    # The scheme's optimum is p(T): one tuple, so no verifier can accept more ([GR] Eq. 4).
    assert abs(md.optimal_acceptance(p, q, n, scheme="topk") - expected) <= TOL
    assert abs(md.verifier("otlp", scheme="topk").acceptance(p, q, n) - expected) <= TOL
    np.testing.assert_allclose(md.verifier("otlp", scheme="topk").transport(p, q, drafts), p64, rtol=0, atol=TOL)


@pytest.mark.parametrize("index", range(len(GRID)))
def test_grid_instances_match_the_oracle(index):
    exact_checks(*GRID[index])


@pytest.mark.parametrize("case", TOPK, ids=case_id)
def test_conftest_instances_match_the_oracle(case):
    """Random instances and every adversarial one (zeros, ties, p == q, disjoint, one-hot, mass
    1 - 1e-12, float32, strided, supports smaller than n)."""
    exact_checks(case.p, case.q, case.n) if case.p.dtype == np.float64 else exact_checks(case.p64, case.q64, case.n)
    drafts = TOPK_VERIFIER.draft(case.q, case.n, 0)  # the caller's own layout, as stored
    assert tuple(drafts.tolist()) == oracle.top_tuple(case.q64, case.n)
    np.testing.assert_allclose(TOPK_VERIFIER.transport(case.p, case.q, drafts), case.p64, rtol=0, atol=1e-15)


@pytest.mark.parametrize("q, n, drafts", [
    ([0.1, 0.3, 0.3, 0.3], 2, [1, 2]),           # a tie across the boundary: lowest ids first
    ([0.2, 0.2, 0.6], 3, [2, 0, 1]),             # most probable first, then the tie by id
    ([0.25] * 4, 4, [0, 1, 2, 3]),               # uniform: id order
    ([0.0, 0.6, 0.0, 0.4, 0.0], 4, [1, 3, 3, 3]),  # support 2 < n: padded by the last distinct draft
    ([0.0, 0.0, 1.0], 3, [2, 2, 2]),             # one-hot
    ([0.5, 0.5 - 1e-16, 1e-16], 2, [0, 1]),      # near-ties are not ties
])
def test_draft_order_and_ties(q, n, drafts):
    q = np.array(q)
    assert TOPK_VERIFIER.draft(q, n, 3).tolist() == drafts
    assert md.draft_scheme(q, n, scheme="topk").support().tolist() == sorted(set(drafts))
    assert TOPK_VERIFIER.draft_probability(q, drafts) == 1.0
    for other in ([drafts[-1]] + drafts[:-1], list(reversed(drafts))):
        if other != drafts:
            assert TOPK_VERIFIER.draft_probability(q, other) == 0.0


def test_draft_leaves_the_generator_alone():
    q = np.array([0.1, 0.5, 0.4])
    rng, twin = np.random.default_rng(8), np.random.default_rng(8)
    assert all(TOPK_VERIFIER.draft(q, 2, rng).tolist() == [1, 2] for _ in range(5))
    assert rng.integers(1 << 30) == twin.integers(1 << 30)


def test_batch_equals_the_loop_over_rows():
    """Transport, verify (per-row seeds, md.row_seeds) and acceptance of a batch with runs of equal
    rows, degenerate rows and ties equal the loop over its rows."""
    rng = np.random.default_rng(4)
    B, V, n = 9, 7, 3
    p = dirichlet(rng, V, 0.5, B)
    q = dirichlet(rng, V, 0.5, B)
    q[1] = np.eye(V)[4]
    q[2] = [0.0, 0.5, 0.0, 0.0, 0.5, 0.0, 0.0]
    q[3] = np.full(V, 1 / V)
    q[5], p[5] = q[4], p[4]  # a run of equal rows
    drafts = np.array([TOPK_VERIFIER.draft(q[b], n) for b in range(B)])
    seeds = md.row_seeds(123, B)
    tokens, accepted = TOPK_VERIFIER.verify(p, q, drafts, seeds)
    laws = TOPK_VERIFIER.transport(p, q, drafts)
    acceptance = TOPK_VERIFIER.acceptance(p, q, n)
    for b in range(B):
        assert TOPK_VERIFIER.verify(p[b], q[b], drafts[b], int(seeds[b])) == (tokens[b], accepted[b])
        np.testing.assert_array_equal(laws[b], TOPK_VERIFIER.transport(p[b], q[b], drafts[b]))
        assert acceptance[b] == TOPK_VERIFIER.acceptance(p[b], q[b], n)
    np.testing.assert_array_equal(accepted, np.any(drafts == tokens[:, None], axis=1))
    assert TOPK_VERIFIER.verify(p, q, drafts, seeds)[0].tolist() == tokens.tolist()  # seeded: reproducible


def test_verify_samples_p_and_accepts_top_mass():
    """Chi-square of verified tokens against p, and the acceptance frequency against p(T)."""
    p = np.array([0.05, 0.3, 0.0, 0.15, 0.2, 0.3])
    q = np.array([0.3, 0.1, 0.3, 0.2, 0.0, 0.1])
    n, N = 3, 20000
    drafts = TOPK_VERIFIER.draft(q, n)
    assert drafts.tolist() == [0, 2, 3]
    tokens, accepted = TOPK_VERIFIER.verify(np.tile(p, (N, 1)), np.tile(q, (N, 1)), np.tile(drafts, (N, 1)), 99)
    counts = np.bincount(tokens, minlength=len(p))
    assert counts[p == 0].sum() == 0
    assert stats.chisquare(counts[p > 0], N * p[p > 0]).pvalue > 1e-4
    np.testing.assert_array_equal(accepted, np.isin(tokens, drafts))
    rate = TOPK_VERIFIER.acceptance(p, q, n)
    assert rate == pytest.approx(0.2, abs=1e-15)
    assert abs(accepted.mean() - rate) <= 5 * np.sqrt(rate * (1 - rate) / N)
    single = [TOPK_VERIFIER.verify(p, q, drafts, seed)[0] for seed in range(2000)]  # the one-row path
    assert stats.chisquare(np.bincount(single, minlength=len(p))[p > 0], 2000 * p[p > 0]).pvalue > 1e-4


def colliding_row():
    """q (V = 4, float64, summing to 1 + 5e-7) whose tokens 0 and 1 differ by one ulp as stored but
    are equal once scaled by 1 / sum (the law the core computes with): the top-3 drafts rank the
    scaled values, so token 0 (lowest id of the tie) is drafted, not token 1."""
    rest = np.array([0.375, 0.625 + 5e-7])
    a = 1.5 * 2.0**-40  # tiny: the sum, hence the scale, ignores its last bits; a * scale stays in its binade
    q = np.concatenate([[a, a], rest])
    tolerance = check.sum_tolerance(np.float64, 4)
    scale = float(_core.row_scales(q[None], tolerance)[0])  # the core's own 1 / sum
    steps = a + np.arange(1 << 23) * np.spacing(a)  # consecutive doubles from a
    scaled = steps * scale
    k = int(np.flatnonzero(scaled[1:] == scaled[:-1])[0])
    q[0], q[1] = steps[k], steps[k + 1]
    assert q[1] > q[0] and q[0] * scale == q[1] * scale and _core.row_scales(q[None], tolerance)[0] == scale
    assert oracle.top_tuple(q, 3) == (3, 2, 1)  # as stored, token 1 ranks first
    return q


def test_drafts_rank_the_scaled_law_read_in_place():
    """A float64 row read in place with its scale ranks the same values as the normalised copy the
    drafts are drawn from, so the drafts of such a row are accepted by every path."""
    q = colliding_row()
    p = np.array([0.4, 0.3, 0.2, 0.1])
    drafts = TOPK_VERIFIER.draft(q, 3, 0)
    assert drafts.tolist() == [3, 2, 0]
    token, accepted = TOPK_VERIFIER.verify(p, q, drafts, 5)  # the one-row core path
    assert accepted == (token in (0, 2, 3))
    tokens, _ = TOPK_VERIFIER.verify(np.tile(p, (2, 1)), np.tile(q, (2, 1)), np.tile(drafts, (2, 1)), [5, 6])
    assert tokens[0] == token
    np.testing.assert_allclose(TOPK_VERIFIER.transport(p, q, drafts), p, rtol=0, atol=1e-15)
    with pytest.raises(ValueError, match="'topk' drafts are the n most probable tokens"):
        TOPK_VERIFIER.transport(p, q, [3, 2, 1])


P4, Q4 = np.array([0.1, 0.2, 0.3, 0.4]), np.array([0.4, 0.0, 0.35, 0.25])


@pytest.mark.parametrize("drafts, why", [
    ([2, 0], "'topk' drafts are the n most probable tokens"),   # the right set, the wrong order
    ([0, 3], "'topk' drafts are the n most probable tokens"),   # not the top two
    ([0, 0], "'topk' drafts are the n most probable tokens"),   # padding where the support suffices
    ([0, 1], r"q = 0 at a draft"),
])
def test_other_tuples_are_refused(drafts, why):
    message = "'drafts' has probability zero under the draft scheme"
    for call in (lambda: TOPK_VERIFIER.transport(P4, Q4, drafts), lambda: TOPK_VERIFIER.verify(P4, Q4, drafts, 1),
                 lambda: TOPK_VERIFIER.verify(P4[None], Q4[None], np.array([drafts]), [1]),
                 lambda: md.verifier("otlp", scheme="topk").transport(P4, Q4, drafts),
                 lambda: md.solve_otlp(P4, Q4, 2, method="lp", scheme="topk").transport(drafts)):
        with pytest.raises(ValueError, match=message):
            call()
        with pytest.raises(ValueError, match=why):
            call()
    assert TOPK_VERIFIER.draft_probability(Q4, drafts) == 0.0


def test_bad_inputs_are_value_errors():
    with pytest.raises(ValueError, match="'n' must be >= 1"):
        TOPK_VERIFIER.acceptance(P4, Q4, 0)
    with pytest.raises(ValueError, match="'q' must sum to 1"):
        TOPK_VERIFIER.draft(np.zeros(4), 2)
    with pytest.raises(ValueError, match="'drafts' has batch size 2, but 'p' has 1"):
        TOPK_VERIFIER.transport(P4[None], Q4[None], [[0, 2], [0, 2]])
    with pytest.raises(ValueError, match="out of range|must be in"):
        TOPK_VERIFIER.transport(P4, Q4, [0, 7])


def test_other_verifiers_refuse_the_topk_scheme():
    """Only "topk" and the exact OTLP plans take deterministic drafts: the others' laws need drafts
    drawn at random from q, so the scheme is refused by name, in Python and in the core."""
    with pytest.raises(ValueError, match="'scheme' must be 'iid' or 'independent'"):
        md.verifier("khisti", scheme="topk")
    with pytest.raises(ValueError, match="GlobalResolution needs i.i.d. drafts"):
        md.solve_otlp(P4, Q4, 2, method="global_resolution", scheme="topk")
    topk = _core.VerifierOptions(kind="topk")
    p2, q3 = P4[None], Q4[None, None]
    for method in ("sps", "naive", "rrs", "spectr", "spechub", "khisti", "global_resolution"):
        with pytest.raises(ValueError, match=f"verifier '{method}' does not take the deterministic 'topk'"):
            _core.acceptance(method, p2, q3, 2, topk)
    with pytest.raises(ValueError, match="verifier 'topk' takes the 'topk' draft scheme only"):
        _core.transport("topk", p2, q3, np.array([[0, 2]]), _core.VerifierOptions(kind="iid"))
    with pytest.raises(ValueError, match="'scheme' must be one of"):
        md.draft_scheme(Q4, 2, scheme="top_k")


def test_acceptance_is_top_mass_not_the_iid_formula():
    """Naive rejection with i.i.d. drafts accepts sum_i p_i (1 - (1 - q_i)^n); the same verify with
    the top-n drafts accepts p(T), here larger (q ranks p's heavy tokens first)."""
    p, q = np.array([0.5, 0.3, 0.1, 0.1]), np.array([0.4, 0.3, 0.2, 0.1])
    assert TOPK_VERIFIER.acceptance(p, q, 2) == pytest.approx(0.8, abs=1e-15)
    naive = md.verifier("naive").acceptance(p, q, 2)
    assert naive == pytest.approx(float(p @ (1 - (1 - q) ** 2)), abs=1e-15) and naive < 0.8
    assert TOPK_VERIFIER.acceptance(p, q, 4) == pytest.approx(1.0, abs=1e-15)
    assert TOPK_VERIFIER.acceptance(p, q, 9) == pytest.approx(1.0, abs=1e-15)  # n > V: the whole support

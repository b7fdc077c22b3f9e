"""Degenerate draft laws degrade losslessly inside the verifiers (p = TARGET, q = DRAFT).

Definitions (draft_scheme.hpp): without replacement from a support of k < n tokens, the first k
drafts are the whole support, drawn by the sequential law, and drafts k+1..n repeat draft k; the
hub scheme with a one-token support {a} draws (a, a), and SpecHub is then speculative sampling of
a. Exact losslessness of every verifier on such laws (one-hot drafts, supports smaller than n, for
every scheme) is enumerated by core/test_lossless.py over conftest's adversarial cases, with the
oracle's own tuple law; this file checks the definitions and what follows from them.
"""
import numpy as np
import pytest

import multidraft as md
import oracle

P = np.array([0.1, 0.2, 0.3, 0.4])
Q_TWO = np.array([0.0, 0.3, 0.7, 0.0])  # two tokens, three draws without replacement
PADDED = {(1, 2, 2): 0.3, (2, 1, 1): 0.7}
WITHOUT_REPLACEMENT = [("rrs_without_replacement", {})] + [
    ("otlp", {"scheme": "without_replacement", "method": m}) for m in ("maxflow_cs", "maxflow", "lp")]


def test_without_replacement_draws_the_support_then_repeats():
    scheme = md.draft_scheme(Q_TWO, 3, scheme="without_replacement")
    tuples, probs = scheme.enumerate()
    assert {tuple(w): pr for w, pr in zip(tuples.tolist(), probs)} == pytest.approx(PADDED, abs=1e-15)
    assert {w: oracle.tuple_probability("without_replacement", Q_TWO, w) for w in PADDED} == pytest.approx(PADDED)
    drawn = {tuple(scheme.sample(seed).tolist()) for seed in range(40)}
    assert drawn == set(PADDED)


@pytest.mark.parametrize("name, options", WITHOUT_REPLACEMENT, ids=lambda x: str(x))
def test_padding_is_refused_unless_the_support_is_exhausted(name, options):
    v = md.verifier(name, **options)
    for drafts in ([1, 2, 1], [1, 1, 2]):
        with pytest.raises(ValueError, match="'drafts' has probability zero"):
            v.transport(P, Q_TWO, drafts)
    with pytest.raises(ValueError, match="'drafts' has probability zero"):  # three tokens: no padding
        v.transport(P, np.array([0.2, 0.3, 0.5, 0.0]), [1, 2, 2])


@pytest.mark.parametrize("name, options", WITHOUT_REPLACEMENT, ids=lambda x: str(x))
def test_padded_drafts_act_as_the_distinct_ones(name, options):
    """n = 3 drafts from two tokens: lossless, and the acceptance of n = 2 (for the optimum,
    P(support) = 0.5: every tuple holds the whole support)."""
    v = md.verifier(name, **options)
    laws = {w: v.transport(P, Q_TWO, w) for w in PADDED}
    np.testing.assert_allclose(sum(PADDED[w] * laws[w] for w in PADDED), P, rtol=0, atol=1e-12)
    assert v.acceptance(P, Q_TWO, 3) == pytest.approx(v.acceptance(P, Q_TWO, 2), abs=1e-12)
    if name == "otlp":
        assert v.acceptance(P, Q_TWO, 3) == pytest.approx(0.5, abs=1e-12)
    if options.get("method", "maxflow") != "lp":  # the same network or recursion: the same slices
        for w in PADDED:
            np.testing.assert_allclose(laws[w], v.transport(P, Q_TWO, w[:2]), rtol=0, atol=1e-12)


@pytest.mark.parametrize("p", [P, np.eye(4)[2], np.eye(4)[0]], ids=["spread", "onehot_hub", "onehot_other"])
def test_spechub_with_one_token_is_sps(p):
    q = np.eye(4)[2]
    hub, sps = md.verifier("spechub"), md.verifier("sps")
    assert hub.draft(q, 2, 0).tolist() == [2, 2]
    assert hub.draft_probability(q, [2, 2]) == 1.0
    np.testing.assert_allclose(hub.transport(p, q, [2, 2]), sps.transport(p, q, [2]), rtol=0, atol=1e-15)
    assert hub.acceptance(p, q, 2) == pytest.approx(sps.acceptance(p, q, 1), abs=1e-15)
    assert md.optimal_acceptance(p, q, 2, scheme="hub") == pytest.approx(p[2], abs=1e-12)
    with pytest.raises(ValueError, match="'drafts' has probability zero"):
        hub.transport(p, q, [2, 0])


@pytest.mark.parametrize("name", ["rrs_without_replacement", "spechub", "otlp"])
def test_batches_mix_degenerate_and_regular_rows(name):
    """Rows of one batch with supports of 1 to V tokens (as low temperatures give): every row is
    verified as the loop over rows verifies it, with no special case in the caller."""
    v = md.verifier(name, **({"scheme": "without_replacement"} if name == "otlp" else {}))
    n = 2 if name == "spechub" else 3
    rng = np.random.default_rng(3)
    q = np.array([np.eye(5)[1], [0, 0.4, 0, 0.6, 0], rng.dirichlet(np.ones(5)), [0.25, 0.25, 0, 0.25, 0.25]])
    p = rng.dirichlet(np.ones(5), size=len(q))
    drafts = np.array([v.draft(row, n, seed) for seed, row in enumerate(q)])
    tokens, accepted = v.verify(p, q, drafts, [7, 8, 9, 10])
    rows = [v.verify(p[b], q[b], drafts[b], 7 + b) for b in range(len(q))]
    assert tokens.tolist() == [t for t, _ in rows] and accepted.tolist() == [a for _, a in rows]

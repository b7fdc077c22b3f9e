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


# ----------------------------------------------------------------------------- float64 edges
# Inputs at the edge of float64 that the property tests (tests/property) found mishandled;
# each law must stay a finite law of p's support, lossless by enumeration.

def enumerated_marginal(v, p, q, n):
    """(tuples, probabilities, laws) over the scheme's tuples of positive probability, and the
    output marginal sum_w P(w) pi(. | w)."""
    tuples, probs = md.draft_scheme(q, n, scheme=v.scheme_kind).enumerate()
    laws = np.array([v.transport(p, q, w) for w in tuples])
    assert np.all(np.isfinite(laws)) and np.all(laws >= 0)
    np.testing.assert_allclose(laws.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    return tuples, probs, laws, probs @ laws


ZERO_TARGET = [  # (q, n, drafts): a drafted token of p = 0 whose tuple mass is at or below 1e-13
    (np.array([1.0, 1e-16]), 1, [1]),
    (np.array([1.0, 1e-17]), 1, [1]),
    (np.array([1.0, 5e-324]), 1, [1]),
    (np.array([1 - 1e-6, 1e-6]) / (1 - 1e-6 + 1e-6), 3, [1, 1, 1]),
    (np.array([1.0, 1e-300]), 2, [1, 1]),  # its probability underflows to 0, yet it is drawable
]
ZERO_TARGET_VERIFIERS = [("otlp", {"method": m, "scheme": s}) for m in ("maxflow", "maxflow_cs")
                         for s in ("iid", "without_replacement")] + [
    ("global_resolution", {}), ("khisti", {}), ("khisti", {"truncation": 1}), ("spectr", {})]


@pytest.mark.parametrize("name, options", ZERO_TARGET_VERIFIERS, ids=lambda x: str(x))
@pytest.mark.parametrize("q, n, drafts", ZERO_TARGET, ids=["1e-16", "1e-17", "denormal", "n3", "n2-underflow"])
def test_a_token_of_target_mass_zero_is_never_output(name, options, q, n, drafts):
    """p = [1, 0]: the rejected mass of a tuple holding token 1 cancels p - accepted to 0; the
    law is still [1, 0] (it was [0, 1], or NaN with verify returning -1)."""
    p = np.array([1.0, 0.0])
    v = md.verifier(name, **options)
    if options.get("scheme") == "without_replacement" and n > 1:
        drafts = [1, 0, 0][:n]  # two tokens: token 1 first, then the padded support
    assert v.transport(p, q, drafts).tolist() == [1.0, 0.0]
    assert all(v.verify(p, q, drafts, seed)[0] == 0 for seed in range(20))
    if name == "otlp":
        plan = md.solve_otlp(p, q, n, method=options["method"], scheme=options["scheme"])
        assert plan.transport(drafts).tolist() == [1.0, 0.0]


SUBNORMAL_TARGET = [(np.array([0.5, 0.5, 5e-324]), np.array([0.5, 0.5, 0.0])),
                    (np.array([1.0, 1e-310]), np.array([1.0, 0.0]))]


@pytest.mark.parametrize("name, options", [("otlp", {"method": "maxflow", "scheme": s})
                                           for s in ("iid", "without_replacement", "hub", "topk")]
                         + [("spechub", {})], ids=lambda x: str(x))
@pytest.mark.parametrize("p, q", SUBNORMAL_TARGET, ids=["denormal", "1e-310"])
def test_a_subnormal_target_mass_gives_finite_laws(name, options, p, q):
    """A target entry below the smallest normal float64 that no draft covers: the residual's total
    is subnormal, and its reciprocal overflows (the laws were NaN, verify returned -1)."""
    v = md.verifier(name, **options)
    n = 2 if v.scheme_kind == "hub" else 1
    tuples, _, _, marginal = enumerated_marginal(v, p, q, n)
    np.testing.assert_allclose(marginal, p, rtol=0, atol=1e-12)
    for w in tuples:
        token, _ = v.verify(p, q, w, 0)
        assert p[token] > 0


@pytest.mark.parametrize("method", ["maxflow", "maxflow_cs"])
@pytest.mark.parametrize("scheme, drafts", [("without_replacement", [2, 1, 0]), ("iid", [0, 2, 2])])
def test_a_tuple_of_subnormal_draft_masses_is_verified(method, scheme, drafts):
    """q = [5e-324, 5e-324, 1], n = 3: the set masses of the max-flow networks underflowed where
    the tuple's own probability does not ((2, 1, 0) has probability 0.5 without replacement), and
    the plans refused tuples that draft() returns. Now: lossless and optimal (p = q: alpha = 1)."""
    p = q = np.array([5e-324, 5e-324, 1.0])
    v = md.verifier("otlp", method=method, scheme=scheme)
    assert v.draft_probability(q, drafts) > 0
    if scheme == "without_replacement":
        assert v.draft_probability(q, drafts) == 0.5 and any(v.draft(q, 3, s).tolist() == drafts for s in range(20))
    tuples, probs, laws, marginal = enumerated_marginal(v, p, q, 3)
    np.testing.assert_allclose(marginal, p, rtol=0, atol=1e-12)
    accepted = sum(pr * law[np.unique(w)].sum() for w, pr, law in zip(tuples, probs, laws))
    assert accepted == pytest.approx(1.0, abs=1e-12) and v.acceptance(p, q, 3) == pytest.approx(1.0, abs=1e-12)
    token, _ = v.verify(p, q, drafts, 0)
    assert p[token] > 0

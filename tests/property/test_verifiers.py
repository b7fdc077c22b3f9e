"""Every verifier of ``md.verifier_names()`` (each option set of tests/conftest.py's
``verifier_configs``) on drawn instances: exactly lossless by enumeration, the reported acceptance
equal to the enumerated P(output in drafts) and to what its docstring promises, drafts and their
probabilities equal to the oracle's draft law, verify's token one the transport law gives mass,
batch == loop, the same seed the same result. p = TARGET, q = DRAFT.
"""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import multidraft as md
from conftest import verifier_configs

from . import reference
from .strategies import TOL, examples, instance, pair, stored, to_numpy

CONFIGS = verifier_configs()


def config_id(config):
    return config.id


def broadcast_rows(x, M: int):
    """``x`` repeated as M rows without a copy (stride 0): the enumeration's batch, one call."""
    if hasattr(x, "expand"):  # torch
        return x.unsqueeze(0).expand(M, *x.shape)
    return np.broadcast_to(x, (M,) + x.shape)


def enumerate_drafts(v, case):
    """Every ordered tuple over range(V) (V**n of them), the oracle's probability of each, and the
    verifier's. Draft probabilities agree with the oracle's law (exact up to rounding)."""
    tuples, probs = reference.draft_law(case.scheme, case.q, case.n)
    got = np.array([to_numpy(v.draft_probability(case.q, w)) for w in tuples], dtype=np.float64)
    np.testing.assert_allclose(got, probs, rtol=1e-12, atol=1e-300, err_msg="draft_probability != oracle")
    return tuples, probs, got


def enumerated_law(v, case):
    """(tuples, their probabilities, transports (M, V)) over the drawable tuples, in one batched call."""
    tuples, _, probs = enumerate_drafts(v, case)
    keep = probs > 0
    tuples, probs = tuples[keep], probs[keep]
    assert abs(probs.sum() - 1.0) <= 1e-12, "the draft law does not sum to 1"
    T = to_numpy(v.transport(broadcast_rows(case.p, len(tuples)), broadcast_rows(case.q, len(tuples)), tuples))
    assert T.shape == (len(tuples), case.V)
    return tuples, probs, T.astype(np.float64)


def alpha_star(case):
    """alpha* of the instance's draft scheme, by brute force over subsets (tests/oracle.py)."""
    return reference.alpha_star(case.p64, case.scheme, case.q, case.n)


def promised_acceptance(config, v, case, accepted):
    """What the verifier's docstring promises about its acceptance, checked against ``accepted``."""
    best = alpha_star(case)
    p, q = case.p64, case.q64
    name = config.name
    if name in ("otlp", "topk", "spechub"):  # the optimum of their own draft scheme
        assert abs(accepted - best) <= TOL
    elif name == "sps":
        assert abs(accepted - np.minimum(p, q).sum()) <= TOL
    elif name == "naive":
        assert abs(accepted - p @ (1.0 - (1.0 - q) ** case.n)) <= TOL
    elif name == "khisti" and case.n <= 2 and dict(config.options).get("truncation") is None:
        assert abs(accepted - best) <= TOL  # [CD] Theorem 1 with the optimal weights
    elif name == "spectr":
        rho = float(to_numpy(v.rho(case.p, case.q, case.n)))
        assert 1.0 - 1e-12 <= rho <= case.n + 1e-12
        beta = np.minimum(q, p / rho).sum()
        assert abs(accepted - (1.0 - (1.0 - beta) ** case.n)) <= TOL
        assert accepted >= (1.0 - 1.0 / np.e) * best - TOL  # SpecTr's guarantee
    elif name == "global_resolution":
        plan = v.plan(case.p, case.q, case.n)
        assert abs(plan.alpha_star - best) <= TOL
        if plan.exact:
            assert best - accepted <= plan.acceptance_bound + TOL
        else:  # the raw plan: |alpha - alpha*| within a + b
            assert abs(best - accepted) <= plan.acceptance_bound + TOL
            return
    assert accepted <= best + TOL, "above the optimum of its own draft scheme"


@pytest.mark.parametrize("config", CONFIGS, ids=config_id)
@examples(0.75)
@given(data=st.data())
def test_lossless_acceptance_draft_and_verify(config, data):
    """On one drawn instance: the enumerated law is p and the acceptance is the enumerated
    P(output in drafts) (see :func:`check_lossless`); then the drafted tuple and its verification
    (see :func:`check_verify`)."""
    v = config.make()
    case = data.draw(instance(v.scheme_kind, config.ns), label="case")
    tuples, probs, T = enumerated_law(v, case)
    check_lossless(config, v, case, tuples, probs, T)
    check_verify(v, case, tuples, T, data.draw(st.integers(0, 2**63 - 1), label="seed"))


def check_lossless(config, v, case, tuples, probs, T):
    """Every transport is a law; sum_w P(w) T(w) == p (the raw Global Resolution plan: within its
    l1_bound); no output of target mass 0; the reported acceptance equals the enumerated one and
    what the docstring promises."""
    assert T.min() >= 0.0, "negative transport probability"
    np.testing.assert_allclose(T.sum(axis=1), 1.0, rtol=0, atol=1e-12, err_msg="a transport does not sum to 1")
    error = np.abs(probs @ T - case.p64).sum()
    if config.name == "global_resolution" and dict(config.options).get("exact") is False:
        assert error <= v.plan(case.p, case.q, case.n).l1_bound + TOL  # [GR] Lemma 6.6's bound
    else:
        assert error <= TOL, f"output law is not p (L1 error {error:.3g})"
        assert not T[:, case.p64 == 0].any(), "a token of target probability 0 can be output"
    accepted = float(sum(prob * T[k, np.unique(w)].sum() for k, (w, prob) in enumerate(zip(tuples, probs))))
    reported = float(to_numpy(v.acceptance(case.p, case.q, case.n)))
    bound = v.plan(case.p, case.q, case.n).alpha_error_bound if config.name == "global_resolution" else 0.0
    assert abs(accepted - reported) <= TOL + bound, "acceptance != enumerated P(output in drafts)"
    promised_acceptance(config, v, case, accepted)


def check_verify(v, case, tuples, T, seed):
    """draft gives a drawable tuple (the same for the same seed); verify's token has mass under the
    transport law of those drafts and accepted == token in drafts; the same seed or a Generator seeded
    alike gives the same result; the law as a C-contiguous float64 array gives the same law and token."""
    drafts = to_numpy(v.draft(case.q, case.n, seed))
    assert drafts.shape == (case.n,) and drafts.dtype.kind in "iu"
    assert np.array_equal(to_numpy(v.draft(case.q, case.n, seed)), drafts)
    row = np.flatnonzero(np.all(tuples == drafts, axis=1))
    assert row.size == 1, f"drafted {drafts}, a tuple of probability 0"
    law = T[row[0]]
    token, accepted = (item.item() for item in to_numpy(v.verify(case.p, case.q, drafts, seed)))
    assert law[token] > 0 and case.p64[token] > 0, f"token {token} has no mass under the law {law}"
    assert accepted == (token in drafts.tolist())
    again = to_numpy(v.verify(case.p, case.q, drafts, np.random.default_rng(seed)))
    assert to_numpy(v.verify(case.p, case.q, drafts, np.random.default_rng(seed))) == again
    copies = case.p64, case.q64  # C-contiguous float64: the per-row fast path of verify
    np.testing.assert_allclose(to_numpy(v.transport(*copies, drafts)), law, rtol=0, atol=1e-15)
    assert tuple(x.item() for x in to_numpy(v.verify(*copies, drafts, seed))) == (token, accepted)


@st.composite
def batch(draw, v, ns):
    """(p (B, V), q (B, V) or (B, n, V), drafts (B, n), seeds (B,)) stored in some layout."""
    B, V, n = draw(st.integers(1, 4)), draw(st.integers(1, 6)), draw(st.sampled_from(ns))
    independent = v.scheme_kind == "independent"
    rows = [draw(pair(V, q_rows=n if independent else 0)) for _ in range(B)]
    p = draw(stored(np.stack([r[0] for r in rows])))
    q = draw(stored(np.stack([r[1] for r in rows])))
    seeds = draw(st.lists(st.integers(0, 2**63 - 1), min_size=B, max_size=B))
    drafts = np.stack([to_numpy(v.draft(q[b], n, seeds[b])) for b in range(B)])
    return p, q, drafts, seeds


@pytest.mark.parametrize("config", CONFIGS, ids=config_id)
@examples(0.3)
@given(data=st.data())
def test_batch_equals_loop_of_rows(config, data):
    v = config.make()
    p, q, drafts, seeds = data.draw(batch(v, config.ns), label="batch")
    tokens, accepted = to_numpy(v.verify(p, q, drafts, seeds))
    rows = [to_numpy(v.verify(p[b], q[b], drafts[b], seeds[b])) for b in range(len(seeds))]
    np.testing.assert_array_equal(tokens, [int(t) for t, _ in rows])
    np.testing.assert_array_equal(accepted, [bool(a) for _, a in rows])
    laws = to_numpy(v.transport(p, q, drafts))
    np.testing.assert_allclose(laws, [to_numpy(v.transport(p[b], q[b], drafts[b])) for b in range(len(seeds))],
                               rtol=0, atol=1e-15)
    n = drafts.shape[1]
    np.testing.assert_allclose(to_numpy(v.acceptance(p, q, n)),
                               [float(to_numpy(v.acceptance(p[b], q[b], n))) for b in range(len(seeds))],
                               rtol=0, atol=1e-15)
    if config.name == "spectr":
        np.testing.assert_array_equal(to_numpy(v.rho(p, q, n)),
                                      [float(to_numpy(v.rho(p[b], q[b], n))) for b in range(len(seeds))])

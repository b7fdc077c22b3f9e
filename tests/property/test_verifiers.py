"""Every verifier of ``md.verifier_names()`` (each option set of tests/conftest.py's
``verifier_configs``) on drawn instances: exactly lossless by enumeration, the reported acceptance
equal to the enumerated P(output in drafts) and to what its docstring promises, drafts and their
probabilities equal to the oracle's draft law, verify's token one the transport law gives mass,
batch == loop, the same seed the same result. p = TARGET, q = DRAFT.
"""
import numpy as np
import pytest
from hypothesis import example, given, strategies as st

from conftest import verifier_configs

from . import reference
from .strategies import TOL, Instance, examples, instance, pair, stored, to_numpy

CONFIGS = verifier_configs()


def config_id(config):
    return config.id


def broadcast_rows(x, M: int):
    """``x`` repeated as M rows without a copy (stride 0): the enumeration's batch, one call."""
    if hasattr(x, "expand"):  # torch
        return x.unsqueeze(0).expand(M, *x.shape)
    return np.broadcast_to(x, (M,) + x.shape)


def enumerated_law(v, case, config):
    """(tuples, their probabilities, transports (M, V)) over the drawable tuples, in one batched call."""
    tuples, probs = reference.drawable_tuples(case.scheme, case.q, case.n, lambda w: v.draft_probability(case.q, w))
    T = to_numpy(v.transport(broadcast_rows(case.p, len(tuples)), broadcast_rows(case.q, len(tuples)), tuples))
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
    tuples, probs, T = enumerated_law(v, case, config)
    check_lossless(config, v, case, tuples, probs, T)
    check_verify(v, case, tuples, T, data.draw(st.integers(0, 2**63 - 1), label="seed"))


def check_lossless(config, v, case, tuples, probs, T):
    """The enumerated law is p (the raw Global Resolution plan: within its l1_bound); the reported
    acceptance equals the enumerated one and what the docstring promises."""
    raw = config.name == "global_resolution" and dict(config.options).get("exact") is False
    tolerance = v.plan(case.p, case.q, case.n).l1_bound + TOL if raw else TOL  # [GR] Lemma 6.6's bound
    accepted = reference.check_lossless(case.p64, tuples, probs, T, tolerance, exact=not raw)
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


# ----------------------------------------------------------------------------- zero target mass

# Tokens the target forbids (p = 0) drafted with a mass below float64 resolution beside 1: the
# rejected mass of such a tuple cancels p - accepted to 0 (the property tests found such a token output, or
# a NaN law, for the max-flow plans, Global Resolution, khisti and spectr).
ZERO_MASS_GRID = [  # (p, the token of p = 0, the other tokens' draft masses)
    ([1.0, 0.0], 1, [1.0]),
    ([0.5, 0.5, 0.0], 2, [0.6, 0.4]),
    ([0.2, 0.0, 0.8], 1, [0.3, 0.7]),
    ([0.3, 0.3, 0.4, 0.0], 3, [0.1, 0.2, 0.7]),
]
TINY_DRAFT_MASSES = (1e-6, 1e-13, 1e-16, 1e-17, 1e-300, 5e-324)  # n = 3 makes 1e-6 a tuple of 1e-18


def zero_mass_params():
    # the raw Global Resolution plan outputs outside p within its l1_bound by design
    return [pytest.param(config, id=config.id) for config in CONFIGS
            if not (config.name == "global_resolution" and dict(config.options).get("exact") is False)]


@pytest.mark.parametrize("config", zero_mass_params())
def test_a_token_of_target_mass_zero_is_never_output(config):
    """Exactness at p = 0: whatever the draft mass on a token the target forbids (1e-4 down to a
    denormal), no transport law gives it mass, every law is finite, and verify never returns it."""
    v = config.make()
    for p, zero, others in ZERO_MASS_GRID:
        for tiny in TINY_DRAFT_MASSES:
            q = np.array(others[:zero] + [tiny] + others[zero:])
            q /= q.sum()
            for n in config.ns:
                qs = np.stack([q] * n) if v.scheme_kind == "independent" else q
                tuples = np.array([w for w in reference.oracle.all_tuples(len(p), n)
                                   if zero in w and reference.drawable(v.scheme_kind, qs, w)]).reshape(-1, n)
                if not len(tuples):
                    continue
                P, Q = broadcast_rows(np.array(p), len(tuples)), broadcast_rows(qs, len(tuples))
                laws = to_numpy(v.transport(P, Q, tuples))
                tokens, _ = to_numpy(v.verify(P, Q, tuples, list(range(len(tuples)))))
                for w, law, token in zip(tuples, laws, tokens):
                    where = f"p = {p}, q = {q.tolist()}, n = {n}, drafts {w.tolist()}: law {law.tolist()}, token {token}"
                    assert np.all(np.isfinite(law)) and law[zero] == 0, where
                    assert 0 <= int(token) < len(p) and p[int(token)] > 0, where

CORE_ROW_CONFIGS = [c for c in CONFIGS if c.make().core_method and c.make().scheme_kind != "independent"]


@pytest.mark.parametrize("config", [c for c in CORE_ROW_CONFIGS if max(c.ns) >= 2], ids=config_id)
@examples(0.1)
@given(data=st.data())
@example(data=None)
def test_verify_takes_drafts_of_any_layout(config, data):
    """Drafts as a strided or reversed int64 view verify like their contiguous copy."""
    v = config.make()
    n = max(config.ns)
    p = np.full(3, 1 / 3)
    drafts = v.draft(p, n, 0)
    for view in (np.repeat(drafts, 2)[::2], np.ascontiguousarray(drafts[::-1])[::-1]):
        assert to_numpy(v.verify(p, p, view, 5)) == to_numpy(v.verify(p, p, drafts, 5))


# A target entry below the smallest normal float64 that no draft covers leaves a subnormal
# residual, whose reciprocal overflows (the property tests found NaN laws for method "maxflow" and spechub).
SUBNORMAL_GRID = [([1.0, 1e-310], [1.0, 0.0]), ([0.5, 0.5, 5e-324], [0.5, 0.5, 0.0]), ([1.0, 5e-324, 0.0], [0.5, 0.0, 0.5])]


@pytest.mark.parametrize("config", CONFIGS, ids=config_id)
def test_a_subnormal_target_mass_gives_finite_laws(config):
    """A target entry of 1e-310 or 5e-324 that no draft covers: every law is finite and lossless,
    and verify returns a token of positive target mass."""
    v = config.make()
    for p, q in SUBNORMAL_GRID:
        p, q = np.array(p), np.array(q)
        for n in config.ns:
            qs = np.stack([q] * n) if v.scheme_kind == "independent" else q
            case = Instance(p, qs, n, v.scheme_kind)
            tuples, probs = reference.drawable_tuples(case.scheme, qs, n, lambda w: v.draft_probability(qs, w))
            T = to_numpy(v.transport(broadcast_rows(p, len(tuples)), broadcast_rows(qs, len(tuples)), tuples))
            reference.check_lossless(case.p64, tuples, probs, T)
            for w in tuples:
                token, _ = to_numpy(v.verify(p, qs, w, 0))
                assert 0 <= int(token) < len(p) and p[int(token)] > 0, f"p = {p}, q = {q}, drafts {w}: token {token}"


# A draft law with subnormal entries: the max-flow plans index draft sets by masses that underflow
# (the property tests found tuples that draft() returns refused as "probability zero").
SUBNORMAL_DRAFT_GRID = [([5e-324, 5e-324, 1.0], [5e-324, 5e-324, 1.0]), ([0.3, 0.3, 0.4], [5e-324, 5e-324, 1.0]),
                        ([0.3, 0.3, 0.4], [1e-310, 1.0, 1e-310]), ([0.5, 0.5, 0.0, 0.0], [1e-200, 1e-200, 1e-200, 1.0])]


@pytest.mark.parametrize("config", CONFIGS, ids=config_id)
def test_every_tuple_of_positive_probability_is_verified(config):
    """Draft laws with subnormal and tiny entries: every tuple draft_probability gives positive
    probability has a transport law and is verified."""
    v = config.make()
    for p, q in SUBNORMAL_DRAFT_GRID:
        p, q = np.array(p), np.array(q)
        for n in config.ns:
            qs = np.stack([q] * n) if v.scheme_kind == "independent" else q
            tuples = np.array([w for w in reference.oracle.all_tuples(len(p), n)
                               if to_numpy(v.draft_probability(qs, w)) > 0]).reshape(-1, n)
            P, Q = broadcast_rows(p, len(tuples)), broadcast_rows(qs, len(tuples))
            laws = to_numpy(v.transport(P, Q, tuples))
            assert np.all(np.isfinite(laws))
            v.verify(P, Q, tuples, list(range(len(tuples))))

"""Exact losslessness by enumeration: sum_w P(w) * transport(w) == p (p = TARGET, q = DRAFT).

Also checks that every transport is a probability vector, that the acceptance obtained by
enumeration equals the reported one, the draft probabilities, and batched == row loop.
"""
import numpy as np
import pytest

import multidraft as md
from multidraft import _core
from multidraft import _validation as check
import oracle
from conftest import (CASES_BY_SCHEME, PLAN_METHODS, TOL, batch_of, case_id, plan_id, small_sample,
                      verifier_cases, verifier_configs)

N_RANDOM = 12  # random instances per scheme, on top of every adversarial one
CONFIGS = verifier_configs()
PLAN_CASES = [c for cases in CASES_BY_SCHEME.values() for c in small_sample(cases, N_RANDOM)]
VERIFIER_CASES = [pytest.param(cfg, case, id=f"{cfg.id}-{case.name}")
                  for config in CONFIGS for cfg, case in verifier_cases(config, N_RANDOM)]


def enumerated_acceptance(case, transport, tolerance=TOL):
    """Check losslessness of ``transport`` (drafts -> law over V) on ``case``; return the acceptance
    sum_w P(w) * transport(w)[set(w)] obtained by enumerating every tuple of positive probability."""
    tuples, probs = case.support
    T = np.array([transport(w) for w in tuples], dtype=np.float64)
    assert T.shape == (len(tuples), case.V)
    assert T.min() >= -1e-15, "negative transport probability"
    np.testing.assert_allclose(T.sum(axis=1), 1.0, rtol=0, atol=1e-12, err_msg="transport must sum to 1")
    assert np.abs(probs @ T - case.p64).sum() <= tolerance, "output law is not p"
    return sum(prob * T[k, np.unique(w)].sum() for k, (w, prob) in enumerate(zip(tuples, probs)))


def known_acceptance(name, case):
    """Closed-form acceptance where the method defines one (None otherwise)."""
    if name in ("otlp", "topk"):  # topk: p(top-n), the optimum of its one-tuple scheme
        return case.brute[0]
    if name == "sps":
        return oracle.single_draft_acceptance(case.p64, case.q64)
    if name == "naive":
        return float(case.p64 @ (1.0 - (1.0 - case.q64) ** case.n))
    if name == "global_resolution":
        return case.brute[0]
    return None


@pytest.mark.parametrize("plan_method", PLAN_METHODS, ids=plan_id)
@pytest.mark.parametrize("case", PLAN_CASES, ids=case_id)
def test_plan_is_lossless_and_optimal(case, plan_method):
    plan = case.solve(plan_method)
    accepted = enumerated_acceptance(case, plan.transport)
    assert abs(accepted - plan.alpha) <= TOL
    assert abs(accepted - case.brute[0]) <= TOL


@pytest.mark.parametrize("config, case", VERIFIER_CASES)
def test_verifier_is_lossless(config, case):
    v = config.make()
    tolerance = config.marginal_tolerance
    accepted = enumerated_acceptance(case, lambda w: v.transport(case.p, case.q, w), tolerance)
    reported = v.acceptance(case.p, case.q, case.n)
    options = dict(config.options)
    # P(output in drafts) for every verifier; Global Resolution's within its certified bound (0
    # wherever its truncation sets are enumerated, as at these sizes)
    bound = v.plan(case.p, case.q, case.n).alpha_error_bound if config.name == "global_resolution" else 0.0
    assert abs(accepted - reported) <= TOL + bound
    known = known_acceptance(config.name, case)
    if known is not None:  # Global Resolution: within 10 tau of alpha* (Lemma 6.6)
        assert abs(accepted - known) <= (10 * options["tau"] + TOL if config.name == "global_resolution" else TOL)
    # No verifier beats the optimum of its own draft scheme (subset selection by brute force).
    assert accepted <= case.brute[0] + (10 * options["tau"] if tolerance > TOL else TOL)


@pytest.mark.parametrize("config, case", VERIFIER_CASES)
def test_draft_probability_matches_enumeration(config, case):
    v = config.make()
    tuples, probs = case.support
    got = [v.draft_probability(case.q, w) for w in tuples]
    np.testing.assert_allclose(got, probs, rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("case", PLAN_CASES, ids=case_id)
def test_draft_scheme_enumeration(case):
    scheme = (md.draft_scheme(case.q, scheme="independent") if case.scheme == "independent"
              else md.draft_scheme(case.q, case.n, scheme=case.scheme))
    assert (scheme.kind, scheme.n, scheme.V) == (case.scheme, case.n, case.V)
    tuples, probs = scheme.enumerate()
    expected = {tuple(w): prob for w, prob in zip(*case.support)}
    got = {tuple(int(t) for t in w): float(prob) for w, prob in zip(tuples, probs)}
    assert got.keys() == expected.keys()
    np.testing.assert_allclose([got[w] for w in expected], list(expected.values()), rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose([scheme.probability(np.array(w)) for w in expected], list(expected.values()),
                               rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("case", PLAN_CASES, ids=case_id)
def test_drawable_tuples_are_exactly_those_of_positive_probability(case):
    """The core's one zero-probability check (every verifier's) over all V**n tuples, against the
    oracle's tuple law."""
    scheme = (md.draft_scheme(case.q, scheme="independent") if case.scheme == "independent"
              else md.draft_scheme(case.q, case.n, scheme=case.scheme))
    for w, prob in zip(*case.law):
        if prob > 0:
            scheme.check_drawable(w.reshape(1, -1))
        else:
            with pytest.raises(ValueError, match="'drafts' has probability zero"):
                scheme.check_drawable(w.reshape(1, -1))


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.id)
def test_batched_transport_equals_rows(config):
    v, p, q, drafts = batch_of(config)
    batched = v.transport(p, q, drafts)
    rows = [v.transport(p[b], q[b], drafts[b]) for b in range(len(p))]
    np.testing.assert_allclose(batched, rows, rtol=0, atol=1e-15)


def general_path(v, p, q, drafts, seeds):
    """Tokens (B,) and laws (B, V) of the general path: Python's checks, then _core.verify / transport."""
    scales = []
    p2, q3, n, d, _ = v._inputs(p, q, drafts, scales)
    tokens = _core.verify(v.core_method, p2, q3, d, seeds, v._core_options(), *scales)
    return tokens, v._transport(p2, q3, n, d, scales)


@pytest.mark.parametrize("config", [c for c in CONFIGS if c.make().core_method and c.make().scheme_kind != "independent"],
                         ids=lambda c: c.id)
def test_checked_core_calls_equal_the_general_path(config):
    """NumPy float32 / float64 rows of any strides, one or a batch, are checked and verified in one core
    call (_core.verify_checked, transport_checked), which gives the general path's tokens and laws bit for
    bit, for rows off 1 by 5e-7 too (float64 rows read in place with their scales, others normalised in a
    buffer); a row or draft the core refuses falls through to the general path's errors."""
    v, p, q, drafts = batch_of(config, B=6)
    p = p * (1.0 + 5e-7)
    seeds = np.arange(6, dtype=np.uint64) * 7919
    wide = lambda x: np.repeat(x, 2, axis=1)[:, ::2]  # noqa: E731
    forms = {"float64": (p, q), "float32": (p.astype(np.float32), q.astype(np.float32)),
             "strided": (wide(p), wide(q)), "fortran": (np.asfortranarray(p), np.asfortranarray(q)),
             "mixed": (p, q.astype(np.float32))}
    for label, (P, Q) in forms.items():
        tolerances = check.core_tolerances(P, Q)
        out = _core.verify_checked(v.core_method, P, Q, drafts, seeds, v._core_options(), *tolerances)
        laws = _core.transport_checked(v.core_method, P, Q, drafts, v._core_options(), *tolerances)
        assert out is not None and laws is not None, label
        tokens, general_laws = general_path(v, P, Q, drafts, seeds)
        np.testing.assert_array_equal(out[0], tokens, err_msg=label)
        np.testing.assert_array_equal(out[1], np.any(drafts == tokens[:, None], axis=1), err_msg=label)
        np.testing.assert_array_equal(laws, general_laws, err_msg=label)
        for b in range(len(P)):
            assert v.verify(P[b], Q[b], drafts[b], int(seeds[b])) == (int(tokens[b]), bool(out[1][b])), label
            np.testing.assert_array_equal(v.transport(P[b], Q[b], drafts[b].tolist()), laws[b], err_msg=label)
    out_of_range = drafts.copy()
    out_of_range[0, -1] = p.shape[1]
    assert _core.verify_checked(v.core_method, p, q, out_of_range, seeds, v._core_options(), 1e-6, 1e-6) is None
    with pytest.raises(ValueError, match="out of range"):
        v.verify(p[0], q[0], out_of_range[0], 0)
    assert _core.verify_checked(v.core_method, 2.0 * p, q, drafts, seeds, v._core_options(), 1e-6, 1e-6) is None
    with pytest.raises(ValueError, match="'p'"):
        v.verify(2.0 * p[0], q[0], drafts[0], 0)
    assert check.core_tolerances(p[0], q[0].astype(np.float16)) is None  # other dtypes: the general path


ROW_RNG = {"seed_list": lambda: [5, 17, 2, 99, 3, 8], "int": lambda: 77,
           "generator": lambda: np.random.default_rng(77)}


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.id)
@pytest.mark.parametrize("rng_kind", ROW_RNG)
def test_batched_verify_equals_rows(config, rng_kind):
    v, p, q, drafts = batch_of(config, B=6)
    seeds = ROW_RNG[rng_kind]() if rng_kind == "seed_list" else md.row_seeds(ROW_RNG[rng_kind](), len(p))
    tokens, accepted = v.verify(p, q, drafts, ROW_RNG[rng_kind]())
    rows = [v.verify(p[b], q[b], drafts[b], int(seeds[b])) for b in range(len(p))]
    np.testing.assert_array_equal(tokens, [t for t, _ in rows])
    np.testing.assert_array_equal(accepted, [a for _, a in rows])
    assert np.asarray(tokens).dtype == np.int64 and np.asarray(accepted).dtype == bool

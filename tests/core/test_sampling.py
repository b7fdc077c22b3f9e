"""Seeded Monte Carlo: sampled tokens and drafts follow their exact laws (p = TARGET, q = DRAFT)."""
import numpy as np
import pytest
from scipy.stats import chisquare

import multidraft as md
from conftest import PLAN_METHODS, dirichlet, plan_id, verifier_configs

N_SAMPLES = 20000
P_VALUE = 1e-4
CONFIGS = verifier_configs()


def instance(scheme, n, zeros):
    """A fixed (p, q) with q of shape (n, V) for scheme "independent"; ``zeros`` puts zeros in both."""
    rng = np.random.default_rng(31 + zeros)
    p, q = dirichlet(rng, 5, 2.0), dirichlet(rng, 5, 2.0, n if scheme == "independent" else None)
    if zeros:
        p[0], q[..., 1] = 0.0, 0.0
        p, q = p / p.sum(), q / q.sum(axis=-1, keepdims=True)
    return p, q


def assert_follows(samples, law):
    """Chi-square goodness of fit of integer ``samples`` against the probability vector ``law``."""
    counts = np.bincount(samples, minlength=len(law))
    assert len(counts) == len(law), "sample out of range"
    support = law > 1e-15
    assert counts[~support].sum() == 0, f"sampled outside the support: counts {counts}, law {law}"
    if support.sum() == 1:  # one outcome (a deterministic scheme's tuple): every sample is it, as checked
        return
    expected = law[support] / law[support].sum() * counts.sum()
    assert chisquare(counts[support], expected).pvalue > P_VALUE, (counts, law)


def tuple_index(tuples, samples):
    """Index of each sampled tuple in ``tuples`` (-1 when it is not there)."""
    lookup = {tuple(w): k for k, w in enumerate(np.asarray(tuples).tolist())}
    return np.array([lookup.get(tuple(w), -1) for w in np.asarray(samples).tolist()])


@pytest.mark.parametrize("zeros", [False, True], ids=["dense", "zeros"])
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.id)
def test_verify_outputs_target(config, zeros):
    v, n = config.make(), max(config.ns)
    p, q = instance(v.scheme_kind, n, zeros)
    rng = np.random.default_rng(2)
    drafts = np.array([v.draft(q, n, rng) for _ in range(N_SAMPLES)])
    tokens, accepted = v.verify(np.tile(p, (N_SAMPLES, 1)), np.tile(q, (N_SAMPLES,) + (1,) * q.ndim), drafts, 5)
    tokens, accepted = np.asarray(tokens), np.asarray(accepted)
    assert_follows(tokens, p)
    np.testing.assert_array_equal(accepted, (drafts == tokens[:, None]).any(axis=1))
    alpha = v.acceptance(p, q, n)
    assert abs(accepted.mean() - alpha) <= 5 * np.sqrt(alpha * (1 - alpha) / N_SAMPLES) + 1e-12


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.id)
def test_verifier_drafts_follow_draft_probability(config):
    v, n = config.make(), max(config.ns)
    _, q = instance(v.scheme_kind, n, zeros=True)
    rng = np.random.default_rng(4)
    drafts = np.array([v.draft(q, n, rng) for _ in range(N_SAMPLES)])
    tuples = np.unique(drafts, axis=0)
    law = np.array([v.draft_probability(q, w) for w in tuples])
    assert abs(law.sum() - 1.0) <= 1e-9, "some draft tuples were never sampled"
    assert_follows(tuple_index(tuples, drafts), law)


def spread_drafts(plan):
    """The draft tuple whose output law is the most spread out, so that sampling has something to show."""
    tuples, _ = plan.scheme.enumerate()
    return max(tuples, key=lambda w: np.count_nonzero(plan.transport(w) > 1e-3))


@pytest.mark.parametrize("scheme", ["iid", "without_replacement", "independent"])
@pytest.mark.parametrize("plan_method", PLAN_METHODS, ids=plan_id)
def test_plan_sample_follows_transport(plan_method, scheme):
    method, extra = plan_method
    n = 2
    p, q = instance(scheme, n, zeros=False)
    args = (p, q) if scheme == "independent" else (p, q, n)
    plan = md.solve_otlp(*args, method=method, scheme=scheme, **extra)
    drafts = spread_drafts(plan)
    law = plan.transport(drafts)
    rng = np.random.default_rng(6)
    assert_follows(np.array([plan.sample(drafts, rng) for _ in range(N_SAMPLES)]), law)


@pytest.mark.parametrize("kind", ["iid", "without_replacement", "independent"])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_draft_scheme_sample_follows_probability(kind, n):
    _, q = instance(kind, n, zeros=True)
    scheme = md.draft_scheme(q, scheme=kind) if kind == "independent" else md.draft_scheme(q, n, scheme=kind)
    tuples, probs = scheme.enumerate()
    np.testing.assert_allclose([scheme.probability(w) for w in tuples], probs, rtol=1e-12)
    rng = np.random.default_rng(8)
    samples = np.array([scheme.sample(rng) for _ in range(N_SAMPLES)])
    assert samples.shape == (N_SAMPLES, n) and samples.dtype == np.int64
    index = tuple_index(tuples, samples)
    assert np.all(index >= 0), "sampled a tuple of probability 0"
    assert_follows(index, np.asarray(probs))


def outputs_by_seed(config, seed):
    """Everything seeded that a verifier, a plan and a draft scheme return for one seed."""
    v, n = config.make(), max(config.ns)
    p, q = instance(v.scheme_kind, n, zeros=False)
    drafts = v.draft(q, n, seed)
    token, accepted = v.verify(p, q, drafts, seed)
    return tuple(drafts.tolist()), int(token), bool(accepted)


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.id)
def test_same_seed_same_output(config):
    first = [outputs_by_seed(config, seed) for seed in range(30)]
    assert first == [outputs_by_seed(config, seed) for seed in range(30)]
    assert len(set(first)) > 1, "the seed has no effect"
    v, n = config.make(), max(config.ns)
    p, q = instance(v.scheme_kind, n, zeros=False)
    draws = [v.draft(q, n, np.random.default_rng(9)).tolist() for _ in range(2)]
    assert draws[0] == draws[1], "same Generator state, different drafts"


@pytest.mark.parametrize("plan_method", PLAN_METHODS, ids=plan_id)
def test_plan_sample_same_seed(plan_method):
    method, extra = plan_method
    p, q = instance("iid", 2, zeros=False)
    plan = md.solve_otlp(p, q, 2, method=method, **extra)
    drafts = spread_drafts(plan)
    first = [plan.sample(drafts, seed) for seed in range(30)]
    assert first == [plan.sample(drafts, seed) for seed in range(30)]
    assert len(set(first)) > 1, "the seed has no effect"
    assert all(0 <= t < len(p) for t in first)


@pytest.mark.parametrize("name", md.verifier_names())
def test_verifiers_read_float64_rows_in_place_exactly(name):
    """Every core verifier reads C-contiguous float64 rows in place with their scales, each entry
    times 1 / its row's sum (sps, naive and global_resolution as they read it; the others from
    normalised copies the core writes): the tokens equal those drawn from the normalised copy that
    other layouts get (a strided view here), and the laws equal its laws to an ulp or two (a
    strided row's sum is added in another order), for rows whose sums miss 1 within the
    tolerance, one row or a batch."""
    rng = np.random.default_rng(12)
    p = dirichlet(rng, 60, 0.3, 4) * (1 + np.array([4e-7, -6e-7, 0.0, 2e-7]))[:, None]
    q = dirichlet(rng, 60, 0.3, 4) * (1 - 3e-7)
    strided = [np.repeat(x, 2, axis=-1)[..., ::2] for x in (p, q)]
    v = md.verifier(name, **({"fallback": True} if name == "global_resolution" else {}))
    n = v.fixed_n or 2
    drafts = np.array([v.draft(q[b] / q[b].sum(), n, rng) for b in range(4)])
    seeds = list(range(4))
    close = {"rtol": 1e-12, "atol": 1e-15}
    np.testing.assert_allclose(v.transport(p, q, drafts), v.transport(*strided, drafts), **close)
    np.testing.assert_allclose(v.transport(p[2], q[2], drafts[2]), v.transport(strided[0][2], strided[1][2], drafts[2]),
                               **close)
    for seed in range(20):
        batch = v.verify(p, q, drafts, [seed + s for s in seeds])
        assert [x.tolist() for x in batch] == [x.tolist() for x in v.verify(*strided, drafts, [seed + s for s in seeds])]
        assert v.verify(p[0], q[0], drafts[0], seed) == v.verify(strided[0][0], strided[1][0], drafts[0], seed)
    outcomes = [{v.verify(p[b], q[b], drafts[b], seed)[0] for seed in range(20)} for b in range(4)]
    assert max(len(tokens) for tokens in outcomes) > 1, "the seed has no effect"


@pytest.mark.parametrize("plan_method", PLAN_METHODS + [("global_resolution", {}), ("global_resolution", {"exact": False})],
                         ids=lambda m: "-".join([m[0], *(f"{k}={v}" for k, v in m[1].items())]))
def test_plans_refuse_a_draft_of_probability_zero(plan_method):
    """Every plan's transport and sample refuse a tuple with a draft of q = 0 with the core's one
    message (the core plans check in C++; the Python LP plan through the draft scheme)."""
    method, extra = plan_method
    rng = np.random.default_rng(3)
    p, q = dirichlet(rng, 12, 1.0), dirichlet(rng, 12, 1.0)
    q[[2, 7]] = 0.0
    q /= q.sum()
    plan = md.solve_otlp(p, q, 2, method=method, **extra)
    message = r"'drafts' has probability zero under the draft scheme \(q = 0 at a draft\)"
    for drafts in ([0, 7], [2, 2]):
        with pytest.raises(ValueError, match=message):
            plan.transport(drafts)
        with pytest.raises(ValueError, match=message):
            plan.sample(drafts, 0)
    plan.transport([0, 1])

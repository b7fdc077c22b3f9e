"""Every validation rule raises ValueError whose message names the offending argument."""
import numpy as np
import pytest

import multidraft as md
from conftest import PLAN_METHODS, plan_id, verifier_configs

V = 4
P = np.array([0.1, 0.2, 0.3, 0.4])  # target
Q = np.array([0.25, 0.25, 0.25, 0.25])  # draft
Q0 = np.array([0.0, 0.5, 0.25, 0.25])  # draft that never proposes token 0
N = 2
CONFIGS = verifier_configs()

# Bad probability arrays, built from a valid array x (last axis = vocabulary).
BAD_ARRAYS = {
    "ndim": lambda x: x[None, None],
    "scalar": lambda x: np.float64(1.0),
    "nan": lambda x: with_first(x, np.nan),
    "inf": lambda x: with_first(x, np.inf),
    "negative": lambda x: with_first(x, -0.1) + np.eye(x.shape[-1])[1] * (x[..., :1] + 0.1),
    "sum": lambda x: with_first(x, x[..., :1] + 1e-3),
    "empty": lambda x: np.array([]),
    "dtype": lambda x: np.full(x.shape, "a"),
    "vocabulary": lambda x: np.concatenate([x, np.zeros(x.shape[:-1] + (1,))], axis=-1),
}


def with_first(x, value):
    x = np.array(x, dtype=np.float64)
    x[..., :1] = value
    return x


def q_for(v, q, n):
    """The draft argument of a verifier: (n, V) rows for scheme "independent"."""
    return np.tile(q, (n, 1)) if v.scheme_kind == "independent" else q


def n_of(config):
    return max(n for n in config.ns if n <= N)


def pq_entry_points():
    """(id, call(p, q), valid q) for every public function that takes a target and a draft."""
    calls = [
        ("acceptance_rate", lambda p, q: md.acceptance_rate(p, q), Q),
        ("optimal_acceptance", lambda p, q: md.optimal_acceptance(p, q, N), Q),
        ("optimal_acceptance_wr", lambda p, q: md.optimal_acceptance(p, q, N, scheme="without_replacement"), Q),
        ("optimal_acceptance_independent", lambda p, q: md.optimal_acceptance(p, q), np.tile(Q, (N, 1))),
        ("optimal_subset", lambda p, q: md.optimal_subset(p, q, N), Q),
    ]
    calls += [(f"solve_otlp-{plan_id(pm)}", lambda p, q, pm=pm: md.solve_otlp(p, q, N, method=pm[0], **pm[1]), Q)
              for pm in PLAN_METHODS]
    for config in CONFIGS:
        v, n = config.make(), n_of(config)
        drafts = np.arange(n)
        calls += [
            (f"{config.id}.transport", lambda p, q, v=v, d=drafts: v.transport(p, q, d), q_for(v, Q, n)),
            (f"{config.id}.verify", lambda p, q, v=v, d=drafts: v.verify(p, q, d, 0), q_for(v, Q, n)),
            (f"{config.id}.acceptance", lambda p, q, v=v, n=n: v.acceptance(p, q, n), q_for(v, Q, n)),
        ]
    return calls


ARRAY_CASES = [pytest.param(call, arg, bad, q, id=f"{name}-{arg}-{bad}")
               for name, call, q in pq_entry_points() for arg in ("p", "q") for bad in BAD_ARRAYS]


@pytest.mark.parametrize("call, arg, bad, q", ARRAY_CASES)
def test_bad_probability_array(call, arg, bad, q):
    p, q = (BAD_ARRAYS[bad](P), q) if arg == "p" else (P, BAD_ARRAYS[bad](q))
    match = r"'[pq]s?'" if bad in ("vocabulary", "empty") else rf"'{arg}s?'"
    with pytest.raises(ValueError, match=match):
        call(p, q)


def n_entry_points():
    calls = [
        ("optimal_acceptance", lambda n: md.optimal_acceptance(P, Q, n)),
        ("optimal_subset", lambda n: md.optimal_subset(P, Q, n)),
        ("draft_scheme", lambda n: md.draft_scheme(Q, n)),
        ("draft_scheme_wr", lambda n: md.draft_scheme(Q, n, scheme="without_replacement")),
    ]
    calls += [(f"solve_otlp-{plan_id(pm)}", lambda n, pm=pm: md.solve_otlp(P, Q, n, method=pm[0], **pm[1]))
              for pm in PLAN_METHODS]
    for config in CONFIGS:
        v = config.make()
        if v.scheme_kind != "independent":
            calls += [(f"{config.id}.draft", lambda n, v=v: v.draft(Q, n, 0)),
                      (f"{config.id}.acceptance", lambda n, v=v: v.acceptance(P, Q, n))]
    return calls


N_CALLS = dict(n_entry_points())


@pytest.mark.parametrize("n", [0, -1, 2.5])
@pytest.mark.parametrize("name", N_CALLS)
def test_bad_n(name, n):
    with pytest.raises(ValueError, match="'n'"):
        N_CALLS[name](n)


def drafts_entry_points():
    """(id, call(drafts)) for every function that takes drafts (n = 2, sps: 1); token 0 has q = 0."""
    calls = []
    for scheme, q in (("iid", Q0), ("without_replacement", Q0), ("independent", np.array([Q0, Q]))):
        args = (P, q) if scheme == "independent" else (P, q, N)
        for pm in PLAN_METHODS:
            plan = md.solve_otlp(*args, method=pm[0], scheme=scheme, **pm[1])
            calls += [(f"plan-{plan_id(pm)}-{scheme}.transport", plan.transport),
                      (f"plan-{plan_id(pm)}-{scheme}.sample", lambda d, plan=plan: plan.sample(d, 0))]
        calls.append((f"draft_scheme-{scheme}.probability", plan.scheme.probability))
    for config in CONFIGS:
        v = config.make()
        q = q_for(v, Q0, n_of(config))
        calls += [(f"{config.id}.transport", lambda d, v=v, q=q: v.transport(P, q, d)),
                  (f"{config.id}.verify", lambda d, v=v, q=q: v.verify(P, q, d, 0)),
                  (f"{config.id}.draft_probability", lambda d, v=v, q=q: v.draft_probability(q, d))]
    return calls


DRAFTS_CALLS = dict(drafts_entry_points())
BAD_DRAFTS = {"out_of_range_high": [V, 1], "out_of_range_negative": [-1, 1], "non_integer": [1.5, 2.0],
              "ndim": [[[1, 2]]]}  # the bad token comes first: "sps" keeps only drafts[..., :1]


@pytest.mark.parametrize("bad", BAD_DRAFTS)
@pytest.mark.parametrize("name", DRAFTS_CALLS)
def test_bad_drafts(name, bad):
    drafts = np.array(BAD_DRAFTS[bad])
    if name.startswith("sps"):
        drafts = drafts[..., :1]
    with pytest.raises(ValueError, match="'drafts'"):
        DRAFTS_CALLS[name](drafts)


def fixed_length(name):
    """Entry points whose n is fixed by the plan, the scheme or the verifier (not by len(drafts))."""
    return name.startswith(("plan", "draft_scheme", "sps")) or "independent" in name


@pytest.mark.parametrize("change", [-1, 1], ids=["short", "long"])
@pytest.mark.parametrize("name", [name for name in DRAFTS_CALLS if fixed_length(name)])
def test_drafts_of_wrong_length(name, change):
    n = 1 if name.startswith("sps") else N
    with pytest.raises(ValueError, match="'drafts'|'n'"):
        DRAFTS_CALLS[name](np.arange(1, 1 + n + change))


@pytest.mark.parametrize("name", [name for name in DRAFTS_CALLS if "probability" not in name])
def test_drafts_of_zero_probability(name):
    # token 0 has q = 0 (in every row but the last for "independent"); without replacement also
    # never repeats a token
    drafts = [0] if name.startswith("sps") else ([1, 1] if "without_replacement" in name else [0, 1])
    with pytest.raises(ValueError, match="'drafts'"):
        DRAFTS_CALLS[name](np.array(drafts))


@pytest.mark.parametrize("call, match", [
    (lambda: md.verifier("no_such_verifier"), "'name'|no_such_verifier"),
    (lambda: md.solve_otlp(P, Q, N, method="simplex"), "'method'"),
    (lambda: md.verifier("otlp", method="simplex"), "'method'"),
    (lambda: md.verifier("otlp", scheme="bogus"), "'scheme'"),
    (lambda: md.solve_otlp(P, Q, N, network="graph"), "'network'"),
    (lambda: md.solve_otlp(P, Q, N, scheme="bogus"), "'scheme'"),
    (lambda: md.optimal_acceptance(P, Q, N, scheme="bogus"), "'scheme'"),
    (lambda: md.optimal_subset(P, Q, N, scheme="bogus"), "'scheme'"),
    (lambda: md.draft_scheme(Q, N, scheme="bogus"), "'scheme'"),
], ids=["verifier", "solve_otlp-method", "otlp-method", "otlp-scheme", "network", "solve_otlp-scheme",
        "optimal_acceptance-scheme", "optimal_subset-scheme", "draft_scheme-kind"])
def test_unknown_names(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("call", [
    lambda v: v.acceptance(P, Q, 2),
    lambda v: v.draft(Q, 2, 0),
    lambda v: v.transport(P, Q, np.array([1, 2])),
    lambda v: v.verify(P, Q, np.array([1, 2]), 0),
], ids=["acceptance", "draft", "transport", "verify"])
def test_sps_needs_one_draft(call):
    with pytest.raises(ValueError, match="'n'|'drafts'"):
        call(md.verifier("sps"))


TOO_LARGE = r"too large|MAX_NETWORK_ARCS|MAX_LP_VARIABLES"


@pytest.mark.parametrize("plan_method", PLAN_METHODS, ids=plan_id)
def test_too_large_is_refused(plan_method):
    method, extra = plan_method
    rng = np.random.default_rng(0)
    p, q = rng.dirichlet(np.ones(2000)), np.full(2000, 1 / 2000)
    with pytest.raises(ValueError, match=TOO_LARGE):  # when solving, or lazily at the first slice
        md.solve_otlp(p, q, 4, method=method, **extra).transport(np.arange(4))
    if not extra:
        with pytest.raises(ValueError, match=TOO_LARGE):
            md.verifier("otlp", method=method).transport(p, q, np.arange(4))


def batched_entry_points():
    P3, Q3 = np.tile(P, (3, 1)), np.tile(Q, (3, 1))
    D3 = np.tile([1, 2], (3, 1))
    v = md.verifier("otlp")
    return [
        ("acceptance_rate-q", lambda: md.acceptance_rate(P3, Q3[:2]), r"'[pq]'"),
        ("optimal_acceptance-q", lambda: md.optimal_acceptance(P3, Q3[:2], N), r"'[pq]'"),
        ("transport-q", lambda: v.transport(P3, Q3[:2], D3), r"'[pq]'"),
        ("transport-drafts", lambda: v.transport(P3, Q3, D3[:2]), "'drafts'"),
        ("verify-q", lambda: v.verify(P3, Q3[:2], D3, 0), r"'[pq]'"),
        ("verify-drafts", lambda: v.verify(P3, Q3, D3[:2], 0), "'drafts'"),
        ("verify-rng", lambda: v.verify(P3, Q3, D3, [1, 2]), "'rng'"),
    ]


@pytest.mark.parametrize("name, call, match", batched_entry_points(), ids=[b[0] for b in batched_entry_points()])
def test_batched_shapes_must_agree(name, call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("build", [
    lambda p, q: md.draft_scheme(q, 2),
    lambda p, q: md.solve_otlp(p, q, 2),
    lambda p, q: md.GlobalResolution(p, q, 2),
], ids=["draft_scheme", "solve_otlp", "GlobalResolution"])
def test_plans_leave_the_callers_arrays_writable(build):
    """The plan keeps a read-only normalised copy; the caller's arrays stay writable and unchanged."""
    p, q = np.array([0.25, 0.25, 0.5]), np.array([0.5, 0.25, 0.25])
    plan = build(p, q)
    assert p.flags.writeable and q.flags.writeable
    assert p.tolist() == [0.25, 0.25, 0.5] and q.tolist() == [0.5, 0.25, 0.25]
    scheme = getattr(plan, "scheme", plan)
    assert not scheme.q.flags.writeable

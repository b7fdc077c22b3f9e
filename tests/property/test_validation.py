"""Invalid input to every public entry point raises ValueError naming the argument (never another
exception, a crash or a result), and the sum tolerance is one rule for every dtype and every path
(the core's in-place reads, its normalised copies, NumPy's float16 path, one-row verify).
p = TARGET, q = DRAFT.
"""
import numpy as np
import pytest
from hypothesis import assume, example, given, strategies as st

import multidraft as md
from conftest import verifier_configs
from multidraft._validation import sum_tolerance

from . import reference
from .strategies import (NUMPY_DTYPES, TORCH_DTYPES, examples, law, pair, stored, stored_values, to_numpy,
                         torch)

CONFIGS = verifier_configs()


def refused(call, *names):
    """``call()`` raises ValueError whose message names one of ``names`` (as 'name'); any other
    exception propagates and fails the test."""
    with pytest.raises(ValueError) as info:
        call()
    message = str(info.value)
    assert any(f"'{name}'" in message for name in names), f"{message!r} names none of {names}"


# ----------------------------------------------------------------------------- corrupted arrays

# (corruption, NumPy dtypes it survives, whether torch keeps it); each makes a valid row invalid.
VALUE_CORRUPTIONS = {
    "nan": (NUMPY_DTYPES, True),
    "inf": (NUMPY_DTYPES, True),
    "-inf": (NUMPY_DTYPES, True),
    "negative": (NUMPY_DTYPES, True),
    "tiny_negative": ((np.float64,), False),  # -5e-324: rounds to -0.0 (valid) in other dtypes
    "doubled": (NUMPY_DTYPES, True),
    "halved": (NUMPY_DTYPES, True),
    "zeros": (NUMPY_DTYPES, True),
}
SHAPE_CORRUPTIONS = ("scalar", "extra_axes", "empty", "shorter")
DTYPE_CORRUPTIONS = ("complex", "bool", "object", "str", "torch_complex", "torch_bool")


@st.composite
def corrupted(draw, values: np.ndarray):
    """``values`` (a valid float64 row or batch) made invalid in one way, in some storage; and the
    corruption's kind ("value", "shape" or "dtype")."""
    kind = draw(st.sampled_from(("value", "value", "shape", "dtype")))
    x = values.copy()
    where = tuple(draw(st.integers(0, s - 1)) for s in x.shape)
    if kind == "value":
        name = draw(st.sampled_from(sorted(VALUE_CORRUPTIONS)))
        row = x[where[:-1]]
        if name in ("nan", "inf", "-inf", "negative", "tiny_negative"):
            row[where[-1]] = {"nan": np.nan, "inf": np.inf, "-inf": -np.inf, "negative": -0.25,
                              "tiny_negative": -5e-324}[name]
        else:
            row *= {"doubled": 2.0, "halved": 0.5, "zeros": 0.0}[name]
        dtypes, torch_ok = VALUE_CORRUPTIONS[name]
        return draw(stored(x, torch_allowed=torch_ok, dtypes=None if torch_ok else dtypes, repair=False)), kind
    if kind == "shape":
        name = draw(st.sampled_from(SHAPE_CORRUPTIONS))
        x = {"scalar": lambda: x.reshape(-1)[0], "extra_axes": lambda: x[None, None],
             "empty": lambda: x[..., :0], "shorter": lambda: x[..., :-1]}[name]()
        return (x if np.ndim(x) == 0 else draw(stored(np.asarray(x), repair=False))), kind
    name = draw(st.sampled_from(DTYPE_CORRUPTIONS if torch else DTYPE_CORRUPTIONS[:4]))
    return {"complex": lambda: x.astype(np.complex128), "bool": lambda: x > 0, "object": lambda: x.astype(object),
            "str": lambda: x.astype(str), "torch_complex": lambda: torch.from_numpy(x).to(torch.complex64),
            "torch_bool": lambda: torch.from_numpy(x > 0)}[name](), kind


def bad_tokens(V: int, n: int, batched: bool, B: int):
    """Draft arrays of the right length that are not token ids in [0, V) (or of a rank too many)."""
    shape = (B, n) if batched else (n,)
    return st.sampled_from([
        np.full(shape, V), np.full(shape, -1), np.full(shape, 2**40), np.full(shape, 2**63 - 1),
        np.full(shape, 0.5), np.full(shape, np.nan), np.full(shape, np.inf),
        np.zeros((B, 1, n) if batched else (1, 1, n), dtype=np.int64), np.full(shape, "0"), np.zeros(shape, dtype=bool),
    ])


BAD_COUNTS = (0, -1, 2.0, 1.5, True, "2", np.float64(2.0), None)
BAD_SEEDS = (-1, 1.5, "seed", [-3], np.array([1.5]), object())


# ----------------------------------------------------------------------------- verifiers

@st.composite
def valid_call(draw, v, ns):
    """A valid (p, q, n, drafts) for verifier v, one row or a batch."""
    V, n, batched = draw(st.integers(1, 5)), draw(st.sampled_from(ns)), draw(st.booleans())
    B = draw(st.integers(1, 3)) if batched else 1
    independent = v.scheme_kind == "independent"
    rows = [draw(pair(V, q_rows=n if independent else 0)) for _ in range(B)]
    p = np.stack([r[0] for r in rows])
    q = np.stack([r[1] for r in rows])
    drafts = np.stack([to_numpy(v.draft(q[b], n, b)) for b in range(B)])
    return (p, q, drafts) if batched else (p[0], q[0], drafts[0])


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.id)
@examples(0.75)
@given(data=st.data())
def test_verifier_refuses_invalid_input(config, data):
    v = config.make()
    p, q, drafts = data.draw(valid_call(v, config.ns), label="valid")
    n, batched = drafts.shape[-1], drafts.ndim == 2
    target = data.draw(st.sampled_from(("p", "q", "drafts", "n", "rng")), label="argument")
    calls = {
        "transport": lambda p, q, d, n, rng: v.transport(p, q, d),
        "verify": lambda p, q, d, n, rng: v.verify(p, q, d, rng),
        "acceptance": lambda p, q, d, n, rng: v.acceptance(p, q, n),
        "draft": lambda p, q, d, n, rng: v.draft(q, n, rng),
        "draft_probability": lambda p, q, d, n, rng: v.draft_probability(q, d),
    }
    args = dict(p=p, q=q, d=drafts, n=n, rng=0)
    if target in ("p", "q"):
        args[target], kind = data.draw(corrupted(args[target]), label=f"bad {target}")
        names = (target,) if kind != "shape" else ("p", "q")  # a shape mismatch may name either
        with_p = ("transport", "verify", "acceptance")
        uses = tuple(calls) if target == "q" and not batched and kind != "shape" else with_p  # a shorter q is a q
    elif target == "drafts":
        args["d"] = data.draw(bad_tokens(p.shape[-1], n, batched, len(drafts)), label="bad drafts")
        names, uses = ("drafts",), ("transport", "verify") + (() if batched else ("draft_probability",))
    elif target == "n":
        args["n"] = data.draw(st.sampled_from(BAD_COUNTS), label="bad n")
        # acceptance defaults a missing n (to 1, or to the rows of q); draft needs it unless q has a row per draft
        uses = (() if args["n"] is None else ("acceptance",)) + (
            () if batched or (args["n"] is None and v.scheme_kind == "independent") else ("draft",))
        assume(uses)
        names = ("n",)
    else:
        args["rng"] = data.draw(st.sampled_from(BAD_SEEDS), label="bad rng")
        names, uses = ("rng",), ("verify",) + (() if batched else ("draft",))
    for use in uses:
        if use == "draft" and batched:
            continue
        refused(lambda: calls[use](**args), *names)


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.id)
@examples(0.1)
@given(data=st.data(), length=st.sampled_from(("empty", "longer")))
@example(data=None, length="empty")
def test_drafts_of_the_wrong_length_are_named(config, data, length):
    """Drafts of no token, or (for a verifier of fixed n or one draft model per draft) of n + 1, are
    refused naming 'drafts'."""
    v = config.make()
    n = max(config.ns)
    p = np.ones(4) / 4
    q = np.ones((n, 4)) / 4 if v.scheme_kind == "independent" else p
    fixed = v.fixed_n is not None or v.scheme_kind == "independent"
    drafts = np.zeros(0 if length == "empty" or not fixed else n + 1, dtype=np.int64)
    refused(lambda: v.transport(p, q, drafts), "drafts")
    refused(lambda: v.verify(p, q, drafts, 0), "drafts")


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.id)
@examples(0.25)
@given(data=st.data())
def test_verifier_refuses_undrawable_drafts(config, data):
    """A tuple of probability 0 under the scheme has no transport law: ValueError naming 'drafts'."""
    v = config.make()
    p, q, drafts = data.draw(valid_call(v, config.ns), label="valid")
    V, n = p.shape[-1], drafts.shape[-1]
    tuples = np.array(np.meshgrid(*[np.arange(V)] * n, indexing="ij")).reshape(n, -1).T
    q_row = q if drafts.ndim == 1 else q[0]
    zero = [w for w in tuples if not reference.drawable(v.scheme_kind, q_row, w)]
    assume(zero)
    w = np.array(data.draw(st.sampled_from(zero), label="undrawable"))
    bad = w if drafts.ndim == 1 else np.vstack([w, drafts[1:]])
    refused(lambda: v.transport(p, q, bad), "drafts")
    refused(lambda: v.verify(p, q, bad, 0), "drafts")


# ----------------------------------------------------------------------------- other entry points

def _plan(method, **options):
    return lambda p, q, n: md.solve_otlp(p, q, n, method=method, **options)


ENTRIES = {  # name: (call(p, q, n), ns)
    "acceptance_rate": (lambda p, q, n: md.acceptance_rate(p, q), (1,)),
    "optimal_acceptance": (lambda p, q, n: md.optimal_acceptance(p, q, n), (1, 2, 3)),
    "optimal_subset": (lambda p, q, n: md.optimal_subset(p, q, n), (1, 2, 3)),
    "optimal_subset-without_replacement": (lambda p, q, n: md.optimal_subset(p, q, n, scheme="without_replacement"),
                                           (1, 2, 3)),
    "optimal_subset-hub": (lambda p, q, n: md.optimal_subset(p, q, n, scheme="hub"), (2,)),
    "optimal_subset-topk": (lambda p, q, n: md.optimal_subset(p, q, n, scheme="topk"), (1, 2, 3)),
    "khisti.optimal_acceptance_two_drafts": (lambda p, q, n: md.khisti.optimal_acceptance_two_drafts(p, q), (2,)),
    "khisti.accepts_always": (lambda p, q, n: md.khisti.accepts_always(p, q, n), (2, 3)),
    "solve_otlp-maxflow_cs": (_plan("maxflow_cs"), (1, 2, 3)),
    "solve_otlp-maxflow": (_plan("maxflow"), (1, 2, 3)),
    "solve_otlp-maxflow-tuples": (_plan("maxflow", network="tuples"), (1, 2)),
    "solve_otlp-lp": (_plan("lp"), (1, 2)),
    "solve_otlp-global_resolution": (_plan("global_resolution", tau=1e-3), (1, 2, 3)),
    "GlobalResolution": (lambda p, q, n: md.GlobalResolution(p, q, n), (1, 2, 3)),
    "rdk.transport": (lambda p, q, n: md.rdk.transport(p, q, np.zeros(np.shape(p)[:-1] + (1,), dtype=int)), (1,)),
}
ONE_PAIR = {"solve_otlp-maxflow_cs", "solve_otlp-maxflow", "solve_otlp-maxflow-tuples", "solve_otlp-lp",
            "solve_otlp-global_resolution", "GlobalResolution"}  # plans serve one (p, q) pair


@pytest.mark.parametrize("entry", sorted(ENTRIES))
@examples(1.0)
@given(data=st.data())
def test_entry_refuses_invalid_input(entry, data):
    call, ns = ENTRIES[entry]
    V, n = data.draw(st.integers(1, 5), label="V"), data.draw(st.sampled_from(ns), label="n")
    batched = entry not in ONE_PAIR and data.draw(st.booleans(), label="batched")
    rows = [data.draw(pair(V)) for _ in range(data.draw(st.integers(1, 3)) if batched else 1)]
    p, q = np.stack([r[0] for r in rows]), np.stack([r[1] for r in rows])
    if not batched:
        p, q = p[0], q[0]
    if entry == "rdk.transport":  # its draft is token 0: make it drawable
        q[..., 0] += 1.0
        q /= q.sum(axis=-1, keepdims=True)
    call(p, q, n)  # the valid call runs
    target = data.draw(st.sampled_from(("p", "q", "n")), label="argument")
    if target == "n":
        assume(ns != (1,) and entry != "khisti.optimal_acceptance_two_drafts")
        bad = data.draw(st.sampled_from(BAD_COUNTS), label="bad n")
        refused(lambda: call(p, q, bad), "n")
        return
    bad, kind = data.draw(corrupted(p if target == "p" else q), label=f"bad {target}")
    names = (target,) if kind != "shape" else ("p", "q")
    refused(lambda: call(bad, q, n) if target == "p" else call(p, bad, n), *names)


SCHEMES = ("iid", "without_replacement", "hub", "topk", "independent")


@pytest.mark.parametrize("scheme", SCHEMES)
@examples(0.5)
@given(data=st.data())
def test_draft_scheme_refuses_invalid_input(scheme, data):
    V = data.draw(st.integers(1, 5), label="V")
    n = 2 if scheme == "hub" else data.draw(st.integers(1, 3), label="n")
    q = data.draw(pair(V, q_rows=n if scheme == "independent" else 0))[1]
    md.draft_scheme(q, n, scheme=scheme)
    target = data.draw(st.sampled_from(("q", "n", "scheme")), label="argument")
    if target == "q":
        bad, _ = data.draw(corrupted(q), label="bad q")
        refused(lambda: md.draft_scheme(bad, n, scheme=scheme), "q")
    elif target == "n":
        bad = data.draw(st.sampled_from(BAD_COUNTS), label="bad n")
        assume(not (bad is None and scheme == "independent"))
        refused(lambda: md.draft_scheme(q, bad, scheme=scheme), "n")
    else:
        refused(lambda: md.draft_scheme(q, n, scheme=data.draw(st.sampled_from(("IID", "", "tree", 3)))), "scheme")


@pytest.mark.parametrize("method", ["maxflow_cs", "maxflow", "lp", "global_resolution"])
@examples(0.5)
@given(data=st.data())
def test_plan_refuses_invalid_drafts_and_seeds(method, data):
    V, n = data.draw(st.integers(1, 5), label="V"), data.draw(st.integers(1, 2), label="n")
    p, q = data.draw(pair(V))
    plan = md.solve_otlp(p, q, n, method=method)
    if data.draw(st.booleans(), label="drafts or rng"):
        bad = data.draw(bad_tokens(V, n, False, 1) | st.sampled_from([np.zeros(k, dtype=np.int64) for k in (0, n + 1)]),
                        label="bad drafts")
        refused(lambda: plan.transport(bad), "drafts")
        refused(lambda: plan.sample(bad, 0), "drafts")
    else:
        drafts = md.draft_scheme(q, n).sample(0)
        refused(lambda: plan.sample(drafts, data.draw(st.sampled_from(BAD_SEEDS), label="bad rng")), "rng")


# ----------------------------------------------------------------------------- the sum tolerance

def readers(x, y):
    """Every path that reads a probability row, each returning something that depends on its law."""
    sps, draft = md.verifier("sps"), np.array([int(np.argmax(stored_values(y)))])  # a drawable draft
    return {
        "acceptance_rate": lambda: md.acceptance_rate(x, y),      # normalised copy (core)
        "sps.transport": lambda: sps.transport(x, y, draft),      # in place with scales (float64)
        "sps.verify": lambda: sps.verify(x, y, draft, 0),         # one row, one core call
        "naive.transport": lambda: md.verifier("naive").transport(x, y, draft),
        "draft_scheme": lambda: md.draft_scheme(x, 1).probability(np.array([0])),
    }


@examples(4.0)
@given(data=st.data())
def test_sum_tolerance_is_one_rule_for_every_dtype_and_path(data):
    """A row is accepted iff its float64 sum is within sum_tolerance(dtype, V) of 1, by every reader;
    an accepted row's law is the stored values over their sum. Rows are drawn in a band of
    [0, 3] tolerances around 1, on both sides; sums within a few float64 ulps of the boundary are
    skipped (the readers may sum in another order)."""
    V = data.draw(st.integers(1, 6), label="V")
    torch_dtype = bool(TORCH_DTYPES) and data.draw(st.booleans(), label="torch")
    dtype = data.draw(st.sampled_from(TORCH_DTYPES if torch_dtype else NUMPY_DTYPES), label="dtype")
    tolerance = sum_tolerance(dtype, V)
    base = data.draw(pair(V))[0]
    offset = data.draw(st.floats(-3.0, 3.0) | st.sampled_from((0.99, -0.99, 1.01, -1.01, 1.0001, -1.0001)),
                       label="offset in tolerances")
    scaled = base * (1.0 + offset * tolerance)
    if torch_dtype:
        x = torch.from_numpy(scaled).to(dtype)
        if data.draw(st.booleans(), label="strided"):
            x = torch.stack([x, x], -1)[..., 0]
    else:
        x = data.draw(stored(scaled.astype(dtype).astype(np.float64), dtypes=(dtype,)), label="x")
    total = stored_values(x).sum()
    assume(abs(abs(total - 1.0) - tolerance) > 8 * V * np.finfo(np.float64).eps)
    y = np.ones(V) / V  # a valid partner
    if abs(total - 1.0) <= tolerance:
        values = law(x)
        np.testing.assert_allclose(to_numpy(md.acceptance_rate(x, y)), np.minimum(values, y).sum(), rtol=0, atol=1e-15)
        np.testing.assert_allclose(to_numpy(md.verifier("naive").transport(x, y, np.array([0]))), values,
                                   rtol=0, atol=1e-15)
        for name, read in {**readers(x, y), **readers(y, x)}.items():
            read()
    else:
        for name, read in readers(x, y).items():
            refused(read, "p" if name != "draft_scheme" else "q")
        for name, read in readers(y, x).items():
            if name != "draft_scheme":
                refused(read, "q")


@examples(1.0)
@given(k=st.one_of(st.integers(-3, 0), st.integers(md.MAX_THREADS + 1, md.MAX_THREADS + 100),
                   st.sampled_from((1.5, "2", True, None, 2.0))))
def test_set_num_threads_refuses_invalid_counts(k):
    before = md.get_num_threads()
    refused(lambda: md.set_num_threads(k), "k")
    assert md.get_num_threads() == before


@examples(0.25)
@given(seeds=st.lists(st.integers(0, 2**64 - 1), min_size=2, max_size=4))
@example(seeds=[2**64 - 1, 5])
def test_seed_lists_take_every_64_bit_seed(seeds):
    """Every seed an int rng may be (0 <= seed < 2**64) is accepted in a list of per-row seeds, and
    row b of a batch verifies as the single row with seed b."""
    assert [int(s) for s in md.row_seeds(seeds, len(seeds))] == seeds
    p = np.full((len(seeds), 3), 1 / 3)
    tokens, _ = md.verifier("sps").verify(p, p, np.zeros((len(seeds), 1), dtype=np.int64), seeds)
    assert [int(t) for t in to_numpy(tokens)] == [md.verifier("sps").verify(p[b], p[b], np.array([0]), s)[0]
                                                   for b, s in enumerate(seeds)]


@pytest.mark.parametrize("build", [lambda p, q: md.GlobalResolution(p, q, 1),
                                   lambda p, q: md.solve_otlp(p, q, 1, method="global_resolution")],
                         ids=["GlobalResolution", "solve_otlp"])
@pytest.mark.parametrize("p", [np.float64(1.0), np.ones((1, 1, 1))], ids=["0-D", "3-D"])
def test_global_resolution_names_a_p_of_the_wrong_rank(build, p):
    """Found by test_entry_refuses_invalid_input: a 0-D p beside a 1-D q was reported as a request
    for independent drafts ("GlobalResolution needs i.i.d. drafts ... got scheme 'independent'")."""
    refused(lambda: build(p, np.ones(1)), "p")

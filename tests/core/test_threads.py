"""Thread safety and thread-count independence (p = TARGET, q = DRAFT).

Plans and verifiers shared by Python threads that start together give the serial results; batched
calls give bit-identical arrays for every ``md.set_num_threads``; a bad row fails the batch with
``ValueError`` whatever the thread count.
"""
import os
import signal
import threading
import time

import numpy as np
import pytest

import multidraft as md
from multidraft import _core
from conftest import dirichlet

THREADS = 4
REPEATS = 5  # fresh plans per method: a race shows up only on some runs
# Rows of light work (a pass over p and q) are cut into chunks of at least 2**17 numbers: at this
# V a batch of 7 is cut into 3 chunks.
WIDE = 40000


@pytest.fixture(autouse=True)
def restore_thread_count():
    before = md.get_num_threads()
    yield
    md.set_num_threads(before)


def run_together(work, threads=THREADS):
    """``work(i)`` on ``threads`` Python threads released at once by a barrier; their results."""
    barrier = threading.Barrier(threads)
    results, errors = [None] * threads, []

    def run(i):
        barrier.wait()
        try:
            results[i] = work(i)
        except Exception as error:  # noqa: BLE001 - reported by the caller
            errors.append(error)

    pool = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    if errors:
        raise errors[0]
    return results


def truncated(rng, V, keep):
    """A draft with mass on ``keep`` tokens only (a top-k draft: small networks at any V)."""
    q = np.zeros(V)
    q[rng.choice(V, keep, replace=False)] = dirichlet(rng, keep, 0.5)
    return q


# ----------------------------------------------------------------------------- shared plans

# (id, V, n, scheme, factory(p, q, n)): every plan class, each with its lazily built parts
PLANS = [
    ("maxflow", 16, 3, "iid", lambda p, q, n: md.solve_otlp(p, q, n, method="maxflow")),
    ("maxflow-tuples", 9, 3, "iid", lambda p, q, n: md.solve_otlp(p, q, n, method="maxflow", network="tuples")),
    ("maxflow_cs-iid", 16, 3, "iid", lambda p, q, n: md.solve_otlp(p, q, n, method="maxflow_cs")),
    ("maxflow_cs-without_replacement", 16, 3, "without_replacement",
     lambda p, q, n: md.solve_otlp(p, q, n, method="maxflow_cs", scheme="without_replacement")),
    ("maxflow_cs-independent", 16, 3, "independent",
     lambda p, q, n: md.solve_otlp(p, q, method="maxflow_cs", scheme="independent")),
    ("lp", 5, 2, "iid", lambda p, q, n: md.solve_otlp(p, q, n, method="lp")),
    ("global_resolution", 16, 3, "iid", lambda p, q, n: md.GlobalResolution(p, q, n, tau=1e-3)),
]


@pytest.mark.parametrize("name, V, n, scheme, make", PLANS, ids=[plan[0] for plan in PLANS])
def test_shared_plan_equals_serial(name, V, n, scheme, make):
    rng = np.random.default_rng(5)
    for repeat in range(REPEATS):
        p = dirichlet(rng, V, 0.5)
        q = dirichlet(rng, V, 0.5, n) if scheme == "independent" else dirichlet(rng, V, 0.5)
        draft = md.draft_scheme(q, n, scheme=scheme) if scheme != "independent" else md.draft_scheme(q, scheme=scheme)
        tuples = np.array([draft.sample(seed) for seed in range(24)])
        serial_plan = make(p, q, n)
        expected = serial_plan.transport(tuples)
        expected_tokens = [serial_plan.sample(t, seed) for seed, t in enumerate(tuples)]
        shared = make(p, q, n)  # fresh: its lazy parts are built by the racing threads

        def work(i):
            # Each thread walks the tuples in its own order; thread 0 starts with single calls.
            order = np.random.default_rng(100 * repeat + i).permutation(len(tuples))
            if i == 0:
                laws = np.array([shared.transport(tuples[k]) for k in order])
            else:
                laws = shared.transport(tuples[order])
            tokens = [shared.sample(tuples[k], int(k)) for k in order]
            return order, laws, tokens

        for order, laws, tokens in run_together(work):
            np.testing.assert_array_equal(laws, expected[order])
            assert tokens == [expected_tokens[k] for k in order]


# ----------------------------------------------------------------------------- verifiers

def verifier_batch(v, n, B, V, rng, repeated=False):
    """p, q, drafts for B rows of verifier ``v``; ``repeated``: runs of equal (p, q) rows."""
    rows = np.repeat(np.arange(B), 3)[:B] if repeated else np.arange(B)
    p = dirichlet(rng, V, 0.5, B)[rows]
    q_shape = (B, n) if v.scheme_kind == "independent" else (B,)
    q = np.array([truncated(rng, V, 6) for _ in range(int(np.prod(q_shape)))]).reshape(*q_shape, V)[rows]
    drafts = np.array([v.draft(q[b], n, rng) for b in range(B)])
    return p, q, drafts


def verifier_configs():
    """(verifier, n): every registered name, plus the exact verifier's lazily solved method."""
    configs = [(md.verifier(name), {"sps": 1, "spechub": 2}.get(name, 3)) for name in md.verifier_names()]
    return configs + [(md.verifier("otlp", method="maxflow_cs", scheme=s), 3)
                      for s in ("iid", "without_replacement", "independent")]


CONFIGS = verifier_configs()


def batch_results(v, n, p, q, drafts):
    """The batched calls, and verify row by row (one NumPy row: the one-call core path, its GIL
    released while other threads run the same)."""
    seeds = np.arange(len(p))
    tokens, accepted = v.verify(p, q, drafts, seeds)
    row_tokens = [v.verify(p[b], q[b], drafts[b], int(seeds[b]))[0] for b in range(len(p))]
    return v.transport(p, q, drafts), tokens, accepted, np.asarray(v.acceptance(p, q, n)), np.array(row_tokens)


def assert_same(got, expected):
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("v, n", CONFIGS, ids=[repr(v) for v, _ in CONFIGS])
def test_shared_verifier_equals_serial(v, n):
    md.set_num_threads(3)  # several Python threads submitting to the pool at once
    p, q, drafts = verifier_batch(v, n, B=6, V=12, rng=np.random.default_rng(3))
    md.set_num_threads(1)
    expected = batch_results(v, n, p, q, drafts)
    md.set_num_threads(3)
    for got in run_together(lambda i: batch_results(v, n, p, q, drafts)):
        assert_same(got, expected)


@pytest.mark.parametrize("v, n", CONFIGS, ids=[repr(v) for v, _ in CONFIGS])
def test_batches_identical_for_any_thread_count(v, n):
    # Runs of equal (p, q) rows: every chunk builds its own plan at its first row.
    p, q, drafts = verifier_batch(v, n, B=7, V=WIDE, rng=np.random.default_rng(4), repeated=True)
    results = []
    for k in (1, 2, 3):
        md.set_num_threads(k)
        results.append(batch_results(v, n, p, q, drafts))
    for got in results[1:]:
        assert_same(got, results[0])


@pytest.mark.parametrize("n", [2, 3])
def test_full_vocabulary_rows_from_racing_threads(n):
    """Full-vocabulary rows (V = 4000: the Laplace sums interpolated on the grid, whose per-thread
    workspace keeps slots and tables between passes) verified from racing Python threads and on
    the pool's threads give the serial results."""
    from multidraft.bench.distributions import make_pairs
    p, q = make_pairs("flat", V=4000, k=4000, count=3, seed=21)
    v = md.verifier("global_resolution")
    drafts = np.stack([v.draft(row, n, np.random.default_rng(b)) for b, row in enumerate(q)])
    md.set_num_threads(1)
    expected = batch_results(v, n, p, q, drafts)
    md.set_num_threads(2)
    for got in run_together(lambda i: batch_results(v, n, p, q, drafts)):
        assert_same(got, expected)


def test_batched_core_calls_identical_for_any_thread_count():
    rng = np.random.default_rng(6)
    B, V, n = 16, WIDE, 3  # chunks of 4 rows of a single distribution
    p = dirichlet(rng, V, 0.3, B)
    q = dirichlet(rng, V, 0.3, B)
    qs = dirichlet(rng, V, 0.3, (B, n))
    top = np.array([truncated(rng, V, 6) for _ in range(B)])  # small networks for the min cuts
    seeds = np.arange(B, dtype=np.uint64) + 11
    counts = rng.integers(1, 1000, V)
    vmap = md.rdk.VocabularyMap.frequency_ranked(counts, V // 2)
    M = md.rdk.AffinityMatrix.from_calibration(rng.normal(size=(4, V)), tau=1.0, top_k=8, rows=np.arange(50))
    plan = md.solve_otlp(p[0], truncated(rng, V, 6), n, method="maxflow_cs")
    tuples = np.array([plan.scheme.sample(seed) for seed in range(9)])
    many_tuples = rng.integers(0, V, (140000, n))  # chunks of 2**17 / n tuples
    calibration = rng.normal(size=(8, 4096))  # M's covariance rows: 3 blocks of 1024 rows at V = 4096
    calibration_rows = rng.choice(4096, 2100, replace=False)

    def calls():
        return [*md.optimal_subset(p, q, n),
                md.optimal_acceptance(p, top, n, scheme="without_replacement"), md.acceptance_rate(p, q),
                _core.sample_drafts(q.reshape(B, 1, V), "iid", n, seeds),
                _core.sample_drafts(qs, "independent", n, seeds),
                _core.tuple_probability(q[0], "iid", n, many_tuples), _core.sample_rows(p, seeds),
                plan.transport(tuples), vmap.tli(p), vmap.masked(p), M.proposal(p), M.sample(p, n, seeds),
                md.rdk.taylor_proposal(p, q[0], 10.0),
                *vars(md.rdk.affinity_scores(calibration, 8, calibration_rows)).values()]

    results = []
    for k in (1, 2, 3):
        md.set_num_threads(k)
        results.append(calls())
    for got in results[1:]:
        assert_same(got, results[0])


@pytest.mark.parametrize("bad_rows", [[4], [4, 8], [8]])
def test_bad_row_raises_value_error_for_any_thread_count(bad_rows):
    # Hub drafts must contain the hub (argmax q): a tuple without it has probability zero, which
    # only the core can tell (inside a chunk).
    rng = np.random.default_rng(8)
    B, V = 9, 6
    v = md.verifier("otlp", method="maxflow_cs", scheme="hub")
    p, q = dirichlet(rng, V, 1.0, B), dirichlet(rng, V, 1.0, B)
    drafts = np.array([v.draft(q[b], 2, rng) for b in range(B)])
    for b in bad_rows:
        drafts[b] = np.argsort(q[b])[:2]  # the two least likely tokens, never the hub
    messages = []
    for k in (1, 2, 3):
        md.set_num_threads(k)
        with pytest.raises(ValueError, match="probability zero") as error:
            v.transport(p, q, drafts)
        messages.append(str(error.value))
        assert v.verify(p[:4], q[:4], drafts[:4], 0)[0].shape == (4,)  # the pool still works
    assert len(set(messages)) == 1


def test_first_bad_row_is_reported_for_any_thread_count():
    # Rows 4 and 8 are refused with messages that name their own sizes: the batch reports row 4's,
    # as the serial loop does, although row 8's chunk fails first (rows 0 to 3, before row 4 in
    # its chunk, take a few ms each; rows 5 to 7 take microseconds).
    rng = np.random.default_rng(12)
    B, V, n = 9, 600, 3
    v = md.verifier("rrs_without_replacement")
    p = dirichlet(rng, V, 1.0, B)
    q = np.array([truncated(rng, V, {4: 500, 8: V}.get(b, 100 if b < 4 else 6)) for b in range(B)])
    first = f"about {500.0 * 499 * 498:f} draft prefixes"
    for k in (1, 2, 3):
        md.set_num_threads(k)
        with pytest.raises(ValueError, match=first):
            v.acceptance(p, q, n)


def test_resizing_while_batches_run():
    v = md.verifier("otlp", method="maxflow_cs")
    p, q, drafts = verifier_batch(v, 3, B=8, V=40, rng=np.random.default_rng(9))
    md.set_num_threads(1)
    expected = v.transport(p, q, drafts)

    def work(i):
        if i == 0:
            for k in (3, 1, 2, 4, 1, 3):
                md.set_num_threads(k)
            return None
        return [v.transport(p, q, drafts) for _ in range(20)]

    for laws in run_together(work)[1:]:
        for got in laws:
            np.testing.assert_array_equal(got, expected)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_runs_batches():
    v = md.verifier("sps")
    p, q, drafts = verifier_batch(v, 1, B=6, V=50, rng=np.random.default_rng(10))
    md.set_num_threads(2)
    expected = v.transport(p, q, drafts)  # the parent's workers exist now
    pid = os.fork()
    if pid == 0:  # the child: a batch on a pool whose workers stayed in the parent
        try:
            os._exit(0 if np.array_equal(v.transport(p, q, drafts), expected) else 1)
        finally:
            os._exit(2)
    for _ in range(600):  # a child stuck on the parent's workers would never end
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the forked child hung in a batched call")
    assert os.waitstatus_to_exitcode(status) == 0


def test_thread_count_api():
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert md.get_num_threads() == usable  # the default (the fixture restores it after each test)
    md.set_num_threads(3)
    assert md.get_num_threads() == 3
    for bad in (0, -1, 1.5, True, "2", md.MAX_THREADS + 1):
        with pytest.raises(ValueError, match="'k'"):
            md.set_num_threads(bad)
    assert md.get_num_threads() == 3

"""Threads: ``md.set_num_threads`` / ``md.get_num_threads`` round-trip, batched calls give the same
results for every thread count, and 2 to 4 Python threads sharing one verifier or plan object get
what the calls give one after another. p = TARGET, q = DRAFT.
"""
import threading

import numpy as np
import pytest
from hypothesis import given, strategies as st

import multidraft as md
from conftest import verifier_configs

from .strategies import examples, pair, to_numpy

CONFIGS = verifier_configs()


@pytest.fixture(autouse=True)
def restore_thread_count():
    before = md.get_num_threads()
    yield
    md.set_num_threads(before)


def together(work, count):
    """``work(i)`` for i < count on ``count`` Python threads released at once; their results."""
    barrier, results, errors = threading.Barrier(count), [None] * count, []

    def run(i):
        barrier.wait()
        try:
            results[i] = work(i)
        except Exception as error:  # noqa: BLE001 - re-raised below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


@st.composite
def batch(draw, config, rows=(1, 8)):
    v = config.make()
    V, n, B = draw(st.integers(1, 6)), draw(st.sampled_from(config.ns)), draw(st.integers(*rows))
    independent = v.scheme_kind == "independent"
    pairs = [draw(pair(V, q_rows=n if independent else 0)) for _ in range(B)]
    p, q = np.stack([x[0] for x in pairs]), np.stack([x[1] for x in pairs])
    seeds = np.array(draw(st.lists(st.integers(0, 2**63 - 1), min_size=B, max_size=B)), dtype=np.uint64)
    drafts = np.stack([to_numpy(v.draft(q[b], n, int(seeds[b]))) for b in range(B)])
    return p, q, drafts, seeds


@examples(1.0)
@given(k=st.integers(1, md.MAX_THREADS))
def test_thread_count_round_trips(k):
    md.set_num_threads(k)
    assert md.get_num_threads() == k


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.id)
@examples(0.15)
@given(data=st.data(), counts=st.lists(st.integers(1, 4), min_size=2, max_size=2))
def test_batches_are_identical_for_any_thread_count(config, data, counts):
    v = config.make()
    p, q, drafts, seeds = data.draw(batch(config), label="batch")
    results = []
    for k in counts:
        md.set_num_threads(k)
        tokens, accepted = to_numpy(v.verify(p, q, drafts, seeds))
        results.append((tokens, accepted, to_numpy(v.transport(p, q, drafts)),
                        to_numpy(v.acceptance(p, q, drafts.shape[1]))))
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.id)
@examples(0.15)
@given(data=st.data(), count=st.integers(2, 4))
def test_threads_sharing_one_verifier_get_the_serial_results(config, data, count):
    """Each thread verifies its own batch (and the transports and acceptance of it) with the one
    shared object; the results equal the serial calls'."""
    v = config.make()
    batches = [data.draw(batch(config, rows=(1, 4)), label=f"batch {i}") for i in range(count)]

    def work(i):
        p, q, drafts, seeds = batches[i]
        return (*to_numpy(v.verify(p, q, drafts, seeds)), to_numpy(v.transport(p, q, drafts)),
                to_numpy(v.acceptance(p, q, drafts.shape[1])))

    serial = [work(i) for i in range(count)]
    for got, expected in zip(together(work, count), serial):
        for a, b in zip(got, expected):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("method", ["maxflow_cs", "maxflow", "global_resolution"])
@examples(0.25)
@given(data=st.data(), count=st.integers(2, 4))
def test_threads_sharing_one_plan_get_the_serial_results(method, data, count):
    """A fresh plan (its parts built lazily on first use) shared by threads that each transport and
    sample their own tuples."""
    V, n = data.draw(st.integers(2, 6), label="V"), data.draw(st.integers(1, 3), label="n")
    p, q = data.draw(pair(V), label="p, q")
    scheme = md.draft_scheme(q, n)
    tuples = [scheme.sample(seed) for seed in range(count)]

    def work(i, plan):
        return to_numpy(plan.transport(tuples[i])), int(to_numpy(plan.sample(tuples[i], i)))

    serial_plan = md.solve_otlp(p, q, n, method=method)
    serial = [work(i, serial_plan) for i in range(count)]
    shared = md.solve_otlp(p, q, n, method=method)
    for (law, token), (law0, token0) in zip(together(lambda i: work(i, shared), count), serial):
        np.testing.assert_array_equal(law, law0)
        assert token == token0

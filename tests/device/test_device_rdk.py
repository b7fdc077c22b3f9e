"""RDK ([OOV]) on tensors. Every per-position function of multidraft.rdk returns tensors on the input's
device by both routes: CPU tensors through the NumPy body ("host"), an accelerator's tensors through
multidraft.rdk._on_device ("device", the route tests/device give CPU tensors). The device laws equal
the NumPy ones within 1e-12 on random and adversarial cases and in every dtype, a row is the same
alone as in its batch, the device samplers follow their laws (exact losslessness by enumeration,
then frequencies), refusals are the NumPy path's, and the host reads O(1) or O(n) numbers per row."""
import threading

import numpy as np
import pytest

from multidraft import _device, rdk

from .laws import normalised

torch = pytest.importorskip("torch")

DTYPES = (torch.float64, torch.float32, torch.bfloat16)
# drafter ids 0..5 -> target ids of a 7-token vocabulary; drafter tokens 2 and 5 have no target id
VMAP = rdk.VocabularyMap(np.array([0, 2, -1, 3, 6, -1]), 7)


def draft_laws():
    """(name, q (6,)) drafter laws: random with zeros, one-hot, uniform, shared mass 1e-12 or 1."""
    rng = np.random.default_rng(51)
    out = []
    for i in range(6):
        q = rng.dirichlet(np.ones(6) * 0.6)
        q[rng.random(6) < 0.25] = 0.0
        out.append((f"random{i}", normalised(q if q.sum() else np.ones(6))))
    out += [("one-hot-shared", normalised([0, 0, 0, 1, 0, 0])), ("uniform", normalised(np.ones(6))),
            ("shared-1e-12", normalised([5e-13, 0, 1 - 1e-12, 5e-13, 0, 0])), ("all-shared", normalised([1, 2, 0, 3, 4, 0])),
            ("ties", normalised([1, 1, 1, 1, 1, 1]))]
    return out


CASES = draft_laws()
CASE_IDS = [name for name, _ in CASES]


def affinity(V: int = 7, seed: int = 3) -> rdk.AffinityMatrix:
    """A random row-stochastic M with zeros, an identity row and explicit zero entries in its CSR."""
    rng = np.random.default_rng(seed)
    dense = rng.dirichlet(np.full(V, 0.4), size=V)
    dense[rng.random((V, V)) < 0.4] = 0.0
    dense[1] = np.eye(V)[1]
    dense[dense.sum(axis=1) == 0, 0] = 1.0
    dense /= dense.sum(axis=1, keepdims=True)
    indptr = np.arange(0, V * V + 1, V)  # every entry stored, zeros included
    return rdk.AffinityMatrix(indptr, np.tile(np.arange(V), V), dense.ravel())


def on_route(route: str, function, *args, **kwargs):
    """``function(*args, **kwargs)`` by one route: "host" (CPU tensors read by the NumPy body) or
    "device" (the path of an accelerator's tensors)."""
    previous = _device.CPU_ON_HOST
    _device.CPU_ON_HOST = route == "host"
    try:
        return function(*args, **kwargs)
    finally:
        _device.CPU_ON_HOST = previous


def assert_same_law(function, *args, **kwargs):
    """The device route's result is a float64 tensor on the input's device equal to the host
    route's (the NumPy path) within 1e-12; returns it."""
    host = on_route("host", function, *args, **kwargs)
    device = on_route("device", function, *args, **kwargs)
    assert isinstance(device, torch.Tensor) and device.dtype == torch.float64
    assert device.device == torch.get_default_device() or device.device.type == torch.get_default_device().type
    assert tuple(device.shape) == tuple(host.shape)
    np.testing.assert_allclose(device.cpu().numpy(), host.cpu().numpy(), rtol=0, atol=1e-12)
    return device


# ----------------------------------------------------------------------------- what comes back

@pytest.mark.parametrize("route", ["host", "device"])
def test_every_per_position_function_returns_tensors_on_the_input_device(route):
    q = torch.tensor(np.stack([law for _, law in CASES[:3]]))
    p = torch.tensor(np.stack([normalised(np.arange(1, 8))] * 3))
    M = affinity()
    q_prime = VMAP.tli(q)
    q_mask = VMAP.masked(q)
    drafts = q_prime.argmax(-1, keepdim=True)  # a token of q' and of q_mask in each row
    checks = {
        "tli": (lambda: VMAP.tli(q), torch.float64, (3, 7)),
        "masked": (lambda: VMAP.masked(q[0]), torch.float64, (7,)),
        "shared_mass": (lambda: VMAP.shared_mass(q), torch.float64, (3,)),
        "proposal": (lambda: M.proposal(q_prime), torch.float64, (3, 7)),
        "sample": (lambda: M.sample(q_prime, 4, [1, 2, 3]), torch.int64, (3, 4)),
        "one-row-sample": (lambda: M.sample(q_prime[0], 2, 5), torch.int64, (2,)),
        "taylor_proposal": (lambda: rdk.taylor_proposal(q_prime, torch.full((7,), 1 / 7)), torch.float64, (3, 7)),
        "verify-token": (lambda: rdk.verify(p, q_prime, drafts, [1, 2, 3])[0], torch.int64, (3,)),
        "transport": (lambda: rdk.transport(p[0], q_prime[0], drafts[0]), torch.float64, (7,)),
        "verify_block": (lambda: rdk.verify_block(p, q_prime[:2], drafts[:2, 0], 0), torch.int64, None),
        "masked_transport": (lambda: rdk.masked_transport(p, q_mask, drafts),
                             torch.float64, (3, 7)),
        "masked_verify-token": (lambda: rdk.masked_verify(p[0], q_mask[0], drafts[0], 1)[0], torch.int64, ()),
        "masked_verify-accepted": (lambda: rdk.masked_verify(p, q_mask, drafts, [1, 2, 3])[1], torch.bool, (3,)),
        "masked_acceptance": (lambda: rdk.masked_acceptance(p[0], q_mask[0]), torch.float64, ()),
        "unigram_prior": (lambda: rdk.unigram_prior(torch.tensor([1, 2, 3])), torch.float64, (3,)),
        "frequency_ranked": (lambda: rdk.frequency_ranked(torch.tensor([1, 5, 3]), 2), torch.int64, (2,)),
    }
    for name, (call, dtype, shape) in checks.items():
        value = on_route(route, call)
        assert isinstance(value, torch.Tensor) and value.device.type == q.device.type, name
        assert value.dtype == dtype, name
        assert shape is None or tuple(value.shape) == shape, name


def test_numpy_input_still_gives_numpy():
    q = CASES[0][1]
    assert type(VMAP.tli(q)) is np.ndarray and isinstance(VMAP.shared_mass(q), float)
    assert type(affinity().sample(VMAP.tli(q), 2, 0)) is np.ndarray
    assert type(rdk.masked_acceptance(normalised(np.arange(1, 8)), VMAP.masked(q))) is float


# ----------------------------------------------------------------------------- laws equal NumPy's

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_projections_equal_the_numpy_path(case, dtype):
    q = torch.tensor(case[1]).to(dtype)
    assert_same_law(VMAP.masked, q)
    assert_same_law(VMAP.shared_mass, q)
    assert_same_law(VMAP.tli, q)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_proposals_equal_the_numpy_path(dtype):
    M = affinity()
    q_prime = on_route("host", VMAP.tli, torch.tensor(np.stack([law for _, law in CASES])))
    q_prime = q_prime.to(dtype) / q_prime.to(dtype).sum(-1, keepdim=True).to(dtype)
    assert_same_law(M.proposal, q_prime)
    prior = torch.tensor(normalised([5, 0, 3, 1, 1, 0, 2]))
    for n_eff in (None, 0.5, 1e6):
        assert_same_law(rdk.taylor_proposal, q_prime, prior, n_eff)
        assert_same_law(rdk.taylor_proposal, q_prime[0], prior.cpu().numpy(), n_eff)


def test_a_row_is_the_same_alone_as_in_its_batch():
    q = torch.tensor(np.stack([law for _, law in CASES]))
    M = affinity()
    prior = torch.tensor(normalised(np.arange(7, 0, -1)))
    batch = {"tli": VMAP.tli(q), "masked": VMAP.masked(q)}
    batch["proposal"] = M.proposal(batch["tli"])
    batch["taylor"] = rdk.taylor_proposal(batch["tli"], prior)
    for b in range(q.shape[0]):
        alone = {"tli": VMAP.tli(q[b]), "masked": VMAP.masked(q[b])}
        alone["proposal"] = M.proposal(batch["tli"][b])
        alone["taylor"] = rdk.taylor_proposal(batch["tli"][b], prior)
        for name, law in alone.items():
            assert torch.equal(law, batch[name][b]), (name, b)


# ----------------------------------------------------------------------------- exact losslessness

@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_speculative_sampling_with_the_device_proposals_is_lossless(case):
    """sum_d p'(d) transport(p, p', d) == p, enumerated over every draft, for TLI, RDK and
    first-order RDK proposals computed on the device."""
    p = torch.tensor(normalised([4, 0, 1, 3, 2, 0.5, 1]))
    q_prime = VMAP.tli(torch.tensor(case[1]))
    for proposal in (q_prime, affinity().proposal(q_prime), rdk.taylor_proposal(q_prime, torch.ones(7) / 7, 2.0)):
        mixture = sum(float(proposal[d]) * rdk.transport(p, proposal, torch.tensor([d]))
                      for d in range(7) if proposal[d] > 0)
        np.testing.assert_allclose(mixture.cpu().numpy(), p.cpu().numpy(), rtol=0, atol=1e-12)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_the_masked_discard_sampler_is_lossless_and_equals_the_numpy_path(case):
    """Drafts d ~ q_mask plus -1 (the dropped mass 1 - q(I)): sum over d of its probability times
    masked_transport(p, q_mask, d) == p; each law and the acceptance equal the NumPy path's."""
    p = torch.tensor(normalised([4, 0, 1, 3, 2, 0.5, 1]))
    q_mask = VMAP.masked(torch.tensor(case[1]))
    weights = {d: float(q_mask[d]) for d in range(7) if q_mask[d] > 0}
    weights[-1] = 1.0 - float(q_mask.sum())
    mixture = torch.zeros(7, dtype=torch.float64)
    for d, weight in weights.items():
        if weight > 1e-15:
            mixture += weight * assert_same_law(rdk.masked_transport, p, q_mask, torch.tensor([d]))
    np.testing.assert_allclose(mixture.cpu().numpy(), p.cpu().numpy(), rtol=0, atol=1e-12)
    assert_same_law(rdk.masked_acceptance, p, q_mask)


# ----------------------------------------------------------------------------- the device samplers

@pytest.mark.parametrize("stored", ["every entry", "nonzeros"])
def test_the_two_stage_sampler_follows_m_transposed_q_prime(stored):
    """Frequencies of M.sample on the device against p' = M^T q' (5 sigma); tokens of p' = 0 never.
    M stores every entry (zeros among them), or its nonzeros only (rows of different lengths)."""
    M = affinity() if stored == "every entry" else rdk.AffinityMatrix.from_dense(affinity().to_dense())
    q_prime = torch.tensor(normalised([3, 0, 1, 0, 2, 0, 0]))
    draws = M.sample(q_prime.expand(4000, 7), 5, np.arange(4000)).cpu().numpy().ravel()
    law = M.proposal(q_prime).cpu().numpy()
    frequencies = np.bincount(draws, minlength=7) / draws.size
    sigma = np.sqrt(law * (1 - law) / draws.size)
    assert np.all(np.abs(frequencies - law) <= 5 * sigma + 1e-12)
    assert np.all(frequencies[law == 0] == 0)


def test_device_draws_follow_the_seeds():
    """The same seed gives the same draws, a batch equals its rows, and two seeds differ."""
    M = affinity()
    q_prime = VMAP.tli(torch.tensor(np.stack([law for _, law in CASES])))
    batch = M.sample(q_prime, 3, np.arange(10, 10 + q_prime.shape[0]))
    for b in range(q_prime.shape[0]):
        assert torch.equal(M.sample(q_prime[b], 3, 10 + b), batch[b])
    many = M.sample(q_prime[0].expand(50, 7), 3, np.arange(50))
    assert len({tuple(row.tolist()) for row in many}) > 1


@pytest.mark.parametrize("stored", ["every entry", "nonzeros"])
def test_row_draws_are_the_inverse_cdf_of_each_row(stored):
    """The device's second stage against a loop: the first entry whose running sum exceeds u times the
    row's total, held to the last positive entry; entries of weight 0 never drawn. M stores every
    entry (explicit zeros), or its nonzeros only (rows of different lengths, padded on the device)."""
    M = affinity(V=9, seed=8)
    if stored == "nonzeros":
        M = rdk.AffinityMatrix.from_dense(M.to_dense())
        assert len(set(np.diff(M.indptr))) > 2
    rng = np.random.default_rng(0)
    rows = rng.integers(0, 9, size=500)
    uniforms = np.concatenate([rng.random(496), [0.0, 1 - 2 ** -53, 0.5, 1 - 1e-12]])
    drawn = M._row_draws(torch.tensor(rows), torch.tensor(uniforms)).cpu().numpy()
    for i, u, j in zip(rows, uniforms, drawn):
        start, stop = M.indptr[i], M.indptr[i + 1]
        running = np.cumsum(M.values[start:stop])
        position = min(np.searchsorted(running, u * running[-1], side="right"),
                       np.searchsorted(running, running[-1]))
        assert j == M.indices[start + position] and M.values[start + position] > 0


def test_a_device_draft_block_is_lossless_at_its_first_token_and_runs_to_the_bonus():
    p = torch.tensor(np.stack([normalised([4, 0, 1, 3, 2, 0.5, 1]), normalised([1, 1, 0, 0, 2, 0, 1]),
                               normalised([0, 0, 3, 1, 0, 0, 1])]))
    proposals = torch.tensor(np.stack([normalised([0, 1, 1, 0, 2, 0, 0]), normalised([1, 0, 0, 0, 1, 0, 3])]))
    drafts = [torch.stack([torch.multinomial(proposals[j], 1, generator=torch.Generator(
        device=proposals.device).manual_seed(s))[0] for j in range(2)]) for s in range(3000)]
    firsts = np.array([int(rdk.verify_block(p, proposals, drafts[s], s)[0]) for s in range(3000)])
    law = p[0].cpu().numpy()
    sigma = np.sqrt(law * (1 - law) / firsts.size)
    assert np.all(np.abs(np.bincount(firsts, minlength=7) / firsts.size - law) <= 5 * sigma + 1e-12)
    # a proposal equal to p accepts every draft: L + 1 tokens, the last drawn from p[L]
    block = rdk.verify_block(p, p[:2], torch.tensor([0, 4]), 7)
    assert block.shape == (3,) and block[:2].tolist() == [0, 4] and p[2, int(block[2])] > 0


def test_the_device_masked_verifier_accepts_only_its_draft():
    p = torch.tensor(normalised([4, 0, 1, 3, 2, 0.5, 1])).expand(400, 7)
    q_mask = VMAP.masked(torch.tensor(CASES[0][1])).expand(400, 7)
    drafts = torch.tensor([[2], [-1], [3], [-1]] * 100)  # the tokens of q_mask, and its dropped mass
    token, accepted = rdk.masked_verify(p, q_mask, drafts, np.arange(400))
    assert not bool(accepted[drafts[:, 0] == -1].any())
    assert torch.equal(token[accepted], drafts[accepted, 0])


def test_calibration_functions_read_tensors_on_the_host():
    """Constructors, scores and the temperature search give from tensors what they give from NumPy."""
    rng = np.random.default_rng(4)
    samples = rng.normal(size=(12, 7))
    scores = rdk.affinity_scores(samples, 3)
    on_tensors = rdk.affinity_scores(torch.tensor(samples), 3)
    assert np.array_equal(on_tensors.indices, scores.indices) and np.array_equal(on_tensors.scores, scores.scores)
    M = scores.matrix(1.0)
    rebuilt = rdk.AffinityMatrix(torch.tensor(M.indptr), torch.tensor(M.indices), torch.tensor(M.values))
    assert np.array_equal(rebuilt.values, M.values)
    assert np.array_equal(rdk.AffinityMatrix.from_dense(torch.tensor(M.to_dense())).to_dense(), M.to_dense())
    assert np.array_equal(rdk.VocabularyMap.pruned(torch.tensor([0, 3]), 7).draft_to_target,
                          rdk.VocabularyMap.pruned(np.array([0, 3]), 7).draft_to_target)
    p = rng.dirichlet(np.ones(7), size=3)
    q_prime = rng.dirichlet(np.ones(7), size=3)
    best, means = rdk.select_temperature(scores, [0.5, 2.0], torch.tensor(p), torch.tensor(q_prime))
    expected = rdk.select_temperature(scores, [0.5, 2.0], p, q_prime)
    assert type(best) is float and best == expected[0] and np.allclose(means, expected[1], rtol=0, atol=1e-12)
    prior = rdk.leading_component_prior(torch.tensor(samples))
    np.testing.assert_allclose(prior.cpu().numpy(), rdk.leading_component_prior(samples), rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------- refusals

def refusals():
    """(name, call): each must raise the same ValueError by both routes."""
    good = torch.tensor(CASES[0][1])
    nan = good.clone()
    nan[1] = float("nan")
    negative = good.clone()
    negative[0] = -0.25
    M = affinity()
    q_prime = VMAP.tli(good)
    p = torch.tensor(normalised(np.arange(1, 8)))
    return [
        ("tli-nan", lambda: VMAP.tli(nan)),
        ("masked-negative", lambda: VMAP.masked(negative)),
        ("shared_mass-unnormalised", lambda: VMAP.shared_mass(good * 1.5)),
        ("tli-size", lambda: VMAP.tli(torch.ones(5) / 5)),
        ("tli-no-shared-mass", lambda: VMAP.tli(torch.tensor(np.stack([CASES[0][1], normalised([0, 0, 1, 0, 0, 1])])))),
        ("proposal-size", lambda: M.proposal(torch.ones(6) / 6)),
        ("sample-size", lambda: M.sample(torch.ones(6) / 6, 2, 0)),
        ("sample-n", lambda: M.sample(q_prime, 0, 0)),
        ("taylor-prior-negative", lambda: rdk.taylor_proposal(q_prime, -torch.ones(7))),
        ("taylor-prior-length", lambda: rdk.taylor_proposal(q_prime, torch.ones(6))),
        ("taylor-n_eff", lambda: rdk.taylor_proposal(q_prime, torch.ones(7), -1.0)),
        ("verify_block-shape", lambda: rdk.verify_block(p.expand(2, 7), q_prime.expand(2, 7), torch.tensor([0, 0]))),
        ("verify_block-draft-range", lambda: rdk.verify_block(p.expand(3, 7), q_prime.expand(2, 7),
                                                               torch.tensor([0, 9]))),
        ("masked-q_mask-over-1", lambda: rdk.masked_acceptance(p, torch.ones(7) / 6)),
        ("masked-q_mask-shape", lambda: rdk.masked_acceptance(p, torch.ones(6) / 7)),
        ("masked-drafts-shape", lambda: rdk.masked_transport(p, VMAP.masked(good), torch.tensor([0, 1]))),
    ]


@pytest.mark.parametrize("name,call", refusals(), ids=[name for name, _ in refusals()])
def test_refusals_are_the_numpy_paths(name, call):
    messages = []
    for route in ("host", "device"):
        with pytest.raises(ValueError) as error:
            on_route(route, call)
        messages.append(str(error.value))
    assert messages[0] == messages[1]


# ----------------------------------------------------------------------------- host traffic, threads

def test_the_host_reads_flags_and_draft_ids_only():
    """TLI, RDK and the two-stage sampler read the same few bytes at V = 64 and V = 4096."""
    read = {}
    for V in (64, 4096):
        rng = np.random.default_rng(V)
        vmap = rdk.VocabularyMap(np.arange(V // 2), V)
        q = torch.tensor(rng.dirichlet(np.ones(V // 2), size=4))
        M = rdk.AffinityMatrix.identity(V)
        before = _device.host_bytes_read()
        M.proposal(rdk.taylor_proposal(vmap.tli(q), torch.ones(V) / V))
        read[V] = _device.host_bytes_read() - before
        before = _device.host_bytes_read()
        M.sample(vmap.tli(q), 3, [0, 1, 2, 3])
        read[V, "sample"] = _device.host_bytes_read() - before
    assert read[64] == read[4096] <= 16 and read[64, "sample"] == read[4096, "sample"] <= 16


def from_threads(call, count: int = 8) -> list:
    """``call()`` on ``count`` threads released at once by a barrier: their results."""
    results, barrier = [None] * count, threading.Barrier(count)

    def work(i):
        barrier.wait()
        results[i] = call()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_the_two_stage_sampler_is_the_same_from_every_thread():
    """A fresh M (its rows not yet copied to the device) sampled from 8 threads at once: every
    thread draws what one thread alone draws."""
    q_prime = VMAP.tli(torch.tensor(np.stack([law for _, law in CASES])))
    expected = affinity().sample(q_prime, 3, np.arange(q_prime.shape[0]))
    M = affinity()
    results = from_threads(lambda: M.sample(q_prime, 3, np.arange(q_prime.shape[0])))
    assert all(torch.equal(result, expected) for result in results)


def test_maps_and_laws_are_the_same_from_every_thread():
    vmap = rdk.VocabularyMap(np.array([0, 2, -1, 3, 6, -1]), 7)  # its device index not built yet
    q = torch.tensor(np.stack([law for _, law in CASES if law[[0, 1, 3, 4]].sum() > 0]))
    expected = VMAP.tli(q)
    results = from_threads(lambda: vmap.tli(q))
    assert all(torch.equal(result, expected) for result in results)

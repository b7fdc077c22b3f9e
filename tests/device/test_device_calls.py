"""The device path's contract on CPU tensors (the path a CUDA tensor takes): what comes back and where,
seeds and batches, sampling outside the draft support, mixed input, errors, and the host traffic."""
import re
import threading

import numpy as np
import pytest

import multidraft as md
from multidraft import _device
from multidraft._device.checked import SUPPORT_GUESS

torch = pytest.importorskip("torch")


def top_k_laws(B: int, V: int, k: int, seed: int = 0):
    """(p (B, V) float32 softmax rows, q (B, V) float32 with k tokens each): a top-k draft."""
    generator = torch.Generator(device=torch.get_default_device()).manual_seed(seed)
    logits = torch.randn(B, V, generator=generator) * 2
    p = torch.softmax(logits, -1)
    draft_logits = logits + torch.randn(B, V, generator=generator)
    top = draft_logits.topk(k, -1)
    masked = torch.full_like(draft_logits, -torch.inf).scatter(1, top.indices, top.values)
    return p, torch.softmax(masked, -1)


# ----------------------------------------------------------------------------- what comes back

def test_every_entry_point_returns_tensors_on_the_input_device():
    p, q = top_k_laws(3, 50, 4)
    v = md.verifier("otlp")
    drafts = torch.stack([v.draft(q[b], 2, b) for b in range(3)])
    checks = {
        "draft": (drafts, torch.int64, (3, 2)),
        "transport": (v.transport(p, q, drafts), torch.float64, (3, 50)),
        "verify-token": (v.verify(p, q, drafts, [1, 2, 3])[0], torch.int64, (3,)),
        "verify-accepted": (v.verify(p, q, drafts, [1, 2, 3])[1], torch.bool, (3,)),
        "acceptance": (v.acceptance(p, q, 2), torch.float64, (3,)),
        "one-row-transport": (v.transport(p[0], q[0], drafts[0]), torch.float64, (50,)),
        "one-row-verify": (v.verify(p[0], q[0], drafts[0], 1)[0], torch.int64, ()),
        "one-row-acceptance": (v.acceptance(p[0], q[0], 2), torch.float64, ()),
        "draft_probability": (v.draft_probability(q[0], drafts[0]), torch.float64, ()),
        "rho": (md.verifier("spectr").rho(p, q, 2), torch.float64, (3,)),
        "acceptance_rate": (md.acceptance_rate(p, q), torch.float64, (3,)),
        "optimal_acceptance": (md.optimal_acceptance(p[0], q[0], 2), torch.float64, ()),
        "optimal_subset-H": (md.optimal_subset(p, q, 2)[1], torch.bool, (3, 50)),
        "softmax": (md.softmax(torch.randn(3, 50)), torch.float64, (3, 50)),
    }
    for name, (value, dtype, shape) in checks.items():
        assert isinstance(value, torch.Tensor) and value.device == p.device, name
        assert value.dtype == dtype and tuple(value.shape) == shape, name


def test_the_numpy_path_still_returns_numpy():
    p, q = (x.double().cpu().numpy() for x in top_k_laws(1, 20, 3))
    v = md.verifier("sps")
    d = v.draft(q[0], 1, 0)
    assert type(d) is np.ndarray and type(v.transport(p[0], q[0], d)) is np.ndarray
    token, accepted = v.verify(p[0], q[0], d, 0)
    assert type(token) is int and type(accepted) is bool
    assert type(md.softmax(np.zeros(3))) is np.ndarray and type(md.acceptance_rate(p[0], q[0])) is float


def test_mixed_input_goes_to_the_tensors_device():
    """A call with one tensor argument takes the device path: the others join the tensor's device."""
    p, q = top_k_laws(2, 30, 3)
    v = md.verifier("rrs")
    d = torch.stack([v.draft(q[b], 2, b) for b in range(2)])
    reference = v.transport(p, q, d)
    host = [x.cpu().numpy() for x in (p, q, d)]
    for args in ((p, host[1], host[2]), (host[0], q, host[2]), (host[0], host[1], d), (p.tolist(), q, d.tolist())):
        law = v.transport(*args)
        assert isinstance(law, torch.Tensor) and torch.equal(law, reference)
    assert torch.equal(md.acceptance_rate(p, q.cpu().numpy()), md.acceptance_rate(p, q))


@pytest.mark.parametrize("route", ["device path", "host route"])
def test_keyword_arguments_route_as_positional_ones(route, monkeypatch):
    """Every entry point's decorator (_device.tensor_route) reads tensors passed by keyword as it
    reads them by position, on both routes of a CPU tensor."""
    monkeypatch.setattr(_device, "CPU_ON_HOST", route == "host route")
    p, q = top_k_laws(2, 40, 3)
    v = md.verifier("otlp")
    drafts = torch.stack([v.draft(q[b], 2, b) for b in range(2)])
    pairs = [
        (v.transport(p, q, drafts), v.transport(p=p, q=q, drafts=drafts)),
        (v.verify(p, q, drafts, [3, 4])[0], v.verify(p, q, drafts=drafts, rng=[3, 4])[0]),
        (v.acceptance(p, q, 2), v.acceptance(p=p, q=q, n=2)),
        (v.draft(q[0], 2, 5), v.draft(q=q[0], n=2, rng=5)),
        (md.optimal_subset(p, q, 2, scheme="iid")[1], md.optimal_subset(p=p, q=q, n=2, scheme="iid")[1]),
        (md.acceptance_rate(p, q), md.acceptance_rate(q=q, p=p)),
        (md.softmax(p.log(), 0.5), md.softmax(logits=p.log(), temperature=0.5)),
    ]
    for positional, keyword in pairs:
        assert isinstance(keyword, torch.Tensor) and keyword.device == p.device
        assert torch.equal(positional, keyword)


# ----------------------------------------------------------------------------- seeds and batches

@pytest.mark.parametrize("name", md.verifier_names())
def test_batch_equals_the_loop_with_per_row_seeds(name):
    """Rows of different draft supports and vocabulary 5000 (sums over several blocks)."""
    v = md.verifier(name)
    n = v.fixed_n or 3
    p, q = top_k_laws(6, 5000, 4)
    q[3] = top_k_laws(1, 5000, 12, seed=1)[1][0]  # a wider draft support among them
    drafts = torch.stack([v.draft(q[b], n, 10 + b) for b in range(6)])
    seeds = np.arange(6) * 7 + 1
    tokens, accepted = v.verify(p, q, drafts, seeds)
    laws = v.transport(p, q, drafts)
    for b in range(6):
        assert torch.equal(v.transport(p[b], q[b], drafts[b]), laws[b])
        token, hit = v.verify(p[b], q[b], drafts[b], int(seeds[b]))
        assert (int(token), bool(hit)) == (int(tokens[b]), bool(accepted[b]))
    again = v.verify(p, q, drafts, seeds)
    assert torch.equal(again[0], tokens) and torch.equal(again[1], accepted)
    generator_tokens = v.verify(p, q, drafts, np.random.default_rng(4))[0]
    assert torch.equal(generator_tokens, v.verify(p, q, drafts, np.random.default_rng(4))[0])


def test_row_sums_do_not_depend_on_the_batch():
    x = torch.rand(5, 300_001, dtype=torch.float64)
    sums = _device.row_sums(x)
    assert all(bool(_device.row_sums(x[b]) == sums[b]) for b in range(5))
    assert torch.allclose(sums, x.sum(-1), rtol=1e-13, atol=0)


def test_tokens_outside_the_draft_support_follow_p():
    """Recursive rejection with a one-token draft of tiny p: nearly every output is drawn outside S
    on the device (the compressed problem's outside token). Frequencies over 40000 seeds match p within 5 standard deviations, and each token
    is the inverse CDF of the row's documented uniform."""
    V, rows = 6, 40_000
    p = torch.tensor([0.3, 0.001, 0.25, 0.0, 0.2, 0.249], dtype=torch.float64)
    q = torch.tensor([0.0, 1.0, 0.0, 0.0, 0.0, 0.0], dtype=torch.float64)
    seeds = np.arange(rows)
    drafts = torch.ones(rows, 1, dtype=torch.int64)
    tokens, accepted = md.verifier("rrs").verify(p.expand(rows, V), q.expand(rows, V), drafts, seeds)
    frequencies = np.bincount(tokens.cpu().numpy(), minlength=V) / rows
    sigma = np.sqrt(p.cpu().numpy() * (1 - p.cpu().numpy()) / rows)
    assert np.all(np.abs(frequencies - p.cpu().numpy()) <= 5 * sigma + 1e-12)
    assert frequencies[3] == 0.0 and np.array_equal(accepted.cpu().numpy(), tokens.cpu().numpy() == 1)
    outside = np.flatnonzero(tokens.cpu().numpy() != 1)[:50]
    cdf = np.cumsum(np.where(q.cpu().numpy() > 0, 0.0, p.cpu().numpy()))
    for row in outside:
        u = _device.row_uniforms(seeds[row:row + 1])[0, 0]
        assert tokens[row] == np.searchsorted(cdf, u * cdf[-1], side="right")


def test_speculative_sampling_draws_on_the_device():
    """"sps" on the device: accepted iff the row's first uniform is below min(1, p(d) / q(d)), else
    the inverse CDF of (p - q)^+ at its second; over 40000 seeds with drafts from q the tokens
    follow p within 5 standard deviations, and a token of p = 0 never comes."""
    V, rows = 6, 40_000
    p = np.array([0.3, 0.001, 0.25, 0.0, 0.2, 0.249])
    q = np.array([0.1, 0.5, 0.3, 0.0, 0.1, 0.0])
    seeds = np.arange(rows)
    drafts = np.random.default_rng(5).choice(V, size=(rows, 1), p=q)
    P, Q = torch.tensor(p).expand(rows, V), torch.tensor(q).expand(rows, V)
    tokens, accepted = md.verifier("sps").verify(P, Q, torch.tensor(drafts), seeds)
    tokens, accepted = tokens.cpu().numpy(), accepted.cpu().numpy()
    frequencies = np.bincount(tokens, minlength=V) / rows
    assert np.all(np.abs(frequencies - p) <= 5 * np.sqrt(p * (1 - p) / rows) + 1e-12) and frequencies[3] == 0
    residual = np.cumsum(np.maximum(p - q, 0))
    for row in range(200):
        u = _device.row_uniforms(seeds[row:row + 1], 2)[0]
        d = drafts[row, 0]
        assert accepted[row] == (u[0] < min(1.0, p[d] / q[d]))
        expected = d if accepted[row] else np.searchsorted(residual, u[1] * residual[-1], side="right")
        assert tokens[row] == expected


@pytest.mark.parametrize("name", ["naive", "topk"])
def test_naive_rejection_draws_p_on_the_device(name):
    """"naive" and "topk" on the device: the token is the inverse CDF of p at the row's first
    uniform, accepted iff it is one of the drafts; over 40000 seeds the tokens follow p within 5
    standard deviations, and a token of p = 0 never comes."""
    V, rows, n = 6, 40_000, 2
    p = np.array([0.3, 0.001, 0.25, 0.0, 0.2, 0.249])
    q = np.array([0.1, 0.5, 0.3, 0.0, 0.1, 0.0])
    seeds = np.arange(rows)
    v = md.verifier(name)
    drafts = np.stack([np.asarray(v.draft(q, n, int(seed))) for seed in seeds[:1000]] * (rows // 1000))
    P, Q = torch.tensor(p).expand(rows, V), torch.tensor(q).expand(rows, V)
    tokens, accepted = (x.cpu().numpy() for x in v.verify(P, Q, torch.tensor(drafts), seeds))
    frequencies = np.bincount(tokens, minlength=V) / rows
    assert np.all(np.abs(frequencies - p) <= 5 * np.sqrt(p * (1 - p) / rows) + 1e-12) and frequencies[3] == 0
    cdf = np.cumsum(p)
    for row in range(200):
        u = _device.row_uniforms(seeds[row:row + 1])[0, 0]
        assert tokens[row] == np.searchsorted(cdf, u * cdf[-1], side="right")
        assert accepted[row] == (tokens[row] in drafts[row])


@pytest.mark.parametrize("name", ["naive", "topk"])
@pytest.mark.parametrize("q", [[0.25, 0.25, 0.25, 0.25, 0.0], [0.0, 1.0, 0.0, 0.0, 0.0], [0.5, 0.0, 0.0, 0.5, 0.0],
                               [0.1, 0.4, 0.2, 0.3, 0.0], [0.2, 0.2, 0.1, 0.3, 0.2]])
def test_every_tuple_is_refused_as_the_numpy_path_refuses_it(name, q):
    """Every 3-tuple over V = 5 (ties, zeros, a support smaller than n, one-hot): the device path
    accepts exactly the tuples the core accepts, and refuses the others with its message."""
    p = np.array([0.1, 0.2, 0.3, 0.4, 0.0])
    v = md.verifier(name)
    accepted = 0
    for drafts in np.ndindex(5, 5, 5):
        d = np.array(drafts)
        try:
            expected = v.transport(p, np.array(q), d)
        except ValueError as error:
            with pytest.raises(ValueError, match=re.escape(str(error))):
                v.transport(torch.tensor(p), torch.tensor(q), torch.tensor(d))
            continue
        assert torch.equal(v.transport(torch.tensor(p), torch.tensor(q), torch.tensor(d)).cpu(),
                           torch.tensor(expected, device="cpu"))
        accepted += 1
    support = np.count_nonzero(q)
    assert accepted == (support ** 3 if name == "naive" else 1)


@pytest.mark.parametrize("name, n", [("sps", 1), ("naive", 3), ("topk", 3)])
def test_closed_form_laws_read_flags_only_whatever_the_draft_support(name, n):
    """A full-support draft law: "sps", "naive" and "topk" read, in their one read, the row sums and
    row minima of p and q, the drafts and q at them ("topk": the last draft's rank and the support's
    size too), 8 bytes each, at any V."""
    v = md.verifier(name)
    traffic = set()
    for V in (2000, 64000):
        p, q = (torch.softmax(torch.randn(4, V, generator=torch.Generator(device=torch.get_default_device())
                                          .manual_seed(V + i)), -1) for i in range(2))
        drafts = torch.stack([v.draft(q[b], n, b) for b in range(4)])
        v.verify(p, q, drafts, np.arange(4))
        traffic.add(_device.last_host_bytes())
        v.transport(p, q, drafts)
        traffic.add(_device.last_host_bytes())
    assert traffic == {8 * 4 * (4 + 2 * n + (2 if name == "topk" else 0))}


@pytest.mark.parametrize("name", ["otlp", "naive", "topk"])
def test_draws_are_the_same_whatever_thread(name):
    """A compressed problem (otlp) and the closed-form laws (naive, topk) from 4 threads at once."""
    p, q = top_k_laws(8, 2000, 3)
    v = md.verifier(name)
    drafts = torch.stack([v.draft(q[b], 2, b) for b in range(8)])
    expected = v.verify(p, q, drafts, np.arange(8))[0]
    results, bytes_seen = [], []

    def work():
        results.append(v.verify(p, q, drafts, np.arange(8))[0])
        bytes_seen.append(_device.last_host_bytes())

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(torch.equal(r, expected) for r in results)
    assert len(set(bytes_seen)) == 1  # the counter is per thread


# ----------------------------------------------------------------------------- errors

def _uniform(V=4):
    return torch.full((V,), 1 / V)


@pytest.mark.parametrize("bad, message", [
    (torch.tensor([0.5, float("nan"), 0.25, 0.25]), r"'p' is not finite at index \(1,\)"),
    (torch.tensor([0.75, -0.25, 0.25, 0.25]), r"'p' has a negative entry at index \(1,\)"),
    (torch.tensor([0.5, 0.5, 0.5, 0.5]), r"'p' must sum to 1 within 1e-06 \(the tolerance for torch\.float32 "
                                         r"at V = 4\), but sums to 2\.0"),
    (torch.tensor([[0.25] * 4, [0.5] * 4]), r"'p' must sum to 1 .* but sums to 2\.0 in row 1"),
    (torch.tensor([True, False, False, False]), r"'p' must be a float16, float32 or float64 .* dtype torch\.bool"),
    (torch.zeros(2, 2, 4), "'p' must be 1-D or 2-D"),
    (torch.zeros(0), r"'p' is empty"),
])
def test_refused_targets_give_the_numpy_paths_message(bad, message):
    bad = bad.to(torch.get_default_device())  # made at collection, on the CPU
    q = _uniform() if bad.dim() < 2 else _uniform().expand(2, 4)
    for call in (lambda: md.verifier("otlp").transport(bad, q, torch.zeros(bad.shape[:-1] + (2,), dtype=torch.int64)),
                 lambda: md.verifier("sps").verify(bad, q, torch.zeros(bad.shape[:-1] + (1,), dtype=torch.int64), 0),
                 lambda: md.acceptance_rate(bad, q),
                 lambda: md.optimal_acceptance(bad, q, 2)):
        with pytest.raises(ValueError, match=message):
            call()
    if bad.dim() == 1 and bad.numel() and bad.dtype != torch.bool:  # the NumPy path says the same
        with pytest.raises(ValueError, match=message.replace("torch\\.", "")):
            md.acceptance_rate(bad.cpu().numpy(), q.cpu().numpy())


def test_refused_drafts_and_devices():
    p, q = _uniform(), torch.tensor([0.5, 0.5, 0.0, 0.0])
    otlp = md.verifier("otlp")
    with pytest.raises(ValueError, match=r"'drafts' has token 4 out of range \[0, 4\)"):
        otlp.transport(p, q, torch.tensor([0, 4]))
    with pytest.raises(ValueError, match="'drafts' has probability zero under the draft scheme"):
        otlp.transport(p, q, torch.tensor([0, 2]))  # token 2 has q = 0
    with pytest.raises(ValueError, match="'drafts' has batch size 2, but 'p' has 1"):
        otlp.transport(p[None], q[None], torch.zeros(2, 2, dtype=torch.int64))
    with pytest.raises(ValueError, match="'q' has vocabulary size 3, but 'p' has 4"):
        otlp.transport(p, torch.full((3,), 1 / 3), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="verifier 'sps' takes exactly 1 draft"):
        md.verifier("sps").transport(p, q, torch.tensor([0, 1]))
    meta = torch.full((4,), 0.25, device="meta")
    with pytest.raises(ValueError, match=f"'q' is on device 'meta' but 'p' is on '{p.device}'"):
        otlp.transport(p, meta, torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="'p' is a torch tensor on device 'meta', which holds no values"):
        md.acceptance_rate(meta, q.cpu().numpy())


@pytest.mark.parametrize("name", ["sps", "naive", "topk", "otlp", "rrs"])
def test_a_verify_call_refuses_drafts_as_before(name):
    """The drafts' values are checked after the call's one read (an integer tensor stays on the device
    until then: its gathers are clamped in range), in the order of the checked calls: a token out of
    range before a bad law, and before a batch size that does not match."""
    v = md.verifier(name)
    n = v.fixed_n or 2
    p, q = _uniform().expand(2, 4), torch.tensor([0.5, 0.5, 0.0, 0.0]).expand(2, 4)
    out_of_range = torch.tensor([[0] * (n - 1) + [4], [0] * n])
    with pytest.raises(ValueError, match=r"'drafts' has token 4 out of range \[0, 4\)"):
        v.verify(p * 2, q, out_of_range, [1, 2])
    with pytest.raises(ValueError, match=r"'drafts' has token -1 out of range \[0, 4\)"):
        v.verify(p, q, torch.full((3, n), -1, dtype=torch.int32), [1, 2])
    with pytest.raises(ValueError, match="'drafts' has batch size 3, but 'p' has 2"):
        v.verify(p, q, torch.zeros(3, n, dtype=torch.int64), [1, 2])
    with pytest.raises(ValueError, match="'p' must sum to 1 .* in row 0"):
        v.verify(p * 2, q, torch.zeros(2, n, dtype=torch.int64), [1, 2])
    with pytest.raises(ValueError, match=r"'q' has a negative entry at index \(1, 2\)"):
        v.verify(p, torch.tensor([[0.5, 0.5, 0.0, 0.0], [0.5, 0.5, -0.5, 0.5]]), torch.zeros(2, n, dtype=torch.int64), 1)
    with pytest.raises(ValueError, match="'drafts' has probability zero under the draft scheme"):
        v.verify(p, q, torch.full((2, n), 2), [1, 2])  # q = 0 at token 2
    with pytest.raises(ValueError, match="'drafts' must hold integer token ids, got dtype float32"):
        v.verify(p, q, torch.full((2, n), 0.5), [1, 2])
    generator = np.random.default_rng(0)  # a refused call draws no seeds from it
    with pytest.raises(ValueError, match="'p' must sum to 1"):
        v.verify(p * 2, q, torch.zeros(2, n, dtype=torch.int64), generator)
    assert generator.integers(2**62) == np.random.default_rng(0).integers(2**62)


def test_tensors_on_two_devices_are_refused():
    """The meta device stands for a second device on a machine without one."""
    p, q = _uniform(), _uniform()
    with pytest.raises(ValueError, match=rf"'drafts' is on device 'meta' but 'p' is on '{p.device}': pass the tensors"):
        md.verifier("otlp").transport(p, q, torch.zeros(2, device="meta", dtype=torch.int64))
    with pytest.raises(ValueError, match=rf"'q' is on device 'meta' but 'p' is on '{p.device}'"):
        md.acceptance_rate(p, q.to("meta"))


def test_softmax_on_the_device_path():
    x = torch.randn(3, 40, dtype=torch.float32)
    x[1, 5] = -torch.inf
    probs = md.softmax(x, 0.7)
    np.testing.assert_allclose(probs.cpu().numpy(), md.softmax(x.cpu().numpy(), 0.7), rtol=1e-13, atol=0)
    assert probs[1, 5] == 0.0
    for bad, message in ((torch.tensor([0.0, float("nan")]), r"'logits' has nan at index \(1,\)"),
                         (torch.tensor([[0.0, 1.0], [-torch.inf, -torch.inf]]), "'logits' row 1 is all -inf"),
                         (torch.tensor([True]), "'logits' must be an array of floats, got dtype torch.bool"),
                         (torch.zeros(2, 2, 2), "'logits' must be")):
        with pytest.raises(ValueError, match=message):
            md.softmax(bad)


# ----------------------------------------------------------------------------- host traffic

@pytest.mark.parametrize("name", ["otlp", "global_resolution", "khisti", "spectr"])
def test_host_traffic_is_o_k_not_o_v(name):
    """A top-k draft: the bytes read from the device per call are the same at V = 2000 and 64000, and
    within a few numbers per kept token and row (verify: per token of the guessed support, read in
    its one read before the support's size is known)."""
    v = md.verifier(name)
    B, k, n = 4, 6, 3
    traffic = {}
    for V in (2000, 64000):
        p, q = top_k_laws(B, V, k, seed=V)
        drafts = torch.stack([v.draft(q[b], n, b) for b in range(B)])
        v.verify(p, q, drafts, np.arange(B))
        verify_bytes = _device.last_host_bytes()
        v.transport(p, q, drafts)
        traffic[V] = (verify_bytes, _device.last_host_bytes())
        v.acceptance(p, q, n)
        assert 0 < _device.last_host_bytes() <= 8 * B * (3 * (k + 1) + 2)
    assert traffic[2000] == traffic[64000]
    # transport: ids, kept p, outside mass, kept q (k + 1 each, 8 bytes), a header and the drafts (n)
    assert traffic[64000][1] <= 8 * B * (3 * (k + 1) + 2 + n)
    # verify: ids, q and p of the guessed support (SUPPORT_GUESS + 1 each); 3 sums, 2 minima, the
    # support's size and the token drawn outside it; the drafts (n)
    assert traffic[64000][0] == 8 * B * (3 * (SUPPORT_GUESS + 1) - 1 + 7 + n)


# ----------------------------------------------------------------------------- kernels and reads

@pytest.mark.parametrize("name", md.verifier_names())
def test_a_verify_call_launches_at_most_40_kernels_and_reads_once(name):
    """The public verify call of every verifier at the launch benchmark's shape (V = 32000, a top-32
    draft, the benchmark's n; 8 rows for 64): at most 40 kernel-launching operators and ONE host read,
    the checks of p, q and the drafts included (multidraft.bench.launches.Launches, which counts
    to_host and the operators that synchronise by themselves)."""
    from multidraft.bench.launches import VERIFY_MAX_OPS, VERIFY_MAX_READS, Launches, verify_n

    B, V = 8, 32000
    p, q = top_k_laws(B, V, 32)
    v = md.verifier(name)
    drafts = torch.from_numpy(_device.draft_rows(v, q, verify_n(v), list(range(B)))).to(p.device)
    with Launches() as count:
        tokens, accepted = v.verify(p, q, drafts, np.arange(B))
    assert count.ops <= VERIFY_MAX_OPS == 40 and count.reads == VERIFY_MAX_READS == 1, dict(count.by_op)
    assert tokens.shape == accepted.shape == (B,)
    assert all(int(t) in d for t, d, a in zip(tokens.tolist(), drafts.tolist(), accepted.tolist()) if a)


def test_a_support_wider_than_guessed_costs_a_second_read():
    """A compressed problem reads the top SUPPORT_GUESS + 1 tokens of q with the checks; a row with a
    wider support (here SUPPORT_GUESS + 1 tokens) costs one more read, of the exact support, and the
    rows' results are still those of each row alone (which reads once when its support fits)."""
    from multidraft.bench.launches import Launches

    B, V = 4, 2000
    p, q = top_k_laws(B, V, SUPPORT_GUESS + 1)
    q[1] = top_k_laws(1, V, 3, seed=1)[1][0]
    v = md.verifier("rrs")
    drafts = torch.from_numpy(_device.draft_rows(v, q, 3, list(range(B)))).to(p.device)
    seeds = np.arange(B) + 5
    with Launches() as count:
        tokens, accepted = v.verify(p, q, drafts, seeds)
    assert count.reads == 2
    for b in range(B):
        with Launches() as alone:
            token, hit = v.verify(p[b], q[b], drafts[b], int(seeds[b]))
        assert alone.reads == (1 if b == 1 else 2)
        assert (int(token), bool(hit)) == (int(tokens[b]), bool(accepted[b]))

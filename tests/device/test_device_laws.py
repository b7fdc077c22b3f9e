"""The device path (multidraft._device) on CPU tensors, the path a CUDA tensor takes: for every
verifier, the law given the drafts, enumerated over every drawable draft tuple on tiny V, is the
normalised input exactly (within 1e-12) and equals the NumPy path's on the uncompressed input, as
do the acceptances, rho*, alpha* and H*. Cases are random and adversarial (zeros, ties, p == q,
disjoint supports, one-hot drafts, a full draft support, outside mass 1 - 1e-12)."""
import numpy as np
import pytest

import multidraft as md
from multidraft import _device

from .laws import normalised

torch = pytest.importorskip("torch")

V = 7
DTYPES = (torch.float64, torch.float32, torch.bfloat16)

# (id, verifier options, n): every registered verifier, with every scheme and option that changes
# its law
VERIFIERS = [
    ("sps", {}, 1), ("naive", {}, 2), ("topk", {}, 2), ("rrs", {}, 2), ("rrs_without_replacement", {}, 2),
    ("spectr", {}, 2), ("spechub", {}, 2), ("khisti", {}, 2), ("khisti", {}, 3),
    ("khisti", {"scheme": "independent"}, 2), ("khisti", {"truncation": 1}, 2), ("khisti", {"truncation": 2}, 2),
    ("khisti", {"truncation": 3}, 3), ("otlp", {}, 2), ("otlp", {"method": "maxflow"}, 2),
    ("otlp", {"method": "lp"}, 2), ("otlp", {"scheme": "without_replacement"}, 2), ("otlp", {"scheme": "hub"}, 2),
    ("otlp", {"scheme": "topk"}, 2), ("otlp", {"scheme": "independent"}, 2), ("global_resolution", {}, 2),
    ("global_resolution", {"tau": 1e-2, "exact": False}, 2),
]
VERIFIER_IDS = ["-".join([name, *map(str, options.values()), f"n{n}"]) for name, options, n in VERIFIERS]


def test_every_registered_verifier_is_covered():
    assert {name for name, _, _ in VERIFIERS} == set(md.verifier_names())


def cases():
    """(name, p (V,), q (V,)) float64 laws, unnormalised within float64 rounding."""
    rng = np.random.default_rng(33)
    out = []
    for i in range(8):  # random, with a draft support of 2 to 5 tokens and zeros in p
        p = rng.dirichlet(np.ones(V) * 0.7)
        p[rng.random(V) < 0.2] = 0.0
        q = np.zeros(V)
        support = rng.choice(V, size=2 + i % 4, replace=False)
        q[support] = rng.dirichlet(np.ones(len(support)))
        out.append((f"random{i}", normalised(p if p.sum() else np.ones(V)), q))
    base = normalised(np.arange(1, V + 1))
    top3 = normalised([0, 3, 0, 2, 1, 0, 0])
    out += [
        ("p-equals-q", top3, top3),
        ("disjoint", normalised([1, 0, 2, 0, 0, 3, 4]), normalised([0, 1, 0, 1, 0, 0, 0])),
        ("one-hot-draft", base, normalised([0, 0, 0, 1, 0, 0, 0])),
        ("full-draft-support", base, normalised(np.arange(V, 0, -1))),
        ("ties", normalised([1, 1, 1, 1, 1, 1, 1]), normalised([1, 1, 0, 0, 1, 0, 0])),
        ("outside-1e-12", normalised([(1 - 1e-12) / 4, 5e-13, (1 - 1e-12) / 4, 5e-13, (1 - 1e-12) / 4, 0, (1 - 1e-12) / 4]),
         normalised([0, 1, 0, 1, 0, 0, 0])),
        ("outside-heavy", normalised([9, 0.1, 8, 0.2, 7, 0.3, 6]), normalised([0, 2, 0, 1, 0, 1, 0])),  # Algorithm 2 ranks
        # Algorithm 2 with s = 2 ranks by p - q^2: 0.16 (token 1), 0.13 (token 0), then the outside
        # tokens; the two past the two kept ones, merged (0.14), would take token 0's place
        ("merged-outside-ranks-high", normalised([0.38, 0.25, 0.05, 0.07, 0.07, 0.09, 0.09]),
         normalised([0.5, 0.3, 0.2, 0, 0, 0, 0])),
        ("p-zero-on-drafts", normalised([1, 0, 2, 0, 3, 0, 0]), normalised([0, 1, 0, 1, 0, 1, 0])),
    ]
    return out


CASES = cases()


def draft_law(kind: str, q: np.ndarray, n: int) -> np.ndarray:
    """q for the scheme: independent drafts get n rows (q and a shifted copy of it)."""
    return np.stack([q, np.roll(q, 1)])[:n] if kind == "independent" else q


def tensor(x: np.ndarray, dtype):
    return torch.tensor(x, dtype=torch.float64).to(dtype)


def float64_law(t) -> np.ndarray:
    values = t.double().cpu().numpy()
    return values / values.sum(-1, keepdims=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name, options, n", VERIFIERS, ids=VERIFIER_IDS)
def test_enumerated_law_is_p_and_equals_the_numpy_path(name, options, n, dtype):
    v = md.verifier(name, **options)
    for case, p, q in CASES:
        pt, qt = tensor(p, dtype), tensor(draft_law(v.scheme_kind, q, n), dtype)
        pn, qn = float64_law(pt), float64_law(qt)  # the law the NumPy path uses: the normalised input
        if v.scheme_kind == "hub" and np.count_nonzero(qn) < 1:
            continue
        tuples, masses = md.draft_scheme(qn, n, v.scheme_kind).enumerate()
        batch = pt.reshape(1, V).expand(len(tuples), V)
        drafts_batch = torch.as_tensor(tuples)
        q_batch = qt.expand(len(tuples), *qt.shape)
        laws = v.transport(batch, q_batch, drafts_batch)
        assert isinstance(laws, torch.Tensor) and laws.dtype == torch.float64 and laws.device == pt.device
        laws = laws.cpu().numpy()
        reference = v.transport(np.repeat(pn[None], len(tuples), 0), np.repeat(qn[None], len(tuples), 0), tuples)
        # "lp": HiGHS solves the compressed and the full LP to its tolerances (1e-10), not to one solution
        per_tuple = 1e-9 if options.get("method") == "lp" else 1e-12
        np.testing.assert_allclose(laws, reference, rtol=0, atol=per_tuple, err_msg=case)
        if v.name != "global_resolution" or v.options.get("exact", True):  # [GR]'s raw plan is 15 tau off
            np.testing.assert_allclose(masses @ laws, pn, rtol=0, atol=1e-12, err_msg=case)
        accepted = sum(m * law[list(set(w))].sum() for w, m, law in zip(tuples, masses, laws))
        acceptance = v.acceptance(pt, qt, n)
        assert isinstance(acceptance, torch.Tensor) and acceptance.dim() == 0
        assert float(acceptance) == pytest.approx(v.acceptance(pn, qn, n), abs=1e-12), case
        if v.name != "global_resolution":  # whose exact acceptance is P(output in drafts) too (within bound)
            assert float(acceptance) == pytest.approx(accepted, abs=1e-12), case


@pytest.mark.parametrize("name, options, n", VERIFIERS, ids=VERIFIER_IDS)
def test_one_row_equals_its_row_in_a_batch(name, options, n):
    """transport and verify of each row alone equal the batch's rows (rows of different draft supports)."""
    v = md.verifier(name, **options)
    ps = torch.tensor(np.stack([p for _, p, _ in CASES]))
    qs = torch.tensor(np.stack([draft_law(v.scheme_kind, q, n) for _, _, q in CASES]))
    drafts = torch.stack([v.draft(qs[b], n, b) for b in range(len(CASES))])
    seeds = np.arange(100, 100 + len(CASES))
    laws = v.transport(ps, qs, drafts)
    tokens, accepted = v.verify(ps, qs, drafts, seeds)
    assert tokens.dtype == torch.int64 and accepted.dtype == torch.bool and tokens.shape == (len(CASES),)
    for b in range(len(CASES)):
        assert torch.equal(v.transport(ps[b], qs[b], drafts[b]), laws[b])
        token, hit = v.verify(ps[b], qs[b], drafts[b], int(seeds[b]))
        assert token.dim() == 0 and hit.dim() == 0
        assert (int(token), bool(hit)) == (int(tokens[b]), bool(accepted[b]))
        assert bool(hit) == (int(token) in drafts[b].tolist())


@pytest.mark.parametrize("name, options, n", [c for c in VERIFIERS if c[0] in ("spectr",)])
def test_rho_equals_the_numpy_path(name, options, n):
    v = md.verifier(name, **options)
    for case, p, q in CASES:
        rho = v.rho(torch.tensor(p), torch.tensor(q), n)
        assert isinstance(rho, torch.Tensor) and float(rho) == pytest.approx(v.rho(p, q, n), abs=1e-12), case


@pytest.mark.parametrize("scheme", ["iid", "without_replacement", "hub", "topk", "independent"])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_optimal_acceptance_and_subset_equal_the_numpy_path(scheme, n):
    if scheme == "hub" and n != 2:
        return
    for case, p, q in CASES:
        qs = draft_law(scheme, q, n)
        if scheme == "independent" and n == 3:
            qs = np.stack([q, np.roll(q, 1), np.roll(q, 2)])
        alpha, H = md.optimal_subset(torch.tensor(p), torch.tensor(qs), n, scheme=scheme)
        alpha_np, H_np = md.optimal_subset(p, qs, n, scheme=scheme)
        assert float(alpha) == pytest.approx(alpha_np, abs=1e-12), case
        assert H.dtype == torch.bool and H.tolist() == H_np.tolist(), case
        value = md.optimal_acceptance(torch.tensor(p), torch.tensor(qs), n, scheme=scheme)
        assert isinstance(value, torch.Tensor) and float(value) == float(alpha)


def test_acceptance_rate_equals_the_numpy_path():
    ps = torch.tensor(np.stack([p for _, p, _ in CASES]))
    qs = torch.tensor(np.stack([q for _, _, q in CASES]))
    for dtype in DTYPES:
        rates = md.acceptance_rate(ps.to(dtype), qs.to(dtype))
        reference = md.acceptance_rate(float64_law(ps.to(dtype)), float64_law(qs.to(dtype)))
        assert rates.dtype == torch.float64 and rates.shape == (len(CASES),)
        np.testing.assert_allclose(rates.cpu().numpy(), reference, rtol=0, atol=1e-15)
        assert float(md.acceptance_rate(ps[0].to(dtype), qs[0].to(dtype))) == pytest.approx(reference[0], abs=1e-15)


@pytest.mark.parametrize("name, options, n", VERIFIERS, ids=VERIFIER_IDS)
def test_draft_and_its_probability(name, options, n):
    """Drafts are drawn from the draft support, the same seed gives the same tuple, and
    draft_probability equals the NumPy path's on the full q (0 for a token outside the support)."""
    v = md.verifier(name, **options)
    for case, _, q in CASES:
        qs = draft_law(v.scheme_kind, q, n)
        qt = torch.tensor(qs)
        drafts = v.draft(qt, n, 5)
        assert drafts.dtype == torch.int64 and drafts.shape == (n,)
        assert torch.equal(drafts, v.draft(qt, n, 5))
        probability = v.draft_probability(qt, drafts)
        assert probability.dim() == 0 and float(probability) > 0
        assert float(probability) == pytest.approx(v.draft_probability(qs, drafts.cpu().numpy()), abs=1e-15), case
        zero = np.flatnonzero(np.atleast_2d(qs).sum(0) == 0)
        if zero.size:  # a token outside the draft support
            assert float(v.draft_probability(qt, torch.full((n,), int(zero[0])))) == 0.0


def test_a_cpu_tensor_takes_the_device_path():
    """No special case for the CPU: a CPU tensor's call reads its draft support from the device."""
    p, q = torch.tensor(CASES[0][1]), torch.tensor(CASES[0][2])
    md.verifier("sps").verify(p, q, torch.tensor([int(torch.argmax(q))]), 0)
    assert _device.last_host_bytes() > 0
    md.verifier("sps").verify(p.cpu().numpy(), q.cpu().numpy(), np.array([int(torch.argmax(q))]), 0)
    assert _device.takes(p) and not _device.takes(p.cpu().numpy(), [0.5, 0.5], None)


def test_truncated_algorithm_2_keeps_its_free_places():
    """[CD] Algorithm 2 (truncation = 3) ranks tokens by p - q^2 and frees the best 3: the three
    outside tokens merged (0.168) rank above token 1 (0.096) in the compressed problem, which
    then frees a fourth place for it (the law would differ by 0.23 otherwise)."""
    p = normalised([0.0252, 0.1342, 0.2095, 0.1175, 0.0941, 0.091, 0.1605, 0.056, 0.056, 0.056])
    q = normalised([0.163, 0.196, 0.306, 0.335, 0, 0, 0, 0, 0, 0])
    v = md.verifier("khisti", truncation=3)
    tuples, masses = md.draft_scheme(q, 2).enumerate()
    P, Q = np.repeat(p[None], len(tuples), 0), np.repeat(q[None], len(tuples), 0)
    laws = v.transport(torch.tensor(P), torch.tensor(Q), torch.as_tensor(tuples)).cpu().numpy()
    np.testing.assert_allclose(laws, v.transport(P, Q, tuples), rtol=0, atol=1e-12)
    np.testing.assert_allclose(masses @ laws, p, rtol=0, atol=1e-12)


def random_rows(rows: int, V: int, seed: int):
    """(p (rows, V), q (rows, V)): random laws with zeros, draft supports of 1 to 5 tokens, and
    outside mass from 1e-12 to nearly all of p."""
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(V) * rng.choice([0.2, 1.0, 5.0]), size=rows)
    p[rng.random((rows, V)) < 0.15] = 0.0
    p[p.sum(1) == 0, 0] = 1.0
    q = np.zeros((rows, V))
    for b in range(rows):
        support = rng.choice(V, size=int(rng.integers(1, 6)), replace=False)
        q[b, support] = rng.dirichlet(np.ones(len(support)))
        if b % 5 == 0:  # nearly all target mass on the draft support, or nearly none
            p[b, support] += 1e12 if b % 10 == 0 else 0.0
    return p / p.sum(1, keepdims=True), q


@pytest.mark.parametrize("name, options, n", VERIFIERS, ids=VERIFIER_IDS)
def test_random_rows_equal_the_numpy_path(name, options, n):
    """200 random rows in one batch (rows of every support size together): the laws given drafts
    drawn by the verifier's own scheme, and the acceptances, equal the NumPy path's. Global
    Resolution's exact plan is the exception for the laws (docs/design/device-path.md, Section 2):
    its build sees the tokens outside S merged, and a few rows' laws differ by up to about 2e-5
    (lossless both: the enumeration test above), while the acceptances still agree."""
    v = md.verifier(name, **options)
    p, q = random_rows(200, 10, seed=len(name) * 31 + n)
    if v.scheme_kind == "independent":
        q = np.stack([q, np.roll(q, 1, axis=0)], 1)[:, :n]
    drafts = np.stack([v.draft(q[b], n, b) for b in range(len(p))])
    laws = v.transport(torch.tensor(p), torch.tensor(q), torch.as_tensor(drafts)).cpu().numpy()
    per_row = 1e-9 if options.get("method") == "lp" else 1e-12
    if name != "global_resolution" or not v.options.get("exact", True):
        np.testing.assert_allclose(laws, v.transport(p, q, drafts), rtol=0, atol=per_row)
    if v.cheap_acceptance or name == "khisti":
        acceptance = v.acceptance(torch.tensor(p), torch.tensor(q), n).cpu().numpy()
        np.testing.assert_allclose(acceptance, v.acceptance(p, q, n), rtol=0, atol=1e-12)

"""Inputs as users have them: torch.softmax outputs in float32, bfloat16 and float16, NumPy arrays and
CPU torch tensors of any layout; the law used is exactly the normalised input; md.softmax for logits.
Tensor input gives tensors back (tests/device holds the device path's own tests)."""
import math
import subprocess
import sys
import warnings
from functools import lru_cache

import numpy as np
import pytest

import multidraft as md
from multidraft import _validation as check

torch = pytest.importorskip("torch")

VOCABULARIES = (32000, 128000)
DRAFT_SUPPORT = 6  # drafts of exact multi-draft plans come from a top-k draft (networks over its support)


@lru_cache(maxsize=None)
def logits(V: int) -> "torch.Tensor":
    """(3, V) float32 target logits: a Gaussian row, a heavy-tailed (Cauchy-like) row, and a peaked row
    whose tail of 1e-7 entries float32 kernels sum badly (one logit 0, the rest -16.6)."""
    generator = torch.Generator().manual_seed(V)
    noise = torch.randn(3, V, generator=generator)
    rows = [3 * noise[0], noise[1] / noise[2].abs().clamp(min=0.05)]
    tail = torch.full((V,), -16.6)
    tail[V // 3] = 0.0
    return torch.stack(rows + [tail])


def targets(V: int):
    """{format name: (V,) probability arrays as a user has them}, from the logits' softmax."""
    x = logits(V)
    p32 = torch.softmax(x, -1)
    column = torch.softmax(torch.stack([x, x + 1], -1), 1)[..., 0]  # a strided view (stride 2)
    graph = torch.softmax(x.clone().requires_grad_(True), -1)
    formats = {
        "numpy-float32": lambda i: p32[i].numpy(),
        "numpy-float32-strided": lambda i: np.repeat(p32[i].numpy(), 2)[::2],
        "torch-float32": lambda i: p32[i],
        "torch-float32-strided": lambda i: column[i],
        "torch-float32-requires-grad": lambda i: graph[i],
        "torch-bfloat16-softmax": lambda i: torch.softmax(x[i].bfloat16(), -1),
        "torch-float32-to-bfloat16": lambda i: p32[i].bfloat16(),
        "numpy-float16": lambda i: p32[i].numpy().astype(np.float16),
        "torch-float16-softmax": lambda i: torch.softmax(x[i].half(), -1),
    }
    return {name: [make(i) for i in range(x.shape[0])] for name, make in formats.items()}


@lru_cache(maxsize=None)
def cases(V: int):
    """(format, target p, draft q with full support, draft q with DRAFT_SUPPORT tokens), per row."""
    generator = torch.Generator().manual_seed(V + 1)
    shift = torch.randn(V, generator=generator)
    drafts = torch.softmax(logits(V) + shift, -1)
    top = torch.full((V,), -torch.inf)
    top[torch.topk(logits(V)[0], DRAFT_SUPPORT).indices] = 0.0
    sparse = torch.softmax(logits(V)[0] + top, -1)
    return [(name, p, drafts[i], sparse) for name, rows in targets(V).items() for i, p in enumerate(rows)]


def float64_values(x) -> np.ndarray:
    return (x.detach().double().numpy() if isinstance(x, torch.Tensor) else np.asarray(x, dtype=np.float64)).copy()


def normalised(x) -> np.ndarray:
    values = float64_values(x)
    return values / values.sum(axis=-1, keepdims=True)


def test_the_cases_include_rows_a_flat_1e6_refused():
    """float32 torch.softmax rows that miss 1 by more than 1e-6 (refused before); bfloat16 by far more."""
    for V in VOCABULARIES:
        errors = {name: max(abs(float64_values(p).sum() - 1) for p in rows) for name, rows in targets(V).items()}
        assert errors["torch-float32"] > 1e-5
        assert errors["torch-bfloat16-softmax"] > 1e-4 and errors["torch-float32-to-bfloat16"] > 1e-4
        assert errors["numpy-float16"] > 1e-5 and errors["torch-float16-softmax"] > 1e-5


@pytest.mark.parametrize("V", VOCABULARIES)
def test_softmax_outputs_are_accepted_and_normalised_exactly(V):
    """Every entry point accepts them; the law it uses is p / sum(p) in float64, not p."""
    sps = md.verifier("sps")
    for name, p, q, sparse in cases(V):
        pn, qn = normalised(p), normalised(q)
        reference = math.fsum(np.minimum(pn, qn))
        # V 2**-53 bounds the rounding of the core's float64 sum over V terms (fsum is exact); using
        # the unnormalised input instead would err by |sum(p) - 1| > 1e-9 on most of these rows
        assert abs(md.acceptance_rate(p, q) - reference) <= V * 2.0**-53, name
        # alpha* = 1 + P(H*) - Q(H*)^2 of the law p / sum(p): the core's sum of V terms and NumPy's
        # may differ by (V - 1) 2**-53 relative (Higham's bound; a strided row is summed in order),
        # which scales P by as much and Q^2 by twice that
        alpha_tolerance = 3 * V * 2.0**-53
        assert md.optimal_acceptance(p, q, 2) == pytest.approx(md.optimal_acceptance(pn, qn, 2), abs=alpha_tolerance), name
        token, accepted = sps.verify(p, q, np.array([int(np.argmax(qn))]), 7)
        assert (token, accepted) == sps.verify(pn, qn, np.array([int(np.argmax(qn))]), 7), name
        plan = md.solve_otlp(p, sparse, 2)
        assert plan.alpha == pytest.approx(md.optimal_acceptance(pn, normalised(sparse), 2), abs=alpha_tolerance), name
        # the core's float64 sum (vector lanes) and 1 / sum differ from NumPy's pairwise sum and
        # division by a few ulps, never more
        np.testing.assert_allclose(plan.p, pn, rtol=1e-14, atol=0, err_msg=name)


@pytest.mark.parametrize("V", VOCABULARIES)
def test_batched_tensors_equal_the_loop_over_rows(V):
    x = logits(V)
    for p in (torch.softmax(x, -1), torch.softmax(x.bfloat16(), -1)):
        q = torch.softmax(x.flip(0), -1)
        rows = [float(md.acceptance_rate(p[b], q[b])) for b in range(p.shape[0])]
        assert md.acceptance_rate(p, q).tolist() == rows  # tensors on the device path, summed in one order


def small_inputs():
    """(name, p, q) at V = 6: float32 and bfloat16 laws whose sums miss 1 within the tolerance."""
    generator = torch.Generator().manual_seed(3)
    x, y = torch.randn(2, 6, generator=generator) * 2
    p32 = (torch.softmax(x.double(), -1) * (1 + 4e-7)).float()  # off by ~4e-7 < 1e-6
    return [("float32", p32, torch.softmax(y, -1).numpy()),
            ("bfloat16", torch.softmax(x.bfloat16(), -1), torch.softmax(y.bfloat16(), -1)),
            ("float32-to-bfloat16", p32.bfloat16(), torch.softmax(y, -1).bfloat16())]


@pytest.mark.parametrize("name, p, q", small_inputs(), ids=[c[0] for c in small_inputs()])
@pytest.mark.parametrize("method, n", [("sps", 1), ("otlp", 2), ("otlp", 3)])
def test_enumerated_law_is_the_normalised_input(name, p, q, method, n):
    """sum_w P(w) transport(w) == p / p.sum() in float64, to 1e-12, by enumerating every draft tuple."""
    v = md.verifier(method)
    tuples, masses = md.draft_scheme(q, n).enumerate()
    laws = [v.transport(p, q, w) for w in tuples]
    assert all(isinstance(law, torch.Tensor) and law.dtype == torch.float64 for law in laws)
    law = sum(mass * law.numpy() for law, mass in zip(laws, masses))
    np.testing.assert_allclose(law, normalised(p), rtol=0, atol=1e-12)
    assert np.max(np.abs(law - float64_values(p))) > 1e-8  # the raw input is not what was sampled


REFUSED = {
    "negative": (np.array([0.6, -0.1, 0.5], dtype=np.float32), "negative"),
    "nan": (np.array([np.nan, 0.5, 0.5], dtype=np.float32), "not finite"),
    "inf": (torch.tensor([np.inf, 0.5, 0.5]), "not finite"),
    "float32-sum-1.01": (np.full(1000, 1.01 / 1000, dtype=np.float32), r"sum to 1 within 5\.97e-05 .*float32.* 1\.01"),
    "float64-sum-1+1e-4": (np.full(100, (1 + 1e-4) / 100), r"sum to 1 within 1e-06 .*float64.* 1\.000099"),
    "bfloat16-sum-1.05": (torch.full((100,), 1.05 / 100).bfloat16(), r"sum to 1 within .*bfloat16"),
    "meta-tensor": (torch.full((3,), 1 / 3, device="meta"), "device 'meta', which holds no values"),
    "complex": (np.full(3, 1 / 3, dtype=np.complex128), "dtype complex128"),
    "torch-complex": (torch.full((3,), 1 / 3, dtype=torch.complex64), "dtype torch.complex64"),
    "object": (np.array([0.5, 0.5], dtype=object), "dtype object"),
    "bool": (np.array([True, False]), "dtype bool"),
    "torch-bool": (torch.tensor([True, False]), "dtype torch.bool"),
}


@pytest.mark.parametrize("bad", REFUSED)
@pytest.mark.parametrize("call", [
    lambda p, q: md.acceptance_rate(p, q),
    lambda p, q: md.optimal_acceptance(p, q, 2),
    lambda p, q: md.verifier("sps").verify(p, q, np.array([0]), 0),
    lambda p, q: md.solve_otlp(p, q, 2),
], ids=["acceptance_rate", "optimal_acceptance", "sps.verify", "solve_otlp"])
def test_refused(bad, call):
    x, message = REFUSED[bad]
    uniform = np.full(x.shape[-1], 1 / x.shape[-1])
    with pytest.raises(ValueError, match=rf"'p'.*{message}"):
        call(x, uniform)
    with pytest.raises(ValueError, match=rf"'q'.*{message}"):
        call(uniform, x)


def test_sum_error_names_the_row():
    p = np.full((3, 10), 0.1, dtype=np.float32)
    p[2, 0] = 0.2
    with pytest.raises(ValueError, match=r"'p' must sum to 1 within .* but sums to 1\.1.* in row 2"):
        md.acceptance_rate(p, np.full((3, 10), 0.1))


def test_sum_tolerance_rule():
    u32 = 2.0**-24
    for V in (2, 1000, 32000, 152064):
        assert check.sum_tolerance(np.float64, V) == 1e-6  # float64 is held to the old limit
        assert check.sum_tolerance(np.int64, V) == 1e-6
        assert check.sum_tolerance(np.float32, V) == max(1e-6, 2 * u32 + (V - 1) * u32)
        for numpy_dtype, torch_dtype in ((np.float16, torch.float16), (np.float32, torch.float32),
                                         (np.float64, torch.float64)):
            assert check.sum_tolerance(numpy_dtype, V) == check.sum_tolerance(torch_dtype, V)
        assert check.sum_tolerance(torch.bfloat16, V) >= 2.0**-7 + (V - 1) * u32
    assert check.sum_tolerance(np.float16, 152064) == pytest.approx(2.0**-10 * (1 + 152064 * 2.0**-14) + 152063 * u32)
    assert check.sum_tolerance(np.float32, 152064) == pytest.approx(9.06e-3, rel=1e-3)


def test_the_callers_input_is_neither_modified_nor_returned():
    p64 = np.array([0.2, 0.3, 0.5 + 4e-7])
    before = p64.copy()
    out = check.probabilities(p64, "p")
    assert out is not p64 and not np.shares_memory(out, p64)
    assert np.array_equal(p64, before) and p64.flags.writeable
    assert out.flags.c_contiguous and out.dtype == np.float64 and np.array_equal(out, before / before.sum())
    tensor = torch.tensor([0.2, 0.3, 0.5], requires_grad=True)
    check.probabilities(tensor, "p")
    assert tensor.requires_grad and tensor.tolist() == pytest.approx([0.2, 0.3, 0.5])


def test_cpu_tensors_are_read_without_a_copy():
    tensor = torch.softmax(torch.randn(2, 50), -1)
    for view in (tensor, tensor[:, ::2], tensor.T, tensor.half()):
        array, stored = check.as_array(view, "p")
        assert stored == view.dtype and np.shares_memory(array, view.numpy())
    array, stored = check.as_array(tensor.bfloat16(), "p")
    assert stored == torch.bfloat16 and array.dtype == np.float32  # upcast: NumPy has no bfloat16


def test_the_package_works_without_torch():
    script = ("import sys; sys.modules['torch'] = None\n"  # `import torch` now raises ImportError
              "import numpy as np, multidraft as md\n"
              "p = np.array([0.25, 0.75], dtype=np.float32)\n"
              "print(md.acceptance_rate(p, np.array([0.5, 0.5])), md.softmax(np.zeros(2)).tolist())")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0.75", "[0.5,", "0.5]"]


# ----------------------------------------------------------------------------- md.softmax

def reference_softmax(x, temperature=1.0):
    x = float64_values(x) / temperature
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("make", [
    lambda x: x.numpy(),
    lambda x: x.double().numpy(),
    lambda x: x.numpy().astype(np.float16),
    lambda x: x,
    lambda x: x.bfloat16(),
    lambda x: x.requires_grad_(True),
    lambda x: torch.stack([x, x], -1)[..., 1],
], ids=["numpy-float32", "numpy-float64", "numpy-float16", "torch-float32", "torch-bfloat16", "requires-grad",
        "strided"])
@pytest.mark.parametrize("shape", [(500,), (3, 500)], ids=["1d", "2d"])
@pytest.mark.parametrize("temperature", [1.0, 0.7, 3])
def test_softmax_equals_a_float64_reference(make, shape, temperature):
    x = make(torch.randn(shape, generator=torch.Generator().manual_seed(1)) * 5)
    probs = md.softmax(x, temperature)
    if isinstance(x, torch.Tensor):  # a float64 tensor on the logits' device
        assert isinstance(probs, torch.Tensor) and probs.dtype == torch.float64 and probs.device == x.device
        probs = probs.numpy()
    assert probs.dtype == np.float64 and probs.shape == shape
    np.testing.assert_allclose(probs, reference_softmax(x, temperature), rtol=1e-12, atol=0)
    assert np.all(np.abs(probs.sum(axis=-1) - 1) <= 1e-15 * shape[-1])
    np.testing.assert_allclose(check.probabilities(probs, "p"), probs / probs.sum(axis=-1, keepdims=True),
                               rtol=1e-14, atol=0)  # the core's sum and 1 / sum: a few ulps


def test_softmax_of_minus_inf_is_zero():
    x = np.array([[1.0, -np.inf, 2.0, -np.inf], [-np.inf, -np.inf, 0.0, -np.inf]])
    before = x.copy()
    probs = md.softmax(x)
    assert probs[0, 1] == probs[0, 3] == 0.0 and probs[1].tolist() == [0.0, 0.0, 1.0, 0.0]
    np.testing.assert_allclose(probs[0, [0, 2]], reference_softmax(np.array([1.0, 2.0])), rtol=1e-15)
    assert np.array_equal(x, before, equal_nan=True)  # the caller's logits are untouched


def test_softmax_handles_extreme_logits_without_warnings():
    with warnings.catch_warnings():  # NumPy warns on overflow by default
        warnings.simplefilter("error")
        assert md.softmax(np.array([1e308, -1e308, 1e308])).tolist() == [0.5, 0.0, 0.5]
        assert md.softmax(np.array([0.0, -1.0]), temperature=1e-300).tolist() == [1.0, 0.0]


def test_softmax_temperature_sharpens_and_flattens():
    x = np.array([0.0, 1.0, 2.0])
    cold, warm = md.softmax(x, 0.25), md.softmax(x, 4.0)
    assert cold[2] > md.softmax(x)[2] > warm[2]
    np.testing.assert_allclose(warm, reference_softmax(x / 4.0), rtol=1e-15)


@pytest.mark.parametrize("logits, temperature, match", [
    (np.array([0.0, np.nan]), 1.0, r"'logits' has nan at index \(1,\)"),
    (torch.tensor([0.0, np.inf]), 1.0, r"'logits' has inf at index \(1,\)"),
    (np.array([[0.0, 1.0], [-np.inf, -np.inf]]), 1.0, "'logits' row 1 is all -inf"),
    (np.zeros((2, 2, 2)), 1.0, "'logits' must be"),
    (np.zeros(0), 1.0, "'logits' must be"),
    (np.array(1.0), 1.0, "'logits' must be"),
    (np.array([1j, 0]), 1.0, "'logits' must be an array of floats"),
    (np.array([True, False]), 1.0, "'logits' must be an array of floats"),
    (torch.zeros(3, device="meta"), 1.0, "'logits' is a torch tensor on device 'meta'"),
    *[(np.zeros(3), t, "'temperature'") for t in (0.0, -1.0, np.inf, np.nan, True, "1", None)],
], ids=["nan", "inf", "all-minus-inf", "3d", "empty", "scalar", "complex", "bool", "meta", "t=0", "t<0",
        "t=inf", "t=nan", "t=True", "t=str", "t=None"])
def test_softmax_errors(logits, temperature, match):
    with pytest.raises(ValueError, match=match):
        md.softmax(logits, temperature)

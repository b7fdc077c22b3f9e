"""CPU torch tensors (float32, bfloat16; contiguous, strided, expanded, requiring grad) give what the
float64 NumPy law of their values gives, at every entry point; results are read through
``to_numpy`` (entry points return tensors on the input's device for tensor input, NumPy for NumPy input:
checked to be the input's device); inputs are never
modified. p = TARGET, q = DRAFT.
"""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import multidraft as md
from conftest import verifier_configs

from .strategies import TORCH_DTYPES, examples, law, pair, stored_values, to_numpy

torch = pytest.importorskip("torch")

CONFIGS = verifier_configs()


@st.composite
def tensor(draw, values: np.ndarray):
    """``values`` as a CPU tensor of float32 or bfloat16 in some layout; rows whose mass the dtype
    rounds away entirely get it back on their largest entry."""
    dtype = draw(st.sampled_from(TORCH_DTYPES))
    t = torch.from_numpy(values).to(dtype)
    rows = t.reshape(-1, t.shape[-1])
    for r, source in zip(rows, values.reshape(-1, values.shape[-1])):
        if not bool(r.any()):
            r[int(np.argmax(source))] = 1
    layout = draw(st.sampled_from(("contiguous", "strided", "requires_grad", "expanded")))
    if layout == "strided":
        return torch.stack([t, t], -1)[..., 0]
    if layout == "requires_grad":
        return t.clone().requires_grad_(True)
    if layout == "expanded" and t.ndim == 2:
        return t[:1].expand(t.shape[0], -1)  # stride 0 over the batch
    return t


def on_input_device(result, x):
    """Every tensor in ``result`` is on ``x``'s device (the coming API); NumPy results pass."""
    for item in result if isinstance(result, tuple) else (result,):
        if isinstance(item, torch.Tensor):
            assert item.device == x.device


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.id)
@examples(0.25)
@given(data=st.data(), seed=st.integers(0, 2**63 - 4))
def test_verifier_on_tensors_equals_numpy_on_their_law(config, data, seed):
    v = config.make()
    V, n, B = data.draw(st.integers(1, 6), label="V"), data.draw(st.sampled_from(config.ns), label="n"), \
        data.draw(st.integers(1, 3), label="B")
    independent = v.scheme_kind == "independent"
    rows = [data.draw(pair(V, q_rows=n if independent else 0)) for _ in range(B)]
    p = data.draw(tensor(np.stack([r[0] for r in rows])), label="p")
    q = data.draw(tensor(np.stack([r[1] for r in rows])), label="q")
    before = stored_values(p).copy(), stored_values(q).copy()
    p64, q64 = law(p), law(q)
    drafts = np.stack([to_numpy(v.draft(q64[b], n, seed + b)) for b in range(B)])
    seeds = [seed + b for b in range(B)]
    for got, expected in ((v.transport(p, q, drafts), v.transport(p64, q64, drafts)),
                          (v.acceptance(p, q, n), v.acceptance(p64, q64, n))):
        on_input_device(got, p)
        np.testing.assert_allclose(to_numpy(got), to_numpy(expected), rtol=0, atol=1e-15)
    tokens = v.verify(p, q, drafts, seeds)
    on_input_device(tokens, p)
    np.testing.assert_array_equal(to_numpy(tokens[0]), to_numpy(v.verify(p64, q64, drafts, seeds)[0]))
    one = v.verify(p[0], q[0], drafts[0], seed)
    assert tuple(x.item() for x in to_numpy(one)) == tuple(x.item() for x in to_numpy(v.verify(p64[0], q64[0], drafts[0], seed)))
    np.testing.assert_array_equal(stored_values(p), before[0])
    np.testing.assert_array_equal(stored_values(q), before[1])


@examples(1.0)
@given(data=st.data())
def test_optimum_plans_and_softmax_on_tensors(data):
    V, n = data.draw(st.integers(1, 6), label="V"), data.draw(st.integers(1, 3), label="n")
    p_values, q_values = data.draw(pair(V), label="p, q")
    p, q = data.draw(tensor(p_values), label="p"), data.draw(tensor(q_values), label="q")
    p64, q64 = law(p), law(q)
    alpha, H = md.optimal_subset(p, q, n)
    on_input_device((alpha, H), p)
    assert abs(float(to_numpy(alpha)) - float(md.optimal_subset(p64, q64, n)[0])) <= 1e-15
    assert abs(float(to_numpy(md.acceptance_rate(p, q))) - float(md.acceptance_rate(p64, q64))) <= 1e-15
    for method in ("maxflow_cs", "global_resolution"):
        plan, reference = md.solve_otlp(p, q, n, method=method), md.solve_otlp(p64, q64, n, method=method)
        drafts = md.draft_scheme(q64, n).sample(0)
        np.testing.assert_allclose(to_numpy(plan.transport(drafts)), reference.transport(drafts), rtol=0, atol=1e-15)
        assert abs(plan.alpha - reference.alpha) <= 1e-15
    logits = torch.log(p.detach().float().clamp_min(1e-30))
    np.testing.assert_allclose(to_numpy(md.softmax(logits)), md.softmax(logits.numpy()), rtol=0, atol=0)

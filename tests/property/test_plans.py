"""``md.solve_otlp`` with each method and draft scheme, and ``md.GlobalResolution`` with drawn
options: every plan is exactly lossless by enumeration (Global Resolution's raw plan within its
bound), its ``alpha`` is the enumerated P(output in drafts), exact plans reach alpha* (brute force),
``transport`` of a batch of tuples equals the tuples one by one, and ``sample`` gives a token of
positive mass, the same for the same seed. p = TARGET, q = DRAFT.
"""
import numpy as np
import pytest
from hypothesis import example, given, strategies as st

import multidraft as md

from . import reference
from .strategies import TOL, Instance, examples, instance, to_numpy

# (method, extra keywords, schemes it takes, largest n)
EXACT = [
    ("maxflow_cs", {}, ("iid", "without_replacement", "independent", "hub", "topk"), 3),
    ("maxflow", {}, ("iid", "without_replacement", "independent", "hub", "topk"), 3),
    ("maxflow", {"network": "tuples"}, ("iid", "without_replacement", "independent", "hub", "topk"), 3),
    ("lp", {}, ("iid", "without_replacement", "independent", "hub", "topk"), 2),
]


def solve(case: Instance, method: str, **options):
    if case.scheme == "independent":
        return md.solve_otlp(case.p, case.q, method=method, scheme="independent", **options)
    return md.solve_otlp(case.p, case.q, case.n, method=method, scheme=case.scheme, **options)


@st.composite
def scheme_instance(draw, schemes, largest_n):
    scheme = draw(st.sampled_from(schemes))
    ns = (2,) if scheme == "hub" else tuple(range(1, largest_n + 1))
    return draw(instance(scheme, ns))


def check_plan(plan, case: Instance, seed: int):
    """Lossless by enumeration; returns the enumerated acceptance. Also: one tuple at a time equals
    the batched call, and a sampled token has positive mass under its tuple's law."""
    tuples, probs = reference.drawable_tuples(case.scheme, case.q, case.n, plan.scheme.probability)
    T = to_numpy(plan.transport(tuples)).astype(np.float64)
    exact = getattr(plan, "exact", True) or getattr(plan, "used_fallback", False)
    accepted = reference.check_lossless(case.p64, tuples, probs, T, TOL if exact else plan.law_error_bound + TOL, exact)
    k = seed % len(tuples)
    np.testing.assert_allclose(to_numpy(plan.transport(tuples[k])), T[k], rtol=0, atol=1e-15)
    token = int(to_numpy(plan.sample(tuples[k], seed)))
    assert T[k, token] > 0, f"sampled token {token} has no mass under {T[k]}"
    assert int(to_numpy(plan.sample(tuples[k], np.random.default_rng(seed)))) == \
        int(to_numpy(plan.sample(tuples[k], np.random.default_rng(seed))))
    return accepted


@pytest.mark.parametrize("method, extra, schemes, largest_n", EXACT, ids=lambda x: x if isinstance(x, str) else None)
@examples(1.0)
@given(data=st.data(), seed=st.integers(0, 2**63 - 1))
def test_exact_plans(method, extra, schemes, largest_n, data, seed):
    case = data.draw(scheme_instance(schemes, largest_n), label="case")
    plan = solve(case, method, **extra)
    assert isinstance(plan, md.OTLPPlan) and plan.success
    assert plan.l1_bound == plan.law_error_bound == plan.acceptance_bound == 0.0
    best = reference.alpha_star(case.p64, case.scheme, case.q, case.n)
    accepted = check_plan(plan, case, seed)
    assert abs(plan.alpha - accepted) <= TOL and abs(plan.alpha - best) <= TOL
    assert abs(plan.alpha_star - best) <= TOL
    optimum = md.optimal_acceptance(case.p, case.q, scheme="independent") if case.scheme == "independent" else \
        md.optimal_acceptance(case.p, case.q, case.n, scheme=case.scheme)
    assert abs(float(to_numpy(optimum)) - best) <= TOL


GR_OPTIONS = st.fixed_dictionaries({}, optional={
    "tau": st.sampled_from((0.5, 0.1, 1e-2, 1e-3, 1e-6, 1e-9)),
    "exact": st.booleans(),
    "fallback": st.booleans(),
    "max_iterations": st.integers(1, 60),
    "paper_threshold": st.booleans(),
})


@examples(2.0)
@given(case=instance("iid", (1, 2, 3, 4)), options=GR_OPTIONS, seed=st.integers(0, 2**63 - 1),
       through_solve_otlp=st.booleans())
@example(case=Instance(np.array([0.5, 0.5]), np.array([1.0, 5e-324]), 2, "iid"), options={}, seed=0,
         through_solve_otlp=False)
def test_global_resolution(case, options, seed, through_solve_otlp):
    """[GR] Algorithm 1 with any options: exact by default (lossless to TOL), the raw plan within
    its law_error_bound; alpha is the enumerated acceptance (within alpha_error_bound); kept <=
    alpha; 0 <= alpha* - alpha <= acceptance_bound (exact plan), <= 10 tau on success; a fallback
    plan is the exact one."""
    if through_solve_otlp:
        plan = md.solve_otlp(case.p, case.q, case.n, method="global_resolution", **options)
    else:
        plan = md.GlobalResolution(case.p, case.q, case.n, **options)
    assert isinstance(plan, md.GlobalResolution)
    best = reference.alpha_star(case.p64, "iid", case.q, case.n)
    assert abs(plan.alpha_star - best) <= TOL
    accepted = check_plan(plan, case, seed)
    assert abs(plan.alpha - accepted) <= TOL + plan.alpha_error_bound
    if plan.used_fallback:
        assert options.get("fallback") and abs(plan.alpha - best) <= TOL
        return
    assert plan.kept <= plan.alpha + TOL
    tau = options.get("tau", 1e-3)
    if plan.exact:
        assert -TOL <= best - plan.alpha <= plan.acceptance_bound + TOL + plan.alpha_error_bound
    else:
        assert abs(best - plan.alpha) <= plan.acceptance_bound + TOL
    if plan.success:
        assert plan.l1_bound <= 15 * tau + TOL and plan.acceptance_bound <= 10 * tau + TOL

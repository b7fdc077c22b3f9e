"""The public API reads as one library: one entry per job, one name per concept, and the renamed
spellings still working with a DeprecationWarning (p = TARGET, q = DRAFT)."""
import warnings

import numpy as np
import pytest

import multidraft as md

P = np.array([0.1, 0.2, 0.3, 0.4])
Q = np.array([0.4, 0.3, 0.2, 0.1])
PLAN_ATTRIBUTES = ("alpha", "alpha_star", "method", "scheme", "success", "law_error_bound", "l1_bound",
                   "acceptance_bound")


@pytest.mark.parametrize("method", ["maxflow_cs", "maxflow", "lp", "global_resolution"])
def test_every_method_returns_one_plan_interface(method):
    plan = md.solve_otlp(P, Q, 2, method=method)
    assert isinstance(plan, md.OTLPPlan) and plan.method == method
    for name in PLAN_ATTRIBUTES:
        assert hasattr(plan, name), name
    assert plan.success and plan.alpha == pytest.approx(md.optimal_acceptance(P, Q, 2), abs=1e-3)
    assert plan.alpha_star == pytest.approx(md.optimal_acceptance(P, Q, 2), abs=1e-12)
    assert plan.transport([0, 1]).sum() == pytest.approx(1.0)
    assert 0 <= plan.sample([0, 1], 3) < 4


def test_exact_plans_report_exact_bounds():
    plan = md.solve_otlp(P, Q, 2)
    assert (plan.alpha, plan.success, plan.law_error_bound, plan.l1_bound, plan.acceptance_bound) == (
        plan.alpha_star, True, 0.0, 0.0, 0.0)


def test_the_default_is_the_fastest_exact_method():
    assert md.solve_otlp(P, Q, 2).method == "maxflow_cs"
    assert md.verifier("otlp").method == "maxflow_cs"


def test_global_resolution_through_solve_otlp_is_the_class():
    plan = md.solve_otlp(P, Q, 3, method="global_resolution", tau=1e-4, exact=False, fallback=True)
    direct = md.GlobalResolution(P, Q, 3, tau=1e-4, exact=False, fallback=True)
    assert isinstance(plan, md.GlobalResolution) and plan.tau == 1e-4 and not plan.exact
    assert (plan.alpha, plan.l1_bound, plan.used_fallback) == (direct.alpha, direct.l1_bound, direct.used_fallback)
    np.testing.assert_array_equal(plan.transport([0, 1, 2]), direct.transport([0, 1, 2]))


@pytest.mark.parametrize("call, match", [
    (lambda: md.solve_otlp(P, Q, 2, method="maxflow", tau=1e-3), "method='global_resolution' only"),
    (lambda: md.solve_otlp(P, Q, 2, method="global_resolution", bogus=1), "unexpected option"),
    (lambda: md.solve_otlp(P, Q, 2, method="global_resolution", network="tuples"), "'network'"),
    (lambda: md.solve_otlp(P, Q, 2, method="simplex"), "'method'"),
    (lambda: md.solve_otlp(P, Q, 2, method="global_resolution", scheme="without_replacement"), "i.i.d."),
    (lambda: md.verifier("otlp", method="global_resolution"), "'method'"),
])
def test_options_a_method_does_not_take_are_refused(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("build", [md.draft_scheme, md.DraftScheme])
def test_kind_is_a_deprecated_spelling_of_scheme(build):
    with pytest.warns(DeprecationWarning, match="'kind' is deprecated"):
        old = build(Q, 2, kind="hub")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = build(Q, 2, scheme="hub")
    assert old.kind == new.kind == "hub"
    np.testing.assert_array_equal(old.enumerate()[1], new.enumerate()[1])
    with pytest.raises(ValueError, match="'scheme'"), pytest.warns(DeprecationWarning):
        build(Q, 2, scheme="hub", kind="iid")


def test_scheme_is_the_keyword_everywhere():
    """Every entry point that takes a draft scheme names it ``scheme=``, and its object says ``kind``."""
    assert md.draft_scheme(Q, 2, scheme="without_replacement").kind == "without_replacement"
    assert md.solve_otlp(P, Q, 2, scheme="hub").scheme.kind == "hub"
    assert md.verifier("otlp", scheme="hub").scheme_kind == "hub"
    assert md.verifier("khisti", scheme="independent").scheme_kind == "independent"
    assert md.optimal_acceptance(P, Q, 2, scheme="hub") == pytest.approx(md.verifier("spechub").acceptance(P, Q, 2))

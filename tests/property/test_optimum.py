"""The optimum entry points: ``md.acceptance_rate``, ``md.optimal_acceptance``, ``md.optimal_subset``
(every draft scheme) and ``md.khisti``'s theorems, against brute force over all 2**V subsets on
drawn instances; batched calls equal the loop over rows. p = TARGET, q = DRAFT.
"""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import multidraft as md
import oracle

from . import reference
from .strategies import TOL, examples, instance, pair, stored, to_numpy

SCHEMES = {"iid": (1, 2, 3, 4), "without_replacement": (1, 2, 3), "independent": (1, 2, 3), "hub": (2,),
           "topk": (1, 2, 3)}


def subset(case):
    if case.scheme == "independent":
        return md.optimal_subset(case.p, case.q)
    return md.optimal_subset(case.p, case.q, case.n, scheme=case.scheme)


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
@examples(1.0)
@given(data=st.data())
def test_optimal_subset_is_the_brute_force_minimiser(scheme, data):
    """alpha* = 1 + min_H psi(H) ([GR] Eq. 4) and H* is the smallest minimiser (where no other subset
    is within round-off of the minimum)."""
    case = data.draw(instance(scheme, SCHEMES[scheme]), label="case")
    alpha, H = (to_numpy(x) for x in subset(case))
    tuples, probs = reference.draft_law(scheme, case.q, case.n)
    best, _, smallest, ambiguous = oracle.brute_force_subset(case.p64, tuples, probs)
    assert abs(float(alpha) - best) <= TOL
    assert H.dtype == bool and H.shape == (case.V,)
    assert abs(1.0 + oracle.psi(case.p64, tuples, probs, H) - best) <= TOL, "H* is not a minimiser of psi"
    if not ambiguous:
        np.testing.assert_array_equal(H, smallest)
    optimum = md.optimal_acceptance(case.p, case.q) if scheme == "independent" else \
        md.optimal_acceptance(case.p, case.q, case.n, scheme=scheme)
    assert float(to_numpy(optimum)) == float(alpha)


@examples(1.0)
@given(case=instance("iid", (1, 2, 3)))
def test_single_draft_and_khisti_theorems(case):
    """acceptance_rate = sum min(p, q) = alpha*(1) <= alpha*(2) <= alpha*(3) (more i.i.d. drafts never
    hurt); [CD] Theorem 3 = alpha*(2); Theorem 2: accepts_always iff H* is empty, and then alpha* = 1."""
    rate = float(to_numpy(md.acceptance_rate(case.p, case.q)))
    assert abs(rate - np.minimum(case.p64, case.q64).sum()) <= TOL
    alphas = [float(to_numpy(md.optimal_acceptance(case.p, case.q, n))) for n in (1, 2, 3)]
    assert abs(alphas[0] - rate) <= TOL and alphas[0] <= alphas[1] + TOL <= alphas[2] + 2 * TOL
    assert abs(float(to_numpy(md.khisti.optimal_acceptance_two_drafts(case.p, case.q))) - alphas[1]) <= TOL
    always = bool(to_numpy(md.khisti.accepts_always(case.p, case.q, case.n)))
    _, H = md.optimal_subset(case.p, case.q, case.n)
    assert always == (not to_numpy(H).any())
    if always:
        assert alphas[case.n - 1] >= 1.0 - TOL


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
@examples(0.5)
@given(data=st.data())
def test_batch_equals_loop_of_rows(scheme, data):
    n = data.draw(st.sampled_from(SCHEMES[scheme]), label="n")
    V, B = data.draw(st.integers(1, 6), label="V"), data.draw(st.integers(1, 4), label="B")
    rows = [data.draw(pair(V, q_rows=n if scheme == "independent" else 0)) for _ in range(B)]
    p = data.draw(stored(np.stack([r[0] for r in rows])), label="p")
    q = data.draw(stored(np.stack([r[1] for r in rows])), label="q")
    args = {} if scheme == "independent" else {"n": n, "scheme": scheme}
    alpha, H = (to_numpy(x) for x in md.optimal_subset(p, q, **args))
    for b in range(B):
        alpha_b, H_b = (to_numpy(x) for x in md.optimal_subset(p[b], q[b], **args))
        assert alpha[b] == float(alpha_b)
        np.testing.assert_array_equal(H[b], H_b)
    if scheme == "iid" and n == 1:
        np.testing.assert_array_equal(to_numpy(md.acceptance_rate(p, q)),
                                      [float(to_numpy(md.acceptance_rate(p[b], q[b]))) for b in range(B)])

"""``md.draft_scheme`` / ``md.DraftScheme`` for every scheme on drawn instances: the tuple law equals
the oracle's (enumerate, probability), sampled tuples are drawable and follow the seed,
check_drawable refuses exactly the tuples of probability 0, support lists the drafted tokens.
"""
import warnings

import numpy as np
import pytest
from hypothesis import given, strategies as st

import multidraft as md

from . import reference
from .strategies import examples, instance, to_numpy

SCHEMES = {"iid": (1, 2, 3), "without_replacement": (1, 2, 3), "independent": (1, 2, 3), "hub": (2,), "topk": (1, 2, 3)}


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
@examples(1.0)
@given(data=st.data(), seed=st.integers(0, 2**64 - 1))
def test_scheme_law_samples_and_drawability(scheme, data, seed):
    case = data.draw(instance(scheme, SCHEMES[scheme]), label="case")
    s = md.draft_scheme(case.q, None if scheme == "independent" else case.n, scheme=scheme)
    assert (s.kind, s.n, s.V) == (scheme, case.n, case.V)
    positive, probs = reference.drawable_tuples(scheme, case.q, case.n, s.probability)
    tuples, masses = s.enumerate()
    got = {tuple(w): m for w, m in zip(to_numpy(tuples).tolist(), to_numpy(masses).tolist())}
    assert got == {tuple(w): m for w, m in zip(positive.tolist(), probs.tolist())}
    np.testing.assert_array_equal(to_numpy(s.support()), np.unique(positive))
    for w in reference.oracle.all_tuples(case.V, case.n):
        if reference.drawable(scheme, case.q, w):
            s.check_drawable(w.reshape(1, -1))
        else:
            with pytest.raises(ValueError, match="'drafts' has probability zero"):
                s.check_drawable(w.reshape(1, -1))
    drafts = to_numpy(s.sample(seed))
    assert drafts.shape == (case.n,) and reference.drawable(scheme, case.q, drafts)
    np.testing.assert_array_equal(to_numpy(s.sample(seed)), drafts)
    rng = np.random.default_rng(seed)
    state = rng.bit_generator.state
    s.sample(rng)
    assert (rng.bit_generator.state == state) == (scheme == "topk"), "only topk leaves the generator alone"


@examples(0.25)
@given(case=instance("iid", (1, 2)))
def test_kind_is_a_deprecated_spelling_of_scheme(case):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = md.draft_scheme(case.q, case.n, kind="without_replacement")
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)
    new = md.draft_scheme(case.q, case.n, scheme="without_replacement")
    np.testing.assert_array_equal(to_numpy(old.enumerate()[1]), to_numpy(new.enumerate()[1]))
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="'scheme'"):
        md.draft_scheme(case.q, case.n, scheme="iid", kind="iid")

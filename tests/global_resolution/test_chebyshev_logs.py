"""The vectorised logarithm of the Chebyshev grids and the warm start (chebyshev_pieces.hpp's
log_positive through logs_with_range) against NumPy's log, over the whole normal range, at the
boundaries of its reduction (powers of two, sqrt(2) times them), with and without the shift c,
for lengths that leave every remainder of the vector loop; and the range it reports, exactly."""
import numpy as np
import pytest

from multidraft import _core

# "Within a few ulps of std::log" (chebyshev_pieces.hpp): 4 ulps of the larger of |log y| and 1
# (near y = 1 the result is small and its absolute error is that of the series).
ULPS = 4


def cases():
    rng = np.random.default_rng(11)
    yield "random-exponents", np.exp2(rng.uniform(-1000, 1000, size=1000))
    powers = np.exp2(np.arange(-1020, 1020, 7, dtype=np.float64))
    yield "powers-of-two", powers
    yield "around-sqrt2", np.concatenate([powers * np.sqrt(2.0) * f for f in (1 - 2e-16, 1.0, 1 + 2e-16)])
    yield "near-one", 1.0 + rng.uniform(-1e-3, 1e-3, size=257)
    yield "probabilities", rng.dirichlet(np.full(32000, 0.3))
    yield "extremes", np.array([np.finfo(float).tiny, 1e-300, 1.0, 2.0, 1e300, np.finfo(float).max])
    for length in (1, 2, 3, 4, 5, 7, 8, 9):
        yield f"length-{length}", rng.uniform(0.1, 10.0, size=length)


@pytest.mark.parametrize("c", [0.0, 1.0])
@pytest.mark.parametrize("name,x", list(cases()), ids=[name for name, _ in cases()])
def test_logs_with_range_match_numpy(name, x, c):
    logs, low, high = _core._testing.logs_with_range(x, c)
    reference = np.log(c + x)
    tolerance = ULPS * np.finfo(float).eps * np.maximum(np.abs(reference), 1.0)
    assert np.all(np.abs(logs - reference) <= tolerance), np.max(np.abs(logs - reference) / tolerance)
    assert (low, high) == (logs.min(), logs.max())

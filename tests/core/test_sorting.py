"""The core's sort of plan keys (radix_sort.hpp: a radix sort of the leading key bits, an
insertion pass, a comparison sort when ties in the leading bits are many) against NumPy's stable
argsort, on the keys the plans sort (doubles' bit patterns, decreasing keys, token ids) and on
adversarial ones (all equal, ties, keys equal in their leading 32 varying bits), below and above
the size from which digits are 11 bits wide; and the scan of a draft row's support
(draft_support) against np.flatnonzero."""
import numpy as np
import pytest

from multidraft import _core


def double_keys(x):
    return np.ascontiguousarray(x, dtype=np.float64).view(np.uint64)


def cases():
    rng = np.random.default_rng(5)
    for count in (0, 1, 7, 128, 129, 1000, 5000, 8191, 8192, 32000):  # byte digits, then 11-bit ones
        yield f"doubles-{count}", double_keys(rng.exponential(size=count) ** 3)
        yield f"decreasing-{count}", ~double_keys(rng.dirichlet(np.full(max(count, 1), 0.3))[:count])
        yield f"ids-{count}", rng.integers(0, 32000, size=count).astype(np.uint64)
    yield "all-equal", np.full(3000, 12345, dtype=np.uint64)
    yield "few-values", double_keys(rng.choice([0.1, 0.2, 0.5, np.inf], size=2000))
    base = double_keys(np.array([0.3]))[0]  # keys that differ only below their leading 32 varying bits
    yield "tied-leading-bits", base + rng.integers(0, 2**20, size=3000).astype(np.uint64)
    yield "half-tied", np.concatenate([base + rng.integers(0, 2**20, size=500).astype(np.uint64),
                                       double_keys(rng.exponential(size=500))])
    yield "tied-leading-bits-32000", base + rng.integers(0, 2**20, size=32000).astype(np.uint64)
    for count in (1000, 5000, 32000):  # leads one digit short of 32 bits, then 32 bits
        yield f"varying-50-bits-{count}", base + rng.integers(0, 2**50, size=count).astype(np.uint64)
        yield f"ratios-few-binades-{count}", ~double_keys(0.25 + 5.0 * rng.random(count))
        yield f"narrow-cluster-and-outlier-{count}", ~double_keys(np.append(1.0 + rng.random(count - 1) * 1e-3, 8.0))
        yield f"cluster-and-zero-{count}", double_keys(np.append(rng.random(count - 1), 0.0))
    yield "one-infinite-ratio-32000", ~double_keys(np.append(1.0 + rng.random(31999) * 1e-3, np.inf))
    yield "few-values-32000", double_keys(rng.choice([0.1, 0.2, 0.5, np.inf], size=32000))
    yield "sorted", np.sort(double_keys(rng.exponential(size=2000)))
    yield "reversed", np.sort(double_keys(rng.exponential(size=2000)))[::-1].copy()


@pytest.mark.parametrize("name,keys", list(cases()), ids=[name for name, _ in cases()])
def test_positions_by_key_is_a_stable_argsort(name, keys):
    np.testing.assert_array_equal(_core._testing.positions_by_key(keys), np.argsort(keys, kind="stable"))


def support_cases():
    """Rows for the support scan (64-token blocks): sparse, dense, all-positive blocks next to
    empty ones, lengths off the block size, tiny and negative-zero entries."""
    rng = np.random.default_rng(6)
    for V in (1, 5, 63, 64, 65, 127, 128, 1000, 32000, 32007):
        for density in (0.0, 0.01, 0.3, 1.0):
            q = np.where(rng.random(V) < density, rng.random(V), 0.0)
            yield f"V{V}-d{density}", q
    blocks = np.zeros(64 * 6)
    blocks[64:128] = 1.0            # a full block between empty ones
    blocks[200] = 5e-324            # the smallest subnormal counts
    blocks[300:364] = 1.0
    blocks[301] = -0.0              # minus zero does not
    yield "blocks", blocks
    yield "last-only", np.concatenate([np.zeros(32006), [1.0]])


@pytest.mark.parametrize("name,q", list(support_cases()), ids=[name for name, _ in support_cases()])
def test_draft_support_is_flatnonzero(name, q):
    np.testing.assert_array_equal(_core._testing.draft_support(q), np.flatnonzero(q > 0))

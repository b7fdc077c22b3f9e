"""The draft law of every scheme for the property tests: tests/oracle.py's, except the hub scheme's,
computed here in exact rational arithmetic.

Why: the oracle's hub law divides by ``q.sum() - q[a]``, which cancels when the hub holds all
but a tiny mass (q = (1 - 1e-10, 1e-10) loses 8 digits; a denormal off-hub mass becomes 0), and
the drawn instances are full of such rows. Everything here is independent of multidraft.
"""
from fractions import Fraction

import numpy as np

import oracle

from .strategies import law, stored_values


def exact_rows(x):
    """The stored values of ``x`` normalised exactly: a list of rows of Fractions."""
    values = np.atleast_2d(stored_values(x))
    rows = [[Fraction(float(v)) for v in row] for row in values]
    return [[v / sum(row) for v in row] for row in rows]


def hub_probability(q, w) -> Fraction:
    """SpecHub's pairs ([HUB] Section 4): a = first argmax q; (x, a) with probability q(x), (a, x) with
    probability q(a) q(x) / (1 - q(a)); a one-token support {a} draws (a, a)."""
    a = max(range(len(q)), key=lambda t: (q[t], -t))
    off_hub = 1 - q[a]
    x1, x2 = w
    if off_hub == 0:
        return Fraction(int(x1 == a and x2 == a))
    if x1 != a and x2 == a:
        return q[x1]
    if x1 == a and x2 != a:
        return q[a] * q[x2] / off_hub
    return Fraction(0)


def draft_law(scheme: str, q, n: int):
    """(tuples (V**n, n), probabilities (V**n,)) of the draft scheme for the input ``q`` as stored."""
    if scheme != "hub":
        return oracle.draft_law(scheme, law(q), n)
    row = exact_rows(q)[0]
    tuples = oracle.all_tuples(len(row), n)
    return tuples, np.array([float(hub_probability(row, tuple(w))) for w in tuples])


def alpha_star(p64: np.ndarray, scheme: str, q, n: int) -> float:
    """alpha* of the draft scheme by brute force over all 2**V subsets (the oracle's)."""
    return oracle.brute_force_subset(p64, *draft_law(scheme, q, n))[0]


def drawable(scheme: str, q, w) -> bool:
    """Whether the tuple ``w`` has positive probability in exact arithmetic (a product of denormals
    may round to 0 and still be drawable). Whether it is depends on the support of q only, and for
    the hub on its argmax and for topk on its order, so the oracle decides it on a proxy of q
    whose products cannot underflow."""
    q64 = law(q)
    if scheme == "topk":
        proxy = q64
    else:
        proxy = (q64 > 0).astype(np.float64)
        if scheme == "hub":
            proxy[np.argmax(q64)] = 2.0
        proxy /= proxy.sum(axis=-1, keepdims=True)
    return oracle.tuple_probability(scheme, proxy, tuple(int(t) for t in w)) > 0

"""Independent reference solvers for the tests (never imports multidraft).

Notation as in [GR]: ``p`` is the TARGET, ``q`` the DRAFT. A draft law is given as a pair
``(tuples, probs)``: all V**n ordered tuples, shape (V**n, n), and their probabilities (zeros
included), so that every oracle works for any joint draft law.
"""
import itertools

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

SCHEMES = ("iid", "without_replacement", "independent")


def all_tuples(V, n):
    """Every ordered n-tuple over range(V), in lexicographic order, shape (V**n, n)."""
    return np.array(list(itertools.product(range(V), repeat=n)), dtype=np.int64).reshape(-1, n)


def tuple_probability(kind, q, w):
    """Probability of the ordered draft tuple ``w`` under scheme ``kind``.

    iid: prod q(w_j). without_replacement: prod q(w_j) / (Q - sum_{l<j} q(w_l)), Q = sum q, and 0
    when a token repeats, except that a support of k < n tokens is drawn whole and padded: draws
    k+1..n repeat draw k. independent: ``q`` is (n, V) and the probability is prod q_j(w_j).
    hub: see below; a one-token support {a} draws (a, a). topk: probability 1 for the n most
    probable tokens, most probable first, ties by lowest id, a support of k < n padded by
    repeats of the k-th; 0 for every other tuple.
    """
    q = np.asarray(q, dtype=np.float64)
    if kind == "iid":
        return float(np.prod([q[t] for t in w]))
    if kind == "independent":
        return float(np.prod([q[j, t] for j, t in enumerate(w)]))
    if kind == "without_replacement":
        k = min(len(w), int(np.count_nonzero(q)))
        head, padding = w[:k], w[k:]
        if len(set(head)) < k or any(t != head[-1] for t in padding):
            return 0.0
        prob, rest = 1.0, q.copy()
        for t in head:  # Q - sum_{l<j} q(w_l), summed over the tokens left (no cancellation)
            prob *= rest[t] / rest.sum()
            rest[t] = 0.0
        return prob
    if kind == "hub":  # SpecHub ([HUB] Section 4): a = first argmax q; (x, a) ~ q(x), (a, x) ~ q(a) q(x) / (1 - q(a))
        a = int(np.argmax(q))
        (x1, x2), off_hub = w, q.sum() - q[a]
        if off_hub == 0:
            return float(x1 == a and x2 == a)
        if x1 != a and x2 == a:
            return float(q[x1])
        if x1 == a and x2 != a:
            return float(q[a] * q[x2] / off_hub)
        return 0.0
    if kind == "topk":
        return float(tuple(w) == top_tuple(q, len(w)))
    raise ValueError(kind)


def top_tuple(q, n):
    """The topk scheme's one tuple: tokens of q > 0 sorted by (-q, id), the first n, the last repeated
    up to n."""
    order = sorted((t for t in range(len(q)) if q[t] > 0), key=lambda t: (-q[t], t))[:n]
    return tuple(order + [order[-1]] * (n - len(order)))


def draft_law(kind, q, n):
    """(tuples, probs) over all V**n tuples for scheme ``kind`` (``q`` is (n, V) if independent)."""
    q = np.asarray(q, dtype=np.float64)
    tuples = all_tuples(q.shape[-1], n)
    probs = np.array([tuple_probability(kind, q, tuple(w)) for w in tuples])
    return tuples, probs


def subset_masks(V):
    """All 2**V subsets of range(V) as bool masks, shape (2**V, V), ordered by size then lexicographically."""
    masks = np.array(list(itertools.product((False, True), repeat=V)), dtype=bool)
    return masks[np.argsort(masks.sum(axis=1), kind="stable")]


def psi(p, tuples, probs, H):
    """psi(H) = P(H) - p_draft(H^n), for one bool mask H or a stack of masks (..., V)."""
    H = np.asarray(H, dtype=bool)
    inside = H[..., tuples].all(axis=-1)  # (..., M): tuple entirely inside H
    return H @ np.asarray(p, dtype=np.float64) - inside @ probs


def brute_force_subset(p, tuples, probs, tie=1e-14, grey=1e-8):
    """Brute force over all 2**V subsets.

    Returns (alpha*, min psi, H_small, ambiguous): H_small is the intersection of all subsets with
    psi <= min + ``tie`` (psi is submodular, so this is the smallest minimiser); ``ambiguous`` is
    True when some subset lies in the grey zone (min + tie, min + grey], where round-off could
    decide which set is "the" smallest minimiser.
    """
    masks = subset_masks(len(p))
    values = psi(p, tuples, probs, masks)
    best = values.min()
    near = values <= best + tie
    H_small = masks[near].all(axis=0)
    ambiguous = bool(np.any((values > best + tie) & (values <= best + grey)))
    return 1.0 + best, best, H_small, ambiguous


def otlp_lp(p, tuples, probs):
    """Full OTLP of [GR] Eq. (1) with HiGHS, over variables C[i, t] (V * V**n of them).

    maximise sum_{i in set(t)} C[i, t] s.t. sum_t C[i, t] = p(i), sum_i C[i, t] = p_draft(t),
    C >= 0; the last (redundant) column equality is dropped. Returns (alpha*, C of shape (V, M)).
    """
    p = np.asarray(p, dtype=np.float64)
    V, M = len(p), len(tuples)
    member = np.zeros((V, M))
    member[tuples.T, np.arange(M)] = 1.0  # member[i, t] = 1 iff i in set(t)
    rows = sp.kron(sp.eye(V), np.ones((1, M)))  # sum_t C[i, t]
    cols = sp.kron(np.ones((1, V)), sp.eye(M))  # sum_i C[i, t]
    A_eq = sp.vstack([rows, cols.tocsr()[:-1]]).tocsc()
    b_eq = np.concatenate([p, probs[:-1]])
    res = linprog(-member.ravel(), A_eq=A_eq, b_eq=b_eq, bounds=(0, None), method="highs",
                  options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10})
    assert res.status == 0, res.message
    return -res.fun, res.x.reshape(V, M)


def single_draft_acceptance(p, q):
    """sum_i min(p(i), q(i)): the optimal single-draft acceptance (blog closed form)."""
    return float(np.minimum(np.asarray(p, np.float64), np.asarray(q, np.float64)).sum())

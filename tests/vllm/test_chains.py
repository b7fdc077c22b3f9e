"""multidraft.vllm._chains: exact verification of a serving engine's flattened draft chains.

Runs without vLLM (the module imports only torch). Three kinds of checks:

* exactness: ``verify_chains`` equals a position-by-position reference written with plain loops,
  which calls the same verifier on NumPy rows with the same per-position seed, walks each
  request's chain in order and stops at the first position that is not accepted;
* an exact law by enumeration: with a stand-in verifier that returns every combination of
  per-position tokens (weighted by the real verifier's exact ``transport`` of the laws
  ``verify_chains`` hands it), the law of the generated sequence equals the target's chain law;
* a chi-square sampling test of the real call on the same tiny case.

p = TARGET, q = DRAFT. Target laws at later positions depend on the prefix: the engine computes
the target's law at position k + 1 given the drafts up to k, so the tiny case below gives p2 and
q2 per first draft and p3 (the bonus token's law) per pair of drafts.
"""
import itertools

import numpy as np
import pytest
import torch
from scipy import stats

import multidraft as md
from multidraft.vllm import CHAIN_VERIFIERS
from multidraft.vllm._chains import PLACEHOLDER, draft_laws, per_position, positions_of, verify_chains

TOL = 1e-12


# ----------------------------------------------------------------------------- reference

def reference_law(q_row, draft, V):
    """(the draft a verifier is given, its law, whether it is a real draw of q) for one position:
    a placeholder or out-of-vocabulary id becomes the point mass at id 0, a draft of probability 0
    under q the point mass at itself (the module's documented mapping), None q the point mass at
    the draft."""
    if not 0 <= draft < V:
        return 0, np.eye(V)[0], False
    if q_row is None:
        return draft, np.eye(V)[draft], True
    if q_row[draft] <= 0:
        return draft, np.eye(V)[draft], False
    return draft, q_row, True


def reference_chains(verifier, p, q, drafts, counts, bonus, seeds):
    """Rows of verified tokens by plain loops: each position verified alone with its own seed."""
    V = p.shape[1]
    rows, start = [], 0
    for r, n in enumerate(counts):
        out = []
        for k in range(n):
            i = start + k
            d, law, real = reference_law(None if q is None else q[i], int(drafts[i]), V)
            token, accepted = verifier.verify(p[i], law, [d], int(seeds[i]))
            assert accepted == (token == d)
            out.append(int(token))
            if not (accepted and real):
                break
        else:
            out.append(int(bonus[r]))
        rows.append(out)
        start += n
    width = max(counts, default=0) + 1
    return np.array([row + [PLACEHOLDER] * (width - len(row)) for row in rows], dtype=np.int64).reshape(-1, width)


# ----------------------------------------------------------------------------- random cases

def random_row(rng, V, kind):
    if kind == "one_hot":
        return np.eye(V)[rng.integers(V)]
    row = rng.dirichlet(np.ones(V) * 0.7)
    if kind == "zeros":  # some exact zeros, at least one positive entry kept
        keep = rng.random(V) < 0.5
        keep[rng.integers(V)] = True
        row = np.where(keep, row, 0.0)
        row = row / row.sum()
    return row


def random_case(seed):
    """(p (N, V), q (N, V) or None, drafts (N,), counts (B,), bonus (B,), seeds (N,), what was
    injected): drafts mostly drawn from q, with placeholders, ids >= V and drafts of q-probability
    0 mixed in."""
    rng = np.random.default_rng(seed)
    V = int(rng.integers(3, 9))
    B = int(rng.integers(1, 6))
    counts = [int(c) for c in rng.integers(0, 5, size=B)]
    if B > 1 and rng.random() < 0.5:
        counts[int(rng.integers(B))] = 0
    N = sum(counts)
    kinds = ["random", "zeros", "one_hot"]
    p = np.array([random_row(rng, V, kinds[int(rng.integers(3))]) for _ in range(N)]).reshape(N, V)
    has_q = rng.random() < 0.7
    q = np.array([random_row(rng, V, kinds[int(rng.integers(3))]) for _ in range(N)]).reshape(N, V) if has_q else None
    drafts = np.array([rng.choice(V, p=q[i]) if has_q else rng.integers(V) for i in range(N)], dtype=np.int64)
    for i in range(N):
        u = rng.random()
        if u < 0.08:
            drafts[i] = PLACEHOLDER
        elif u < 0.14:
            drafts[i] = V + int(rng.integers(0, 3))
        elif u < 0.22 and has_q and np.any(q[i] == 0):
            drafts[i] = rng.choice(np.flatnonzero(q[i] == 0))
    bonus = rng.integers(0, V, size=B)
    seeds = rng.integers(0, 2**63, size=N, dtype=np.uint64)
    return p, q, drafts, counts, bonus, seeds


def call(verifier, p, q, drafts, counts, bonus, seeds, dtype=torch.float64):
    pt = torch.tensor(p, dtype=dtype)
    qt = None if q is None else torch.tensor(q, dtype=dtype)
    return verify_chains(verifier, pt, qt, torch.tensor(drafts, dtype=torch.int64), counts,
                         torch.tensor(bonus, dtype=torch.int64)[:, None], seeds)


EXACT_NAMES = ("sps", "naive", "rrs", "spectr", "khisti", "otlp", "global_resolution")


@pytest.mark.parametrize("name", EXACT_NAMES)
@pytest.mark.parametrize("case_seed", range(40))
def test_verify_chains_equals_the_position_by_position_loop(name, case_seed):
    verifier = md.verifier(name)
    p, q, drafts, counts, bonus, seeds = random_case(1000 + case_seed)
    out = call(verifier, p, q, drafts, counts, bonus, seeds)
    assert out.dtype == torch.int32
    assert tuple(out.shape) == (len(counts), max(counts, default=0) + 1)
    np.testing.assert_array_equal(out.numpy(), reference_chains(verifier, p, q, drafts, counts, bonus, seeds))


@pytest.mark.parametrize("name", ("sps", "otlp", "global_resolution"))
@pytest.mark.parametrize("case_seed", range(10))
def test_float32_laws_equal_the_loop_on_the_same_float32_rows(name, case_seed):
    """vLLM's laws are float32: the tensor call and the NumPy loop read the same float32 numbers."""
    verifier = md.verifier(name)
    p, q, drafts, counts, bonus, seeds = random_case(2000 + case_seed)
    p32 = p.astype(np.float32)
    q32 = None if q is None else q.astype(np.float32)
    out = call(verifier, p32, q32, drafts, counts, bonus, seeds, dtype=torch.float32)
    np.testing.assert_array_equal(out.numpy(), reference_chains(verifier, p32, q32, drafts, counts, bonus, seeds))


@pytest.mark.parametrize("case_seed", range(40))
def test_layout_of_the_output_rows(case_seed):
    """Per row: the leading accepted drafts (equal to the drafts), then one token (the bonus when
    every draft was accepted, at column n_r), then -1; a position with an unusable draft ends its
    chain with a token in the support of p, however the verifier's draw relates to the id."""
    p, q, drafts, counts, bonus, seeds = random_case(3000 + case_seed)
    V = p.shape[1]
    out = call(md.verifier("sps"), p, q, drafts, counts, bonus, seeds).numpy()
    start = 0
    for r, n in enumerate(counts):
        row = out[r]
        m = int(np.sum(row != PLACEHOLDER))
        assert 1 <= m <= n + 1
        assert np.all(row[m:] == PLACEHOLDER)
        np.testing.assert_array_equal(row[:m - 1], drafts[start:start + m - 1])  # accepted drafts
        for k in range(m - 1):  # an accepted draft was a real draw of q
            d = int(drafts[start + k])
            assert 0 <= d < V and (q is None or q[start + k, d] > 0)
        if m == n + 1:
            assert row[n] == bonus[r]
        else:  # the last token is the first non-accepted position's draw of its target law
            last = int(row[m - 1])
            assert 0 <= last < V and p[start + m - 1, last] > 0
        start += n


@pytest.mark.parametrize("name", EXACT_NAMES)
def test_unusable_drafts_end_the_chain_with_a_draw_of_p(name):
    """Position 0 of each request holds a placeholder, an id >= V, a draft with q(d) = 0: the row
    is that position's token alone (never accepted, even when it equals the id), a draw of p."""
    V = 4
    verifier = md.verifier(name)
    p_row = np.array([0.1, 0.2, 0.3, 0.4])
    q_row = np.array([0.5, 0.5, 0.0, 0.0])
    cases = [PLACEHOLDER, V, V + 7, 2, 3]
    counts = [3] * len(cases)
    p = np.tile(p_row, (3 * len(cases), 1))
    q = np.tile(q_row, (3 * len(cases), 1))
    drafts = np.array([[d, 0, 1] for d in cases]).reshape(-1)
    bonus = np.zeros(len(cases), dtype=np.int64)
    hits = np.zeros((len(cases), V))
    for s in range(200):
        seeds = np.random.default_rng(s).integers(0, 2**63, size=drafts.shape[0], dtype=np.uint64)
        out = call(verifier, p, q, drafts, counts, bonus, seeds).numpy()
        assert np.all(out[:, 1:] == PLACEHOLDER)
        hits[np.arange(len(cases)), out[:, 0]] += 1
    # a point-mass draft gives the verifier nothing to accept over p: every token of p appears,
    # with frequencies near p (loose bounds: the exact law is in test_chain_law_by_enumeration)
    assert np.all(hits > 0)
    assert np.all(np.abs(hits / 200 - p_row) < 0.15)


def test_deterministic_drafts_with_q_none():
    """q None: a point mass at each draft, accepted with probability p(d) under "sps"."""
    verifier = md.verifier("sps")
    p = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.5, 0.5, 0.0]])
    drafts = np.array([1, 2, 1, 2])
    seeds = np.arange(4, dtype=np.uint64)
    out = call(verifier, p, None, drafts, [2, 2], np.array([0, 1]), seeds).numpy()
    # request 0: p puts all its mass on both drafts: accepted twice, then its bonus
    np.testing.assert_array_equal(out[0], [1, 2, 0])
    # request 1: p(1) = 0 at its first position: rejected, the token is 0 (p's only token)
    np.testing.assert_array_equal(out[1], [0, -1, -1])


def test_all_requests_without_drafts_output_their_bonus():
    verifier = md.verifier("sps")
    bonus = torch.tensor([[3], [0], [2]])
    out = verify_chains(verifier, torch.zeros((0, 5), dtype=torch.float64), torch.zeros((0, 5), dtype=torch.float64),
                        torch.zeros(0, dtype=torch.int64), [0, 0, 0], bonus, np.zeros(0, dtype=np.uint64))
    assert out.dtype == torch.int32
    np.testing.assert_array_equal(out.numpy(), [[3], [0], [2]])


def test_all_accepted_bonus_sits_at_column_n_r():
    """Drafts that p surely accepts (p = q = point mass): each row is its drafts, then its bonus
    at column n_r, then padding."""
    V = 5
    counts = [0, 3, 1, 2]
    drafts = np.array([4, 1, 2, 0, 3, 3])
    p = np.eye(V)[drafts]
    bonus = np.array([1, 2, 3, 4])
    seeds = np.arange(drafts.shape[0], dtype=np.uint64) + 11
    for name in EXACT_NAMES:
        out = call(md.verifier(name), p, p.copy(), drafts, counts, bonus, seeds).numpy()
        np.testing.assert_array_equal(out, [[1, -1, -1, -1], [4, 1, 2, 2], [0, 3, -1, -1], [3, 3, 4, -1]])


def test_one_batched_verify_call_with_the_per_position_seeds():
    """verify_chains calls its verifier once for all positions, passing the seeds through."""
    calls = []
    inner = md.verifier("sps")

    class Recording:
        def verify(self, p, q, drafts, seeds):
            calls.append((p.shape, q.shape, drafts.shape, np.array(seeds)))
            return inner.verify(p, q, drafts, seeds)

    p, q, drafts, counts, bonus, seeds = random_case(7)
    assert sum(counts) > 0 and q is not None
    call(Recording(), p, q, drafts, counts, bonus, seeds)
    N, V = p.shape
    assert len(calls) == 1
    assert calls[0][:3] == ((N, V), (N, V), (N, 1))
    np.testing.assert_array_equal(calls[0][3], seeds)


# ----------------------------------------------------------------------------- layout helpers

def test_positions_of_and_per_position():
    request, offset, counts = positions_of([2, 0, 3, 1], "cpu")
    np.testing.assert_array_equal(request.numpy(), [0, 0, 2, 2, 2, 3])
    np.testing.assert_array_equal(offset.numpy(), [0, 1, 0, 1, 2, 0])
    np.testing.assert_array_equal(counts.numpy(), [2, 0, 3, 1])
    assert request.dtype == offset.dtype == counts.dtype == torch.int64
    values = torch.tensor([[10, 11], [20, 21], [30, 31], [40, 41]])
    np.testing.assert_array_equal(per_position(values, [2, 0, 3, 1]).numpy(),
                                  [[10, 11], [10, 11], [30, 31], [30, 31], [30, 31], [40, 41]])
    request, offset, counts = positions_of([0, 0], "cpu")
    assert request.shape == offset.shape == (0,) and counts.tolist() == [0, 0]


def test_draft_laws_maps_unusable_drafts_to_point_masses():
    q = torch.tensor([[0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [0.5, 0.5, 0.0]], dtype=torch.float64)
    drafts = torch.tensor([1, -1, 3, 2])
    usable, laws, real = draft_laws(q, drafts, 3)
    np.testing.assert_array_equal(usable.numpy(), [[1], [0], [0], [2]])
    np.testing.assert_array_equal(real.numpy(), [True, False, False, False])
    np.testing.assert_array_equal(laws.numpy(), [[0.5, 0.5, 0.0], [1, 0, 0], [1, 0, 0], [0, 0, 1]])
    assert laws.dtype == torch.float64
    usable, laws, real = draft_laws(None, drafts, 3)
    np.testing.assert_array_equal(usable.numpy(), [[1], [0], [0], [2]])
    np.testing.assert_array_equal(real.numpy(), [True, False, False, True])
    np.testing.assert_array_equal(laws.numpy(), np.eye(3)[[1, 0, 0, 2]])


# ----------------------------------------------------------------------------- exact chain law

V3 = 3
P1 = np.array([0.5, 0.3, 0.2])
P2 = {0: np.array([0.1, 0.6, 0.3]), 1: np.array([0.0, 0.5, 0.5]), 2: np.array([0.7, 0.0, 0.3])}
P3 = {pair: np.roll(np.array([0.6, 0.3, 0.1]), sum(pair)) for pair in itertools.product(range(V3), repeat=2)}
Q1 = np.array([0.2, 0.2, 0.6])
Q2 = {0: np.array([0.3, 0.3, 0.4]), 1: np.array([0.0, 0.2, 0.8]), 2: np.array([0.5, 0.5, 0.0])}


def target_law():
    """P(first three generated tokens = t1 t2 t3) under the target: p1(t1) p2[t1](t2) p3[t1 t2](t3)."""
    return {t: P1[t[0]] * P2[t[0]][t[1]] * P3[t[:2]][t[2]] for t in itertools.product(range(V3), repeat=3)}


def drafting(kind):
    """(weight, (d1, d2), q rows or None) of each draft pair the drafter can propose: q-drawn
    drafts (position 2's laws depend on d1), greedy drafts (q None), or a second position the
    drafter left empty (a placeholder) or filled with an id outside the vocabulary."""
    if kind == "sampled":
        return [(Q1[a] * Q2[a][b], (a, b), np.array([Q1, Q2[a]]))
                for a in range(V3) for b in range(V3) if Q1[a] * Q2[a][b] > 0]
    if kind == "greedy":
        a = int(np.argmax(Q1))
        return [(1.0, (a, int(np.argmax(Q2[a]))), None)]
    bad = PLACEHOLDER if kind == "placeholder" else V3 + 1
    return [(Q1[a], (a, bad), np.array([Q1, Q2[a]])) for a in range(V3) if Q1[a] > 0]


def completions(row):
    """(first three generated tokens, probability) for each continuation of a step's output row:
    the tokens it outputs, then draws of the target's laws given the prefix (what the next steps
    output, lossless by the same argument)."""
    out = tuple(int(t) for t in row if t != PLACEHOLDER)
    if len(out) >= 3:
        yield out[:3], 1.0
    elif len(out) == 2:
        for t3 in range(V3):
            yield out + (t3,), P3[out][t3]
    else:
        for t2, t3 in itertools.product(range(V3), repeat=2):
            yield out + (t2, t3), P2[out[0]][t2] * P3[(out[0], t2)][t3]


@pytest.mark.parametrize("kind", ["sampled", "greedy", "placeholder", "out_of_vocabulary"])
@pytest.mark.parametrize("name", CHAIN_VERIFIERS)
def test_chain_law_by_enumeration(name, kind):
    """For each draft pair, verify_chains hands one batched call its laws; the real verifier's
    exact transports of those laws give the joint law of the two positions' tokens (each position
    has its own seed: independent given the drafts). A stand-in verifier then returns every
    combination of tokens, verify_chains cuts each, and the generated sequence's law (bonus and
    later steps drawn from the target) must be the target's, exactly."""
    verifier = md.verifier(name)
    law = {t: 0.0 for t in itertools.product(range(V3), repeat=3)}
    for weight, (d1, d2), q in drafting(kind):
        p = torch.tensor(np.array([P1, P2[d1]]))
        qt = None if q is None else torch.tensor(q)
        drafts = torch.tensor([d1, d2])
        seen = {}

        class Recording:
            def verify(self, p_, q_, drafts_, seeds_):
                seen["args"] = (p_.numpy().copy(), q_.numpy().copy(), drafts_.numpy().copy())
                return torch.zeros(p_.shape[0], dtype=torch.int64), torch.zeros(p_.shape[0], dtype=torch.bool)

        verify_chains(Recording(), p, qt, drafts, [2], torch.tensor([[0]]), np.zeros(2, dtype=np.uint64))
        p_seen, q_seen, d_seen = seen["args"]
        transports = np.asarray(verifier.transport(p_seen, q_seen, d_seen))
        assert transports.shape == (2, V3)
        np.testing.assert_allclose(transports.sum(axis=1), 1.0, atol=TOL)
        for t1, t2 in itertools.product(range(V3), repeat=2):
            w_tokens = transports[0, t1] * transports[1, t2]
            if w_tokens == 0:
                continue

            class Fixed:
                def verify(self, p_, q_, drafts_, seeds_):
                    tokens = torch.tensor([t1, t2])
                    return tokens, tokens == drafts_[:, 0]

            for b in range(V3):
                w_bonus = P3[(d1, d2)][b] if 0 <= d2 < V3 else 1.0 / V3  # unused when the chain is cut
                if w_bonus == 0:
                    continue
                row = verify_chains(Fixed(), p, qt, drafts, [2], torch.tensor([[b]]),
                                    np.zeros(2, dtype=np.uint64))[0].tolist()
                for sequence, w_rest in completions(row):
                    law[sequence] += weight * w_tokens * w_bonus * w_rest
    target = target_law()
    for t in target:
        assert law[t] == pytest.approx(target[t], abs=TOL), (t, law[t], target[t])


def test_the_enumeration_detects_a_wrong_cut():
    """The enumeration is not vacuous: a verify_chains that keeps the token after a rejection
    (no cut) gives another law."""
    verifier = md.verifier("sps")
    law = {t: 0.0 for t in itertools.product(range(V3), repeat=2)}
    for weight, (d1, d2), q in drafting("sampled"):
        transports = np.asarray(verifier.transport(np.array([P1, P2[d1]]), q, np.array([[d1], [d2]])))
        for t1, t2 in itertools.product(range(V3), repeat=2):
            law[(t1, t2)] += weight * transports[0, t1] * transports[1, t2]  # both tokens, never cut
    target = {(a, b): P1[a] * P2[a][b] for a, b in law}
    assert max(abs(law[t] - target[t]) for t in law) > 1e-2


@pytest.mark.parametrize("name", ["sps", "naive", "rrs", "khisti", "otlp", "global_resolution"])
def test_chain_sampling_chi_square(name):
    """4000 requests of the tiny case in one call (drafts drawn from q, fixed seeds): the first two
    generated tokens follow p1(t1) p2[t1](t2)."""
    verifier = md.verifier(name)
    rng = np.random.default_rng(20240611)
    R = 4000
    d1 = np.array([rng.choice(V3, p=Q1) for _ in range(R)])
    d2 = np.array([rng.choice(V3, p=Q2[a]) for a in d1])
    p = np.stack([np.array([P1, P2[a]]) for a in d1]).reshape(2 * R, V3)
    q = np.stack([np.array([Q1, Q2[a]]) for a in d1]).reshape(2 * R, V3)
    drafts = np.stack([d1, d2], axis=1).reshape(-1)
    bonus = np.array([rng.choice(V3, p=P3[(a, b)]) for a, b in zip(d1, d2)])
    seeds = rng.integers(0, 2**63, size=2 * R, dtype=np.uint64)
    out = call(verifier, p, q, drafts, [2] * R, bonus, seeds).numpy()
    counts = np.zeros((V3, V3))
    for row in out:
        t1 = int(row[0])
        t2 = int(row[1]) if row[1] != PLACEHOLDER else int(rng.choice(V3, p=P2[t1]))
        counts[t1, t2] += 1
    expected = np.array([[P1[a] * P2[a][b] for b in range(V3)] for a in range(V3)]) * R
    cells = expected.reshape(-1) > 0
    assert np.all(counts.reshape(-1)[~cells] == 0)
    _, pvalue = stats.chisquare(counts.reshape(-1)[cells], expected.reshape(-1)[cells])
    assert pvalue > 1e-3, (counts, expected)

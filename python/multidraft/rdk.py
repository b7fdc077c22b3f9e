"""Out-of-vocabulary drafting: RDK, Redistributing Drafter Kernels ([OOV]).

A drafter whose vocabulary was pruned (or differs from the target's) cannot propose the target
tokens it lacks. RDK turns its distribution ``q`` into a proposal over the **whole target
vocabulary**, and speculative sampling with that proposal used everywhere (accept ratio,
residual, bonus token) is lossless for any valid proposal. Notation: ``p`` target, ``q`` drafter.

Pieces (all batched over a leading axis where it makes sense; float32 or float64 input):

- :class:`VocabularyMap`: the partial id map drafter -> target. ``frequency_ranked`` (FR pruning,
  Algorithm 3, ties by ascending id), ``pruned``, ``intersection`` (by token string). ``tli(q)`` is
  Eq. (1) (q restricted to the shared set I and renormalised), ``masked(q)`` the baseline without
  renormalisation.
- :class:`AffinityMatrix`: the row-stochastic token-affinity matrix M (Assumption 4.1) as CSR,
  built from calibration data by Eq. (2) (softmax of the target-logit covariance over ``tau``,
  top-k per row, renormalised), or supplied by the user and validated. ``M.proposal(q_prime)`` is
  the full RDK proposal p' = M^T q' (Algorithm 1); ``M.sample`` is its exact two-stage sampler
  (i ~ q', j ~ M[i, :]). :func:`select_temperature` picks tau by held-out mean acceptance.
- :func:`taylor_proposal`: the first-order linear-time form of Eq. (3) with its prior ``pi`` and
  ``n_eff`` (the paper's N = |T|) as parameters. Implemented verbatim; note that
  ``||p_Taylor - q'||_1 <= 2 / n_eff``, so with the paper's N = |T| it is numerically TLI
  (spec §6 A6). Smaller ``n_eff`` moves more mass onto the prior.
- :func:`verify` / :func:`transport`: speculative sampling with the proposal through the ``"sps"``
  verifier; :func:`verify_block` runs one draft block with lookahead L (stops at the first
  rejection, bonus token from the target); :func:`masked_verify` / :func:`masked_transport`: the
  lossless discard sampler of the masked baseline.

Multi-draft: a proposal is an ordinary draft distribution, so ``n`` i.i.d. drafts from it
(``M.sample(q_prime, n, rng)``) can be verified by any i.i.d. verifier with ``q = p'``, e.g.
``md.verifier("otlp").verify(p, p_prime, drafts, rng)``; losslessness carries over (spec §2.10).

The samplers take distributions, not models: feeding an out-of-vocabulary drafted token back to
the drafter (its input embedding table is not pruned, spec §2.9) is the caller's job.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple, Union

import numpy as np

from . import _core
from . import _validation as check
from .otlp import acceptance_rate
from .verifiers import verifier

_rdk = _core.rdk

#: The largest V for which :meth:`AffinityMatrix.to_dense` and ``from_dense`` build V x V arrays.
MAX_DENSE_VOCAB = 8192


def _ids(x, name: str, size: int, allow_missing: bool = False) -> np.ndarray:
    """1-D int64 token ids in [0, size) (or -1 where ``allow_missing``)."""
    array = np.asarray(x)
    if array.ndim != 1:
        raise ValueError(f"'{name}' must be 1-D, got shape {array.shape}")
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"'{name}' must hold integer token ids, got dtype {array.dtype}")
    array = np.ascontiguousarray(array, dtype=np.int64)
    low = -1 if allow_missing else 0
    bad = (array < low) | (array >= size)
    if np.any(bad):
        raise ValueError(f"'{name}' has id {int(array[bad][0])} at index {int(np.flatnonzero(bad)[0])} "
                         f"out of range [{low}, {size})")
    return array


def _nonnegative_vector(x, name: str, size: Optional[int] = None) -> np.ndarray:
    array = np.asarray(x)
    if array.ndim != 1 or array.size == 0 or not (np.issubdtype(array.dtype, np.floating)
                                                  or np.issubdtype(array.dtype, np.integer)):
        raise ValueError(f"'{name}' must be a non-empty 1-D numeric array, got shape {array.shape}, dtype {array.dtype}")
    array = np.ascontiguousarray(array, dtype=np.float64)
    if size is not None and array.shape[0] != size:
        raise ValueError(f"'{name}' has length {array.shape[0]}, expected {size}")
    if not np.all(np.isfinite(array)) or np.any(array < 0):
        where = int(np.flatnonzero(~np.isfinite(array) | (array < 0))[0])
        raise ValueError(f"'{name}' must be finite and >= 0, got {array[where]!r} at index {where}")
    return array


def _rows(x, name: str) -> Tuple[np.ndarray, bool]:
    """Probabilities as (B, V) float64 plus whether the caller passed a batch."""
    array = check.probabilities(x, name)
    return array.reshape(-1, array.shape[-1]), array.ndim == 2


def _unbatch(x: np.ndarray, batched: bool):
    return x if batched else x[0]


# ----------------------------------------------------------------------------- vocabulary maps

def frequency_ranked(token_counts, size: int) -> np.ndarray:
    """The ``size`` most frequent token ids (size,) int64, most frequent first (Algorithm 3).

    ``token_counts`` (V,): occurrences of each token id in a corpus (non-negative integers).
    Ties are broken by ascending token id, so the result is deterministic.
    """
    counts = np.asarray(token_counts)
    if counts.ndim != 1 or counts.size == 0 or not np.issubdtype(counts.dtype, np.integer):
        raise ValueError(f"'token_counts' must be a non-empty 1-D integer array, got shape {counts.shape}, "
                         f"dtype {counts.dtype}")
    if np.any(counts < 0):
        raise ValueError(f"'token_counts' has a negative count at index {int(np.flatnonzero(counts < 0)[0])}")
    size = check.count(size, "size")
    if size > counts.shape[0]:
        raise ValueError(f"'size' = {size} exceeds the vocabulary size {counts.shape[0]}")
    return _rdk.frequency_ranked(np.ascontiguousarray(counts, dtype=np.int64), size)


class VocabularyMap:
    """A partial, injective map from drafter token ids to target token ids.

    ``draft_to_target`` (Vd,) int64: the target id of each drafter token, -1 for drafter tokens
    the target lacks (the set F). ``target_size``: |T|. The shared set I is the image of the map;
    it is defined by vocabulary membership, not by positive probability (spec A11).
    """

    def __init__(self, draft_to_target, target_size: int):
        self.target_size = check.count(target_size, "target_size")
        self.draft_to_target = _ids(draft_to_target, "draft_to_target", self.target_size, allow_missing=True)
        if self.draft_to_target.size == 0:
            raise ValueError("'draft_to_target' is empty")
        image = self.draft_to_target[self.draft_to_target >= 0]
        if image.size == 0:
            raise ValueError("the drafter and target vocabularies share no token (I is empty): TLI and RDK "
                             "are undefined ([OOV] assumes I non-empty)")
        unique, counts = np.unique(image, return_counts=True)
        if np.any(counts > 1):
            raise ValueError(f"'draft_to_target' is not injective: target id {int(unique[counts > 1][0])} "
                             "has several drafter tokens")
        self.draft_to_target.setflags(write=False)

    @classmethod
    def pruned(cls, kept, vocab_size: int) -> "VocabularyMap":
        """The pruned regime (D subset of T, same tokenizer): drafter id = target id on ``kept``."""
        vocab_size = check.count(vocab_size, "vocab_size")
        kept = _ids(kept, "kept", vocab_size)
        mapping = np.full(vocab_size, -1, dtype=np.int64)
        mapping[kept] = kept
        return cls(mapping, vocab_size)

    @classmethod
    def frequency_ranked(cls, token_counts, size: int) -> "VocabularyMap":
        """FR pruning (Algorithm 3): keep the ``size`` most frequent tokens of ``token_counts``."""
        kept = frequency_ranked(token_counts, size)
        return cls.pruned(kept, len(token_counts))

    @classmethod
    def intersection(cls, draft_vocabulary: Sequence[str], target_vocabulary: Sequence[str]) -> "VocabularyMap":
        """The heterogeneous regime: drafter token d maps to the target token with the same string.

        Both arguments list token strings by id; each vocabulary must hold distinct strings.
        """
        for name, vocabulary in (("draft_vocabulary", draft_vocabulary), ("target_vocabulary", target_vocabulary)):
            if len(set(vocabulary)) != len(vocabulary):
                raise ValueError(f"'{name}' has repeated token strings")
        target_id = {token: t for t, token in enumerate(target_vocabulary)}
        return cls(np.array([target_id.get(token, -1) for token in draft_vocabulary], dtype=np.int64),
                   len(target_vocabulary))

    @property
    def draft_size(self) -> int:
        return int(self.draft_to_target.shape[0])

    @property
    def shared(self) -> np.ndarray:
        """I: target ids the drafter can emit, ascending."""
        return np.sort(self.draft_to_target[self.draft_to_target >= 0])

    @property
    def target_only(self) -> np.ndarray:
        """T \\ I: target ids the drafter cannot emit (RDK's "virtually restored" tokens)."""
        return np.setdiff1d(np.arange(self.target_size), self.shared)

    @property
    def unmapped(self) -> np.ndarray:
        """Drafter ids without a target image, whose mass TLI drops: F = D \\ I in the heterogeneous
        regime; in the pruned regime (a map over the unpruned drafter's ids) the pruned tokens."""
        return np.flatnonzero(self.draft_to_target < 0)

    def __repr__(self) -> str:
        return f"VocabularyMap(draft_size={self.draft_size}, target_size={self.target_size}, shared={self.shared.size})"

    def _project(self, q, renormalise: bool):
        rows, batched = _rows(q, "q")
        if rows.shape[1] != self.draft_size:
            raise ValueError(f"'q' has vocabulary size {rows.shape[1]}, but the map's drafter vocabulary has "
                             f"{self.draft_size}")
        out, mass = _rdk.project(rows, self.draft_to_target, self.target_size, renormalise)
        return out, mass, batched

    def shared_mass(self, q):
        """q(I): the drafter's mass on shared tokens, float or (B,)."""
        _, mass, batched = self._project(q, False)
        return _unbatch(mass, batched)

    def tli(self, q) -> np.ndarray:
        """TLI, Eq. (1): q' (target_size,) or (B, target_size), q on I renormalised.

        Raises ValueError for a row with q(I) = 0: TLI is undefined there; the caller should draft
        nothing at that position and let the target sample (spec §2.4).
        """
        out, mass, batched = self._project(q, True)
        if np.any(mass <= 0):
            row = int(np.flatnonzero(mass <= 0)[0])
            raise ValueError(f"'q' puts no mass on the shared vocabulary (row {row}): TLI is undefined, draft "
                             "nothing at this position and let the target sample")
        return _unbatch(out, batched)

    def masked(self, q) -> np.ndarray:
        """The masked baseline: q on I, zero elsewhere, **not** renormalised (sums to q(I) <= 1)."""
        out, _, batched = self._project(q, False)
        return _unbatch(out, batched)


# ----------------------------------------------------------------------------- affinity matrix

class AffinityMatrix:
    """A row-stochastic V x V matrix M in CSR form ([OOV] Assumption 4.1).

    ``indptr`` (V + 1,) int64, ``indices`` (nnz,) column ids, ``values`` (nnz,) float64. Entries
    must be finite and >= 0 and each row must sum to 1 within 1e-6; with ``renormalise=True``
    rows are divided by their sums instead and empty or all-zero rows become e_i (spec §2.11).
    """

    def __init__(self, indptr, indices, values, renormalise: bool = False):
        indptr = np.asarray(indptr)
        if indptr.ndim != 1 or indptr.shape[0] < 2 or not np.issubdtype(indptr.dtype, np.integer):
            raise ValueError(f"'indptr' must be a 1-D integer array of length V + 1 >= 2, got shape {indptr.shape}")
        indptr = np.ascontiguousarray(indptr, dtype=np.int64)
        V = indptr.shape[0] - 1
        values = np.asarray(values)
        indices = np.asarray(indices)
        if indptr[0] != 0 or np.any(np.diff(indptr) < 0) or indptr[-1] != values.shape[0] or values.ndim != 1:
            raise ValueError(f"'indptr' must start at 0, not decrease and end at len(values) = {values.shape}")
        if indices.shape != values.shape:
            raise ValueError(f"'indices' has shape {indices.shape}, but 'values' has {values.shape}")
        if V >= 2**31:
            raise ValueError(f"vocabulary size {V} exceeds the 32-bit column ids of M")
        indices = _ids(indices, "indices", V).astype(np.int32)
        values = np.array(values, dtype=np.float64)
        rows = np.repeat(np.arange(V), np.diff(indptr))
        bad = ~np.isfinite(values) | (values < 0)
        if np.any(bad):
            e = int(np.flatnonzero(bad)[0])
            raise ValueError(f"M has an invalid entry {values[e]!r} at (row {int(rows[e])}, column {int(indices[e])}): "
                             "entries must be finite and >= 0 (Assumption 4.1)")
        sums = np.bincount(rows, weights=values, minlength=V)
        if renormalise:
            empty = sums <= 0
            if np.any(empty):  # all-zero or empty rows become identity rows
                keep = ~empty[rows]
                counts = np.where(empty, 1, np.bincount(rows[keep], minlength=V))
                new_indptr = np.concatenate([[0], np.cumsum(counts)])
                new_indices = np.empty(new_indptr[-1], dtype=np.int32)
                new_values = np.empty(new_indptr[-1])
                fill = np.repeat(empty, counts)
                new_indices[fill] = np.flatnonzero(empty)
                new_values[fill] = 1.0
                new_indices[~fill] = indices[keep]
                new_values[~fill] = values[keep]
                indptr, indices, values, rows = new_indptr, new_indices, new_values, np.repeat(np.arange(V), counts)
                sums = np.where(empty, 1.0, sums)
            values = values / sums[rows]
        else:
            off = np.abs(sums - 1.0) > check.SUM_TOLERANCE
            if np.any(off):
                r = int(np.flatnonzero(off)[0])
                raise ValueError(f"M is not row-stochastic: row {r} sums to {float(sums[r])!r} (Assumption 4.1 needs 1 "
                                 f"within {check.SUM_TOLERANCE:g}; pass renormalise=True to rescale)")
        self.V = V
        self.indptr, self.indices, self.values = indptr, indices, values
        for array in (self.indptr, self.indices, self.values):
            array.setflags(write=False)

    @classmethod
    def identity(cls, V: int) -> "AffinityMatrix":
        """M = I: RDK reduces to TLI exactly."""
        V = check.count(V, "V")
        return cls(np.arange(V + 1), np.arange(V), np.ones(V))

    @classmethod
    def from_dense(cls, M, renormalise: bool = False) -> "AffinityMatrix":
        """From a dense square array (V <= ``MAX_DENSE_VOCAB``); zeros are not stored."""
        M = np.asarray(M)
        if M.ndim != 2 or M.shape[0] != M.shape[1] or M.shape[0] == 0:
            raise ValueError(f"'M' must be a square 2-D array, got shape {M.shape}")
        if M.shape[0] > MAX_DENSE_VOCAB:
            raise ValueError(f"dense M of size {M.shape[0]} exceeds MAX_DENSE_VOCAB = {MAX_DENSE_VOCAB}; "
                             "build it sparse (from_calibration or the CSR constructor)")
        M = np.asarray(M, dtype=np.float64)
        if not np.all(np.isfinite(M)):
            r, c = np.argwhere(~np.isfinite(M))[0]
            raise ValueError(f"M has an invalid entry {M[r, c]!r} at (row {r}, column {c})")
        nonzero = M != 0
        return cls(np.concatenate([[0], np.cumsum(nonzero.sum(axis=1))]), np.nonzero(nonzero)[1], M[nonzero],
                   renormalise)

    @classmethod
    def from_calibration(cls, samples, tau: float, top_k: int, rows=None, omega: str = "covariance") -> "AffinityMatrix":
        """Eq. (2) from calibration samples; see :func:`affinity_scores` and :meth:`AffinityScores.matrix`."""
        return affinity_scores(samples, top_k, rows, omega).matrix(tau)

    @property
    def nnz(self) -> int:
        return int(self.values.shape[0])

    def __repr__(self) -> str:
        return f"AffinityMatrix(V={self.V}, nnz={self.nnz})"

    def to_dense(self) -> np.ndarray:
        """The dense V x V array (V <= ``MAX_DENSE_VOCAB``)."""
        if self.V > MAX_DENSE_VOCAB:
            raise ValueError(f"dense M of size {self.V} exceeds MAX_DENSE_VOCAB = {MAX_DENSE_VOCAB}")
        dense = np.zeros((self.V, self.V))
        np.add.at(dense, (np.repeat(np.arange(self.V), np.diff(self.indptr)), self.indices), self.values)
        return dense

    def _q_prime(self, q_prime):
        rows, batched = _rows(q_prime, "q_prime")
        if rows.shape[1] != self.V:
            raise ValueError(f"'q_prime' has vocabulary size {rows.shape[1]}, but M has {self.V}")
        return rows, batched

    def proposal(self, q_prime) -> np.ndarray:
        """Full RDK, Algorithm 1: p' = M^T q' over the whole target vocabulary, (V,) or (B, V).

        ``q_prime`` is the TLI output. Cost O(V + nnz of the rows where q' > 0).
        """
        rows, batched = self._q_prime(q_prime)
        return _unbatch(_rdk.proposal(self.indptr, self.indices, self.values, rows), batched)

    def sample(self, q_prime, n: int = 1, rng: check.RngLike = None) -> np.ndarray:
        """``n`` i.i.d. draws from p' = M^T q' by two-stage sampling: (n,) or (B, n) int64.

        Draw i ~ q', then j ~ M[i, :]; the marginal of j is exactly p'. Verify with p'(j) (e.g.
        :func:`verify` with ``self.proposal(q_prime)``), never with M_ij or q'(i). ``rng`` follows
        the package convention (per-row seeds), so a batch equals the loop over its rows.
        """
        rows, batched = self._q_prime(q_prime)
        n = check.count(n)
        draws = _rdk.sample(self.indptr, self.indices, self.values, rows, n, check.row_seeds(rng, rows.shape[0]))
        return _unbatch(draws, batched)


def _calibration_samples(samples) -> np.ndarray:
    array = np.asarray(samples)
    if array.ndim != 2 or not (np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)):
        raise ValueError(f"'samples' must be a 2-D numeric array (contexts, V), got shape {array.shape}, "
                         f"dtype {array.dtype}")
    if array.shape[0] < 2 or array.shape[1] < 1:
        raise ValueError(f"'samples' needs at least 2 contexts and 1 token, got shape {array.shape}")
    array = np.ascontiguousarray(array, dtype=np.float64)
    if not np.all(np.isfinite(array)):
        r, c = np.argwhere(~np.isfinite(array))[0]
        raise ValueError(f"'samples' is not finite at index ({r}, {c})")
    return array


@dataclass(frozen=True)
class AffinityScores:
    """The tau-independent part of Eq. (2): each row's top-k covariance entries.

    ``rows`` (R,): the rows of M that are computed (the shared set I); ``indptr`` (R + 1,),
    ``indices``, ``scores``: Omega_ij for the k largest j of each row. Eq. (2) followed by top-k
    sparsification and row renormalisation equals a softmax over these k entries alone, so one
    :class:`AffinityScores` serves every temperature (:meth:`matrix`, :func:`select_temperature`).
    """

    V: int
    rows: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    scores: np.ndarray

    def matrix(self, tau: float) -> AffinityMatrix:
        """M of Eq. (2) at temperature ``tau`` > 0: softmax(Omega_i / tau) on the kept entries of each
        row in ``rows``, identity rows elsewhere (spec A3)."""
        if isinstance(tau, (bool, np.bool_)) or not np.isscalar(tau) or not np.isfinite(tau) or tau <= 0:
            raise ValueError(f"'tau' must be a positive finite number, got {tau!r}")
        indptr, indices, values = _rdk.affinity_softmax(self.indptr, self.indices, self.scores, self.rows, self.V,
                                                        float(tau))
        return AffinityMatrix(indptr, indices, values)

    def restrict(self, rows) -> "AffinityScores":
        """The same scores for a subset of ``rows`` (e.g. a smaller kept set)."""
        rows = _ids(rows, "rows", self.V)
        position = np.full(self.V, -1)
        position[self.rows] = np.arange(self.rows.shape[0])
        where = position[rows]
        if np.any(where < 0):
            raise ValueError(f"row {int(rows[where < 0][0])} was not computed in these scores")
        starts, stops = self.indptr[where], self.indptr[where + 1]
        take = np.concatenate([np.arange(a, b) for a, b in zip(starts, stops)]) if rows.size else np.zeros(0, int)
        return AffinityScores(self.V, rows, np.concatenate([[0], np.cumsum(stops - starts)]),
                              self.indices[take], self.scores[take])


OMEGA_KINDS = ("covariance", "correlation")


def affinity_scores(samples, top_k: int, rows=None, omega: str = "covariance") -> AffinityScores:
    """Top-k entries of rows of Omega, computed from calibration ``samples`` (K, V) across contexts.

    ``samples``: the calibration vectors whose covariance is Omega: the target's **logits** by
    default (spec A1; then tau is on the logit-covariance scale, O(1-10)), or target probabilities
    (covariances ~1e-6, tau must be as small). ``omega``: ``"covariance"`` (the sample covariance,
    the spec's default reading of Eq. 2) or ``"correlation"`` (the covariance normalised by the
    standard deviations, Appendix C.3's "normalized covariance"; its diagonal 1 is the row maximum,
    so tau -> 0 tends to M = identity, i.e. TLI). ``top_k``: entries kept per row (ties: smaller
    column id). ``rows``: the rows to compute (default all V; pass the shared set I). Never forms
    a V x V matrix: O(K R V) time, O(K V + R top_k) memory.
    """
    samples = _calibration_samples(samples)
    V = samples.shape[1]
    top_k = check.count(top_k, "top_k")
    if top_k > V:
        raise ValueError(f"'top_k' = {top_k} exceeds the vocabulary size {V}")
    rows = np.arange(V, dtype=np.int64) if rows is None else _ids(rows, "rows", V)
    if np.unique(rows).shape[0] != rows.shape[0]:
        raise ValueError("'rows' has repeated ids")
    if omega not in OMEGA_KINDS:
        raise ValueError(f"'omega' must be one of {OMEGA_KINDS}, got {omega!r}")
    if omega == "correlation":  # the covariance of standardised samples is the correlation
        std = samples.std(axis=0, ddof=1)
        constant = rows[std[rows] == 0]
        if constant.size:
            raise ValueError(f"token {int(constant[0])} has the same calibration value in every context: its "
                             "correlation row is undefined")
        samples = (samples - samples.mean(axis=0)) / np.where(std > 0, std, 1.0)
    indptr, indices, scores = _rdk.covariance_top_k(samples, rows, top_k)
    return AffinityScores(V, rows, indptr, indices, scores)


def select_temperature(scores: AffinityScores, taus, p, q_prime) -> Tuple[float, np.ndarray]:
    """The tau in ``taus`` maximising the mean acceptance sum min(p, M(tau)^T q') on held-out pairs.

    ``p``, ``q_prime``: (B, V) held-out target distributions and TLI outputs (not the contexts
    used for ``scores``). Returns ``(best_tau, mean_acceptance)`` with one mean per tau
    (the first tau wins ties).
    """
    taus = np.atleast_1d(np.asarray(taus, dtype=np.float64))
    if taus.ndim != 1 or taus.size == 0:
        raise ValueError("'taus' must be a non-empty list of temperatures")
    p = check.probabilities(p, "p", ndims=(2,))
    q_prime = check.probabilities(q_prime, "q_prime", ndims=(2,))
    if p.shape != q_prime.shape or p.shape[1] != scores.V:
        raise ValueError(f"'p' {p.shape} and 'q_prime' {q_prime.shape} must both be (B, {scores.V})")
    means = np.array([np.mean(acceptance_rate(p, scores.matrix(tau).proposal(q_prime))) for tau in taus])
    return float(taus[int(np.argmax(means))]), means


def rdk_proposal(q_prime, M: AffinityMatrix) -> np.ndarray:
    """Full RDK (Algorithm 1): p' = M^T q'; same as ``M.proposal(q_prime)``."""
    return M.proposal(q_prime)


# ----------------------------------------------------------------------------- first-order RDK

def taylor_proposal(q_prime, prior, n_eff: Optional[float] = None) -> np.ndarray:
    """First-order RDK, [OOV] Eq. (3), verbatim: (V,) or (B, V).

    theta = prior . q'; ptilde_t = (n_eff q'_t + theta prior_t) / (n_eff + prior_t); normalised.
    ``prior`` (V,) >= 0 stands for the paper's p: a context-free prior (:func:`unigram_prior`,
    :func:`leading_component_prior`), since the live target is unknown at draft time (spec A7);
    passing the true p is an oracle, valid only for metrics. ``n_eff`` > 0 is the paper's N,
    default V = |T| (faithful). Warning (spec A6, Theorem 5.4): ``||p_Taylor - q'||_1 <= 2/n_eff``
    and ``|alpha_Taylor - alpha_TLI| <= 1/n_eff``; with n_eff = |T| it is TLI to ~1/|T|, and it
    approximates M^T q' only when q' is close to uniform. O(V), no matrix.
    """
    rows, batched = _rows(q_prime, "q_prime")
    V = rows.shape[1]
    prior = _nonnegative_vector(prior, "prior", V)
    n_eff = float(V if n_eff is None else n_eff)
    if not np.isfinite(n_eff) or n_eff <= 0:
        raise ValueError(f"'n_eff' must be a positive finite number, got {n_eff!r}")
    return _unbatch(_rdk.taylor(rows, prior, n_eff), batched)


def unigram_prior(token_counts) -> np.ndarray:
    """The target unigram distribution from corpus counts (V,): counts / sum."""
    counts = _nonnegative_vector(token_counts, "token_counts")
    if counts.sum() <= 0:
        raise ValueError("'token_counts' are all zero")
    return counts / counts.sum()


def leading_component_prior(samples) -> np.ndarray:
    """|leading principal component of Omega|, normalised to sum 1 (V,): the proof of Theorem 5.4
    assumes Omega is dominated by one component aligned with p. ``samples`` (K, V) as in
    :func:`affinity_scores`; costs one thin SVD of the centred samples (O(K^2 V))."""
    samples = _calibration_samples(samples)
    centred = samples - samples.mean(axis=0)
    if not np.any(centred):
        raise ValueError("'samples' do not vary across contexts: Omega is zero")
    component = np.abs(np.linalg.svd(centred, full_matrices=False)[2][0])
    return component / component.sum()


# ----------------------------------------------------------------------------- verification

def transport(p, proposal, drafts) -> np.ndarray:
    """Exact output law of speculative sampling with ``proposal`` as the draft law: (V,) or (B, V).

    Accept ratio min(1, p(d) / proposal(d)), residual (p - proposal)^+ over the whole target
    vocabulary. ``drafts``: (1,) or (B, 1). Lossless: sum_d proposal(d) transport(p, proposal, d) = p.
    """
    return verifier("sps").transport(p, proposal, drafts)


def verify(p, proposal, drafts, rng: check.RngLike = None):
    """One verified token per row with ``proposal`` (TLI, RDK p', first-order RDK) used everywhere.

    ``p``, ``proposal`` (V,) or (B, V); ``drafts`` (1,) or (B, 1), drawn from ``proposal``.
    Returns ``(token, accepted)`` like :meth:`multidraft.Verifier.verify` (the ``"sps"`` verifier).
    """
    return verifier("sps").verify(p, proposal, drafts, rng)


def verify_block(p, proposals, drafts, rng: check.RngLike = None) -> np.ndarray:
    """Verify one draft block of lookahead L: the emitted tokens (between 1 and L + 1), int64.

    ``p`` (L + 1, V): the target at the L + 1 positions of the drafted block (from one target
    forward pass); ``proposals`` (L, V): the proposal each draft was sampled from; ``drafts`` (L,).
    Drafts are verified in order by speculative sampling with the proposal; the first rejection
    emits a residual token and ends the block; if all L are accepted the bonus token is drawn
    from p[L] (spec §2.2).
    """
    p = check.probabilities(p, "p", ndims=(2,))
    proposals = check.probabilities(proposals, "proposals", ndims=(2,))
    L = proposals.shape[0]
    if p.shape != (L + 1, proposals.shape[1]):
        raise ValueError(f"'p' must be (L + 1, V) = ({L + 1}, {proposals.shape[1]}), got {p.shape}")
    drafts = check.tokens(drafts, p.shape[1], L, ndims=(1,))
    seeds = check.row_seeds(rng, L + 1)
    emitted = []
    for j in range(L):
        token, accepted = verify(p[j], proposals[j], drafts[j:j + 1], int(seeds[j]))
        emitted.append(token)
        if not accepted:
            return np.array(emitted, dtype=np.int64)
    bonus = _core.sample_rows(p[L:], seeds[L:])
    return np.array(emitted + [int(bonus[0])], dtype=np.int64)


def _discard_extension(p, q_mask):
    """The masked baseline as plain speculative sampling over V + 1 tokens: the extra token V holds
    the dropped drafter mass 1 - q(I) and has target probability 0, so drafting it is always a
    rejection and the residual is (p - q_mask)^+ (the "discard" scheme, spec §2.3).

    Returns ``(p_ext, q_ext)`` as (B, V + 1) and whether the caller passed a batch."""
    p2, batched = _rows(p, "p")
    q = check.as_array(q_mask, "q_mask")[0]  # a CPU torch tensor too, like p
    if q.shape != (p2.shape if batched else p2.shape[1:]):
        raise ValueError(f"'q_mask' must have the shape of 'p' {np.shape(p)}, got {q.shape}")
    q2 = np.asarray(q, dtype=np.float64).reshape(p2.shape)
    if not np.all(np.isfinite(q2)) or np.any(q2 < 0) or np.any(q2.sum(axis=1) > 1 + check.SUM_TOLERANCE):
        raise ValueError("'q_mask' must be finite, >= 0 and sum to at most 1 (the masked drafter mass q(I))")
    dropped = np.maximum(1.0 - q2.sum(axis=1, keepdims=True), 0.0)
    q_ext = np.hstack([q2, dropped])
    q_ext /= q_ext.sum(axis=1, keepdims=True)  # only rescales round-off above 1
    return np.hstack([p2, np.zeros((p2.shape[0], 1))]), q_ext, batched


def _discard_drafts(drafts, V: int, batched: bool) -> np.ndarray:
    """Drafts of the discard sampler, with -1 (a dropped drafter token) as the extra token V."""
    d = np.asarray(drafts)
    if d.ndim != (2 if batched else 1) or d.shape[-1] != 1:
        raise ValueError(f"'drafts' must be {'(B, 1)' if batched else '(1,)'}, got shape {d.shape}")
    return check.tokens(np.where(d == -1, V, d), V + 1, 1, ndims=(d.ndim,))


def masked_transport(p, q_mask, drafts) -> np.ndarray:
    """Exact output law of the masked baseline's discard sampler: (V,) or (B, V).

    ``q_mask`` = :meth:`VocabularyMap.masked` (sums to q(I) <= 1); a draft is a shared target id,
    or -1 when the unpruned drafter drew a token outside I (probability 1 - q(I)), which is an
    immediate rejection. Residual (p - q_mask)^+; acceptance sum min(p, q_mask).
    """
    p_ext, q_ext, batched = _discard_extension(p, q_mask)
    V = p_ext.shape[1] - 1
    d = _discard_drafts(drafts, V, batched)
    laws = verifier("sps").transport(p_ext, q_ext, d.reshape(-1, 1))
    return _unbatch(laws[:, :V], batched)


def masked_verify(p, q_mask, drafts, rng: check.RngLike = None):
    """One verified token per row of the masked baseline (see :func:`masked_transport`)."""
    p_ext, q_ext, batched = _discard_extension(p, q_mask)
    d = _discard_drafts(drafts, p_ext.shape[1] - 1, batched)
    token, accepted = verifier("sps").verify(p_ext, q_ext, d.reshape(-1, 1), rng)
    return (token, accepted) if batched else (int(token[0]), bool(accepted[0]))


def masked_acceptance(p, q_mask) -> Union[float, np.ndarray]:
    """alpha_mask = sum min(p, q_mask) (q_mask not renormalised): float or (B,)."""
    p_ext, q_ext, batched = _discard_extension(p, q_mask)
    alpha = np.minimum(p_ext, q_ext).sum(axis=1)
    return alpha if batched else float(alpha[0])


__all__ = [
    "AffinityMatrix",
    "AffinityScores",
    "MAX_DENSE_VOCAB",
    "OMEGA_KINDS",
    "VocabularyMap",
    "affinity_scores",
    "frequency_ranked",
    "leading_component_prior",
    "masked_acceptance",
    "masked_transport",
    "masked_verify",
    "rdk_proposal",
    "select_temperature",
    "taylor_proposal",
    "transport",
    "unigram_prior",
    "verify",
    "verify_block",
]

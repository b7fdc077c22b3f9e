"""The token-affinity matrix M as CSR ([OOV] Assumption 4.1, Eq. 2), its calibration and the full
RDK proposal p' = M^T q' (Algorithm 1)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

import numpy as np

from .. import _device
from .. import _validation as check
from ..otlp import acceptance_rate
from . import _on_device
from ._common import _calibration_samples, _ids, _rdk, _rows, _unbatch, load_arrays, save_arrays

#: The largest V for which :meth:`AffinityMatrix.to_dense` and ``from_dense`` build V x V arrays.
MAX_DENSE_VOCAB = 8192


class AffinityMatrix:
    """A row-stochastic V x V matrix M in CSR form ([OOV] Assumption 4.1).

    ``indptr`` (V + 1,) int64, ``indices`` (nnz,) column ids, ``values`` (nnz,) float64. Entries
    must be finite and >= 0 and each row must sum to 1 within 1e-6; with ``renormalise=True``
    rows are divided by their sums instead and empty or all-zero rows become e_i (so that M stays row-stochastic).
    """

    def __init__(self, indptr, indices, values, renormalise: bool = False):
        indptr = check.as_array(indptr, "indptr")[0]  # tensors are read on the host: M is built once
        if indptr.ndim != 1 or indptr.shape[0] < 2 or not np.issubdtype(indptr.dtype, np.integer):
            raise ValueError(f"'indptr' must be a 1-D integer array of length V + 1 >= 2, got shape {indptr.shape}")
        indptr = np.ascontiguousarray(indptr, dtype=np.int64)
        V = indptr.shape[0] - 1
        values = check.as_array(values, "values")[0]
        indices = check.as_array(indices, "indices")[0]
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
        self._columns = _device.PerDevice(self._column_classes)  # M's columns by width class, per device
        self._rows = _device.PerDevice(self._csr_tensors)  # M's CSR arrays per device, for row draws
        self._widest = int(np.diff(indptr).max(initial=1))  # the longest row: the draws' padded width
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
        M = check.as_array(M, "M")[0]
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

    def save(self, path) -> None:
        """Write M (CSR) to the .npz file ``path`` (for :meth:`load`, e.g. in another process)."""
        save_arrays(path, "AffinityMatrix", indptr=self.indptr, indices=self.indices, values=self.values)

    @classmethod
    def load(cls, path) -> "AffinityMatrix":
        """An M written by :meth:`save`, checked as the constructor checks it (row-stochastic)."""
        arrays = load_arrays(path, "AffinityMatrix", ("indptr", "indices", "values"))
        return cls(arrays["indptr"], arrays["indices"], arrays["values"])

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

    def _check_width(self, width: int) -> None:
        """Refuse a law ``q_prime`` whose last axis is not M's vocabulary."""
        if width != self.V:
            raise ValueError(f"'q_prime' has vocabulary size {width}, but M has {self.V}")

    def _q_prime(self, q_prime):
        rows, batched = _rows(q_prime, "q_prime")
        self._check_width(rows.shape[1])
        return rows, batched

    @_device.tensor_route()
    def proposal(self, q_prime):
        """Full RDK, Algorithm 1: p' = M^T q' over the whole target vocabulary, (V,) or (B, V).

        ``q_prime`` is the TLI output. Cost O(V + nnz of the rows where q' > 0). A torch tensor
        gives a float64 tensor on its device, computed there, each row the same alone as in any batch
        (:meth:`_column_classes`).
        """
        if _device.on_device(q_prime):
            return self._tensor_proposal(q_prime)
        rows, batched = self._q_prime(q_prime)
        return _unbatch(_rdk.proposal(self.indptr, self.indices, self.values, rows), batched)

    def _tensor_proposal(self, q_prime):
        """:meth:`proposal` of a tensor off the CPU, on its device: p'[:, j] = sum_i M[i, j] q'[:, i],
        each column's entries summed by :func:`multidraft._device.row_sums` (a pairwise tree of
        elementwise additions), so a row gives the same numbers alone as in any batch. A sparse
        product does not: on CUDA its kernel and its order of additions follow the number of rows."""
        import torch

        device = _device.call_device(q_prime=q_prime)
        law = _device.Law(q_prime, "q_prime", device, (1, 2))
        _device.refuse_failed(law)
        self._check_width(law.raw.shape[-1])
        rows = law.rows()
        out = torch.zeros_like(rows)
        for columns, sources, values in self._columns.on(device):
            out[:, columns] = _device.row_sums(rows[:, sources] * values)
        return out if law.raw.dim() == 2 else out[0]

    def _column_classes(self, device):
        """M's columns grouped by their count of stored entries rounded up to a power of two w, on
        ``device``: per class (columns (n,) int64, their entries' rows (n, w) int64, values (n, w)
        float64), padded with zero values. Padding to the class's width, not the widest column's,
        keeps the gathered products within twice M's entries per row of q'."""
        rows = np.repeat(np.arange(self.V, dtype=np.int64), np.diff(self.indptr))
        order = np.lexsort((rows, self.indices))  # by column, then row
        rows = rows[order]
        values = self.values[order]
        counts = np.bincount(self.indices, minlength=self.V)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        widths = 1 << np.ceil(np.log2(np.maximum(counts, 1))).astype(np.int64)
        classes = []
        for width in np.unique(widths[counts > 0]):
            columns = np.flatnonzero((widths == width) & (counts > 0))
            slot = np.arange(width)
            inside = slot < counts[columns, None]
            at = np.where(inside, starts[columns, None] + slot, 0)
            classes.append(tuple(_device.to_device(np.ascontiguousarray(array), device) for array in
                                 (columns, np.where(inside, rows[at], 0), np.where(inside, values[at], 0.0))))
        return classes

    @_device.tensor_route()
    def sample(self, q_prime, n: int = 1, rng: check.RngLike = None) -> np.ndarray:
        """``n`` i.i.d. draws from p' = M^T q' by two-stage sampling: (n,) or (B, n) int64.

        Draw i ~ q', then j ~ M[i, :]; the marginal of j is exactly p'. Verify with p'(j) (e.g.
        :func:`verify` with ``self.proposal(q_prime)``), never with M_ij or q'(i). ``rng`` follows
        the package convention (per-row seeds), so a batch equals the loop over its rows. A torch
        tensor gives int64 tensors on its device, both stages drawn there from a copy of M's rows (the
        tokens differ from the NumPy path's for the same seed, the law does not).
        """
        n = check.count(n)
        if _device.on_device(q_prime):
            draws, batched = _on_device.sample(self, q_prime, n, rng)
        else:
            rows, batched = self._q_prime(q_prime)
            draws = _rdk.sample(self.indptr, self.indices, self.values, rows, n, check.row_seeds(rng, rows.shape[0]))
        return _unbatch(draws, batched)

    def _csr_tensors(self, device):
        """M's (indptr, indices, values) as tensors on ``device`` (writable copies: M's arrays are read-only)."""
        return tuple(_device.to_device(np.array(array, dtype=dtype), device)
                     for array, dtype in ((self.indptr, np.int64), (self.indices, np.int64), (self.values, np.float64)))

    def _row_draws(self, rows, uniforms):
        """One column j ~ M[i, :] per drawn row i of ``rows`` (m,) int64 tensor, by inverse CDF at
        ``uniforms`` (m,) in [0, 1) on the same device (:func:`_device.inverse_cdf_at` over each row's
        stored entries, padded with zeros to the longest row): (m,) int64 tensor there."""
        import torch

        indptr, indices, values = self._rows.on(rows.device)
        starts = indptr[rows].unsqueeze(-1)
        width = torch.arange(self._widest, device=rows.device)
        inside = width < indptr[rows + 1].unsqueeze(-1) - starts
        at = torch.where(inside, starts + width, 0)
        entries = torch.where(inside, values[at], 0.0)
        return indices[starts[:, 0] + _device.inverse_cdf_at(entries, uniforms.unsqueeze(-1))[:, 0]]


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
        row in ``rows``, identity rows elsewhere (Eq. (2) defines only the rows of I; Algorithm 1 takes
        M square)."""
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
    default (the covariance of Eq. (4), z ~ N(mu, Omega); then tau is on the logit-covariance
    scale, O(1-10)), or target probabilities
    (covariances ~1e-6, tau must be as small). ``omega``: ``"covariance"`` (the sample covariance,
    our default reading of Eq. 2) or ``"correlation"`` (the covariance normalised by the
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

"""Compressed problems (docs/design/device-path.md, Sections 2-4): each row's draft support S plus
one outside token of mass p(not S), gathered on the device and solved on the host by the NumPy
path; [CD] Algorithm 2's truncation kept exact; the host's side of a verify call and of a draw."""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import numpy as np

from .. import _validation as check
from . import host_body
from .tensors import leading, read_together, row_sums, to_device, to_host, torch_module
from .laws import Law


class Compressed:
    """A call's rows compressed to their draft support (docs/design/device-path.md, Section 2).

    On the device: ``support`` (B, V) bool (the tokens kept one by one), ``ids`` (B, K) int64 (the
    kept tokens ascending, padded with 0), ``p`` (B, V) the target as passed and ``outside`` (B,) its
    float64 sum outside the kept tokens (the law is ``p / sum(p)``: the ratios that spread the
    outside mass need no normalisation). On the host:
    ``count`` (B,) kept tokens per row, ``host_ids`` (B, K), ``p_c`` (B, K + 1) (the kept tokens'
    p, then the outside mass at column ``count[b]``; zeros after it), ``q_c`` (B, rows, K + 1).
    Rows are grouped by ``count`` (:meth:`groups`), so a row's compressed problem is the same
    whether it is verified alone or in a batch.
    """

    def __init__(self, target: Optional[Law], draft: Law, keep=None):
        self.p = target.values if target is not None else None
        self.p_c = None
        support = (draft.values > 0).any(1)
        if keep is not None and self.p is not None:
            support = support | keep(self.p, support)
        self.support, self.V = support, support.shape[-1]
        counts = support.sum(-1)
        self.count = self._checked_counts([law for law in (target, draft) if law is not None], counts)
        K = int(self.count.max())
        self.ids = self._support_ids(support, K)
        self._gather(target, draft, counts, K)

    @classmethod
    def on_host(cls, count: np.ndarray, host_ids: np.ndarray, p_c: np.ndarray, q_c: np.ndarray, V: int) -> "Compressed":
        """The host side only (:meth:`groups`, :meth:`problem`, :meth:`drafts`) of rows compressed
        elsewhere (the generation loop's one read: :mod:`multidraft._device.loop`), in the layout above."""
        compressed = cls.__new__(cls)
        compressed.count, compressed.host_ids, compressed.p_c = count, host_ids, p_c
        compressed.q_c, compressed.V = q_c, V
        return compressed

    @staticmethod
    def _checked_counts(laws: List[Law], counts) -> np.ndarray:
        """The kept tokens per row, read with the laws' refusal flags (the call's first host read)."""
        torch = torch_module()
        header = to_host(torch.cat([law.bad.reshape(1) for law in laws] + [counts]).to(torch.int64))
        for law, failed in zip(laws, header):
            if failed:
                law.refuse()
        return header[len(laws):]

    def _gather(self, target: Optional[Law], draft: Law, counts, K: int) -> None:
        """Gather the compressed rows on the device, normalised, and read them in one O(k) host read."""
        torch = torch_module()
        q = draft.values
        B, models, V = q.shape
        zero = torch.zeros(B, 1, dtype=torch.float64, device=q.device)
        valid = torch.arange(K, device=q.device) < counts.unsqueeze(-1)
        columns = [self.ids]
        if self.p is not None:
            scale = target.scale.unsqueeze(-1)
            p_kept = torch.where(valid, self.p.gather(1, self.ids).to(torch.float64) / scale, 0.0)
            self.outside = row_sums(torch.where(self.support, 0, self.p))  # summed, not 1 - p(S): no cancellation
            p_out = (self.outside.unsqueeze(-1) / scale)
            columns.append(torch.cat([p_kept, zero], 1).scatter(1, counts.unsqueeze(-1), p_out))
        q_kept = q.gather(2, self.ids.unsqueeze(1).expand(B, models, K)).to(torch.float64) / draft.scale.unsqueeze(-1)
        q_kept = torch.where(valid.unsqueeze(1), q_kept, 0.0)
        columns.append(torch.cat([q_kept, zero.unsqueeze(1).expand(B, models, 1)], 2))
        read = read_together(*columns)
        self.host_ids, self.q_c = read[0], read[-1]
        if self.p is not None:
            self.p_c = read[1]

    def _support_ids(self, support, K: int):
        """(B, K) ids of the kept tokens, ascending, padded with 0: the row-major nonzeros of
        ``support``, whose number is known from the counts (no host read)."""
        torch = torch_module()
        B, device = support.shape[0], support.device
        total = int(self.count.sum())
        where = torch.nonzero_static(support, size=total)  # (total, 2): (row, token), row-major
        starts = to_device(np.concatenate([[0], np.cumsum(self.count)[:-1]]), device)
        rows = where[:, 0]
        ids = torch.zeros(B, K, dtype=torch.int64, device=device)
        ids[rows, torch.arange(total, device=device) - starts[rows]] = where[:, 1]
        return ids

    def groups(self) -> List[Tuple[np.ndarray, int]]:
        """(rows, k) for each number k of kept tokens, rows ascending."""
        values, inverse = np.unique(self.count, return_inverse=True)
        return [(np.flatnonzero(inverse == g), int(k)) for g, k in enumerate(values)]

    def problem(self, rows: np.ndarray, k: int, independent: bool):
        """The host's compressed ``(p (G, k + 1), q (G, k + 1) or (G, n, k + 1))`` of these rows."""
        p = self.p_c[rows, :k + 1] if self.p_c is not None else None
        q = self.q_c[rows, :, :k + 1]
        return p, (q if independent else q[:, 0])

    def drafts(self, drafts: np.ndarray, rows: np.ndarray, k: int) -> np.ndarray:
        """Draft ids (G, n) in the compressed ids of these rows; a token outside S becomes the outside
        id k (draft mass 0: the core refuses it as it refuses such a draft on the full vocabulary)."""
        G, V = len(rows), self.V
        offset = np.arange(G)[:, None] * V  # rows side by side: one sorted array of every row's ids
        kept = (self.host_ids[rows, :k] + offset).ravel()
        wanted = drafts[rows] + offset
        at = np.minimum(np.searchsorted(kept, wanted), kept.size - 1)
        return np.where(kept[at] == wanted, at - np.arange(G)[:, None] * k, k)

    def spread(self, laws: np.ndarray):
        """Full laws (B, V) on the device from compressed ones (B, K + 1), outside mass at column
        ``count[b]``: the kept tokens scattered, the outside mass spread in proportion to p."""
        torch = torch_module()
        device = self.ids.device
        B, K = self.ids.shape
        law_c, count = to_device(laws, device), to_device(self.count, device).unsqueeze(-1)
        kept = torch.where(torch.arange(K, device=device) < count, law_c[:, :K], 0.0)
        full = torch.zeros(self.p.shape, dtype=torch.float64, device=device)
        full.scatter_add_(1, self.ids, kept)  # the padding adds 0 to token 0
        mass = law_c.gather(1, count)
        outside = self.outside.unsqueeze(-1)
        share = torch.where(outside > 0, mass / outside, 0.0)  # p(y) / p_out = p[y] / outside; 0/0 guarded
        return torch.where(self.support, full, self.p * share)


def host_tokens(drafts, V: int, n: Optional[int], ndims) -> np.ndarray:
    """Draft ids on the host (O(n) per row), checked as :func:`_validation.tokens` checks them."""
    if isinstance(drafts, torch_module().Tensor):
        drafts = to_host(drafts)
    return check.tokens(drafts, V, n, ndims=ndims)


# ----------------------------------------------------------------------------- a truncated [CD] Algorithm 2

def kept_outside(verifier):
    """The tokens outside S a verifier's compressed problem keeps one by one (None: none).

    ``"khisti"`` with ``truncation=s`` ranks every token by p - q^2 and gives the s best free
    weights ([CD] Algorithm 2): tokens outside S can take those places. Keeping the s most probable
    of them (ties by lowest id, as the core's stable sort) keeps every place that matters
    (docs/design/device-path.md, Section 4)."""
    s = getattr(verifier, "truncation", -1)
    if verifier.name != "khisti" or s <= 0:
        return None

    def keep(p, support):
        torch = torch_module()
        outside = torch.where(support, -1.0, p)  # p >= 0: kept tokens rank below every outside one
        places = min(s, p.shape[-1])
        return leading(outside, outside.topk(places, -1).values[:, -1:], places) & ~support

    return keep


def truncation_for(verifier, p_c: np.ndarray, q_c: np.ndarray, k: int) -> int:
    """The truncation of a row's compressed [CD] Algorithm 2: s, or s + 1 when the outside token
    (ranked last on ties, having the largest id) would take one of the s places, which then holds
    the s best kept tokens and the outside token, whose draft mass 0 gives it no pair."""
    s = verifier.truncation
    keys = p_c[:k + 1] - q_c[:k + 1] ** 2
    return s + 1 if np.count_nonzero(keys[:k] >= keys[k]) < s else s


# ----------------------------------------------------------------------------- the host's side of a call

def solver_groups(verifier, compressed: Compressed, independent: bool):
    """(rows, k, the verifier solving them, p_c, q_c) per group of rows with one compressed shape."""
    for rows, k in compressed.groups():
        p_c, q_c = compressed.problem(rows, k, independent)
        if kept_outside(verifier) is None or p_c is None:
            yield rows, k, verifier, p_c, q_c
            continue
        truncations = np.array([truncation_for(verifier, p_c[g], q_c[g], k) for g in range(len(rows))])
        for s in np.unique(truncations):
            part = truncations == s
            yield rows[part], k, type(verifier)(truncation=int(s)), p_c[part], q_c[part]


def verified_on_host(verifier, compressed: Compressed, d: np.ndarray, seeds: np.ndarray):
    """The host's side of a verify call on compressed rows: (token ids (B,), accepted (B,), whether
    the token is the outside one (B,), whose id the caller draws on the device: Section 6)."""
    B = d.shape[0]
    tokens, accepted, outside = np.zeros(B, np.int64), np.zeros(B, bool), np.zeros(B, bool)
    for rows, k, solver, p_c, q_c in solver_groups(verifier, compressed, verifier.scheme_kind == "independent"):
        token, hit = host_body(solver.verify)(p_c, q_c, compressed.drafts(d, rows, k), seeds[rows])
        outside[rows] = token == k
        tokens[rows] = compressed.host_ids[rows, np.minimum(token, k - 1)]
        accepted[rows] = hit
    return tokens, accepted, outside


def drawn_on_host(verifier, compressed: Compressed, n: int, rngs: Sequence) -> np.ndarray:
    """(B, n) int64 token ids: row b drawn by ``verifier.draft`` from its compressed law with
    ``rngs[b]`` (the outside token has draft mass 0, so it is never drawn)."""
    out = np.empty((len(rngs), n), dtype=np.int64)
    for rows, k in compressed.groups():
        _, q_c = compressed.problem(rows, k, verifier.scheme_kind == "independent")
        for row, law in zip(rows, q_c):
            out[row] = compressed.host_ids[row, host_body(verifier.draft)(law, n, rngs[row])]
    return out


# ----------------------------------------------------------------------------- from a read of the top entries

def top_entries(q, support: int):
    """(ids (N, m), q there (N, m)), most probable first, m = min(support + 1, V): every token of q's
    support when it has at most ``support`` tokens (:func:`beyond_support`)."""
    values, ids = q.topk(min(support + 1, q.shape[-1]), dim=-1)
    return ids, values


def beyond_support(values: np.ndarray, support: int) -> bool:
    """Whether a row of the top values (N, m) of :func:`top_entries` has more than ``support`` tokens: its
    (support + 1)-th value is positive."""
    return values.shape[1] > support and bool((values[:, support] > 0).any())


def compressed_from_top(ids: np.ndarray, values: np.ndarray, support: int, V: int, p_kept=None,
                        p_out=None) -> Compressed:
    """The host side of :class:`Compressed` from the top tokens of :func:`top_entries` (ids and q (N, m)),
    and for a verify call p at them (N, m - 1 or more) and the outside mass (N,): each row's support
    ids ascending, its q (then the outside token's 0) and p (then the outside mass)."""
    rows = []
    for row, (row_ids, row_q) in enumerate(zip(ids[:, :support].astype(np.int64), values[:, :support])):
        kept = np.flatnonzero(row_q > 0)
        rows.append((row, kept[np.argsort(row_ids[kept], kind="stable")]))
    count = np.array([len(kept) for _, kept in rows])
    K = int(count.max())
    host_ids, q_c = np.zeros((len(rows), K), np.int64), np.zeros((len(rows), 1, K + 1))
    p_c = None if p_kept is None else np.zeros((len(rows), K + 1))
    for row, kept in rows:
        k = len(kept)
        host_ids[row, :k], q_c[row, 0, :k] = ids[row, kept], values[row, kept]
        if p_c is not None:
            p_c[row, :k], p_c[row, k] = p_kept[row, kept], p_out[row]
    return Compressed.on_host(count, host_ids, p_c, q_c, V)

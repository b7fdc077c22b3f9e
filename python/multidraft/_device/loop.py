"""The generation loop's calls on a device: few kernels, one host read per drafted depth and one for
a round's whole verification (docs/design/device-path.md, Section 10).

On a GPU a round's cost outside the models is a count: kernels launched (each a fixed cost,
whatever the size) and host reads (each a synchronisation that drains the device's queue). The
public entry points check every argument and read each result; the loop's laws are its own (it
computed and normalised them), its drafts were drawn from them, and it reads the host anyway once
per depth. So here:

- :class:`Checks` carries the refusal flags of the laws the loop computed (NaN logits, a row all
  -inf) to the loop's next host read, instead of one read per law;
- :func:`draft_all` reads the draft laws of a depth compressed to their support, whose size the
  loop bounds (its draft top-k), in one read, and draws every node's drafts on the host exactly as
  :meth:`Verifier.draft` draws the compressed law;
- :func:`verify_all` verifies every node of a round's trees, and draws every leaf's bonus token,
  before the walk down the trees knows which are reached (an unreached node's draw is simply
  unused, so the law is unchanged): the closed-form verifiers on the device, the others from their
  compressed problems, all read in ONE host read with the round's checks.
"""
from __future__ import annotations

from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np

from . import closed_form, on_device
from .calls import draft_rows as checked_draft_rows, verify as checked_verify
from .checked import compressible as takes_compressed
from .compressed import beyond_support, compressed_from_top, drawn_on_host, top_entries, verified_on_host
from .sampling import inverse_cdf_at, row_uniforms, sample_rows
from .tensors import read_together, row_sums, to_device, to_host, torch_module


class Checks:
    """Refusal flags (0-d bool tensors on the device) of laws the loop computed, each with the function
    that raises its ValueError; :meth:`read` reads them with the loop's next host read."""

    def __init__(self):
        self._flags: List = []
        self._explain: List[Callable[[], None]] = []

    def add(self, flag, explain: Callable[[], None]) -> None:
        self._flags.append(flag)
        self._explain.append(explain)

    def read(self, *tensors) -> List[np.ndarray]:
        """The pending flags and ``tensors`` in ONE host read (:func:`read_together`: no conversion
        kernels); the first failed check raises its error. Returns the tensors as arrays of their
        shapes (float64 for floats, int64 for integers and bools)."""
        flags, explain = self._flags, self._explain
        if not flags and not tensors:
            return []
        self._flags, self._explain = [], []
        arrays = read_together(*([torch_module().stack(flags)] if flags else []), *tensors)
        if flags:
            failed = np.flatnonzero(arrays.pop(0))
            if failed.size:
                explain[failed[0]]()
        return arrays


def draft_all(calls: Sequence[Tuple[object, object, int, Sequence[int]]], support: Optional[int],
              checks: Checks) -> List[np.ndarray]:
    """For each call (verifier, q (N, V), n, seeds (N,)): (N, n) int64 draft ids on the host, row i
    drawn as ``verifier.draft(q[i], n, seeds[i])`` draws it, for the loop's draft laws ``q`` (float64,
    normalised), whose supports have at most ``support`` tokens (None: unbounded). On a device the
    top ``support + 1`` of every call's rows and the loop's checks come in ONE host read, then each
    row is drawn from its compressed law; a call without a bound, or with a support larger than
    ``support`` (ties at the loop's top-k cut), takes the checked call."""
    bounded = [on_device(q) and support is not None and verifier.scheme_kind != "independent"
               for verifier, q, _, _ in calls]
    arrays = checks.read(*(t for (_, q, _, _), b in zip(calls, bounded) if b for t in top_entries(q, support)))
    out = []
    for (verifier, q, n, seeds), b in zip(calls, bounded):
        ids, values = (arrays.pop(0), arrays.pop(0)) if b else (None, None)
        if not b or beyond_support(values, support):
            out.append(checked_draft_rows(verifier, q, n, seeds))
            continue
        out.append(drawn_on_host(verifier, compressed_from_top(ids, values, support, q.shape[-1]), n,
                                 [int(seed) for seed in seeds]))
    return out


class _Staged:
    """One group of rows staged for :func:`verify_all`: what to read, and how to finish on the host."""

    def __init__(self, verifier, p, q, drafts: np.ndarray, seeds: np.ndarray, support: Optional[int]):
        self.verifier, self.p, self.q, self.drafts, self.seeds = verifier, p, q, drafts, seeds
        torch = torch_module()
        device = p.device
        self.closed = verifier.name in closed_form.NAMES
        self.support = support
        if self.closed:
            at = to_device(drafts, device)
            uniforms = to_device(row_uniforms(seeds, closed_form.uniforms_per_row(verifier)), device)
            token, accepted = closed_form.draw(verifier, p, q, at, uniforms)
            self.tensors = [token, accepted]
        elif support is not None and takes_compressed(verifier):
            ids, values = top_entries(q, support)
            outside = torch.where(q > 0, 0.0, p)
            # the outside mass summed, not 1 - p(S) (no cancellation); its token drawn from the row's seed
            kept = ids[:, :support]
            self.tensors = [kept, values, p.gather(1, kept), row_sums(outside),
                            inverse_cdf_at(outside, to_device(row_uniforms(seeds), device))[:, 0]]
        else:
            self.tensors = []

    def finish(self, arrays: List[np.ndarray]) -> Tuple[np.ndarray, np.ndarray]:
        """(tokens (G,), accepted (G,)) on the host from the read ``arrays`` of :attr:`tensors`."""
        if self.closed:
            return arrays[0].astype(np.int64), arrays[1] > 0
        if not arrays or beyond_support(arrays[1], self.support):  # no bound on the support: the checked call
            token, accepted = checked_verify(self.verifier, self.p, self.q, self.drafts, self.seeds)
            return to_host(token), to_host(accepted)
        ids, values, p_kept, p_out, outside = arrays
        problem = compressed_from_top(ids, values, self.support, self.p.shape[-1], p_kept, p_out)
        tokens, accepted, drawn_outside = verified_on_host(self.verifier, problem, self.drafts, self.seeds)
        return np.where(drawn_outside, outside.astype(np.int64), tokens), accepted


def verify_all(groups: Sequence[Tuple[object, object, object, np.ndarray, np.ndarray]], leaves, leaf_seeds: np.ndarray,
               support: Optional[int], checks: Checks):
    """Every group of a round verified and every leaf's bonus token drawn, in one host read on a device.

    ``groups``: (verifier, p (G, V), q (G, V), drafts (G, n) on the host, seeds (G,)) per verifier and
    group size: the loop's target and draft laws (float64, normalised) at the nodes, the drafts drawn
    from q there; ``leaves`` (L, V): the target laws at the leaves (None: no leaf), ``leaf_seeds``
    (L,); ``support``: the bound on the draft supports (:func:`draft_all`). Returns ([(tokens (G,),
    accepted (G,)) per group], leaf tokens (L,)), on the host; a group's rows are verified as
    ``verifier.verify(p, q, drafts, seeds)`` verifies them (the compressed problem of Section 2, or
    the closed form of Section 9)."""
    staged = [_Staged(*group, support) for group in groups]
    leaf = [] if leaves is None else [sample_rows(leaves, leaf_seeds)]
    arrays = checks.read(*(t for s in staged for t in s.tensors), *leaf)
    results, at = [], 0
    for s in staged:
        results.append(s.finish(arrays[at:at + len(s.tensors)]))
        at += len(s.tensors)
    return results, (arrays[at].astype(np.int64) if leaf else np.zeros(0, np.int64))

"""The public verify call on a device in ONE host read (docs/design/device-path.md, Section 11).

``md.verifier(name).verify(p, q, drafts, seeds)`` takes user data: every rule of the NumPy path is
checked, with its message. The checks need the device's numbers (row sums, minima, the drafts'
values), and each read of them synchronises with the device; so a call computes the checks' numbers
and what the host needs next (for a compressed problem its inputs), reads it all in one host read,
then checks on the host, in the order of the checked calls, and explains a refusal by recomputing
its message (further reads, on the refusing path only):

- :class:`Call` stages the arguments: shapes checked on the host; p, q (and p outside q's support,
  for a compressed problem) summed in ONE stacked :func:`stacked_row_sums`; the drafts kept on the
  device when they come as an integer tensor;
- ``"sps"``, ``"naive"`` and ``"topk"`` read only the checks, then draw on the device
  (:mod:`multidraft._device.closed_form`): their results stay there;
- the other verifiers read their compressed problem (Section 2) as the generation loop's
  verification does (:mod:`multidraft._device.loop`): the top :data:`SUPPORT_GUESS` + 1 tokens of
  q, p there, the outside mass and a token drawn outside the support, with the checks. A row whose
  support is larger than the guess costs a second read, of the exact support.
"""
from __future__ import annotations

from typing import List, Optional

import numpy as np

from .. import _validation as check
from . import host_integer
from .compressed import compressed_from_top, host_tokens, kept_outside, top_entries, verified_on_host
from .laws import laws
from .sampling import inverse_cdf_at, row_uniforms
from .tensors import begin_call, call_device, read_together, stacked_row_sums, to_device, torch_module

#: The draft support a public call reads at once for a compressed problem: the top SUPPORT_GUESS + 1
#: tokens of each row of q. A generation loop cuts its draft laws to at most 32 tokens ("auto"), so
#: the usual draft top-k fits; a row with more tokens costs a second read (of its exact support).
SUPPORT_GUESS = 64


def _placeholder(shape) -> np.ndarray:
    """Zeros of ``shape`` (int64): the drafts as :func:`_validation.tokens` checks their shape before
    their values are read (the same messages; the values are checked after the read)."""
    return np.zeros(tuple(shape), np.int64)


class Call:
    """A public transport or verify call's arguments, staged on the device without a host read.

    After the constructor: ``target``, ``draft`` (:class:`Law`, their sums set), ``n``, ``batched``,
    ``B``, ``V``; ``rows`` the float64 rows of p (B), q (B) and, with ``outside=True``, p outside q's
    support (B) (``support`` (B, V) bool, ``outside`` (B, V) the target as passed, 0 on the support);
    ``d``, the drafts (B, n) on the host once known (now for drafts passed as host arrays or as
    float tensors, after :meth:`read` for integer tensors, which stay on the device until then).
    :meth:`read` reads the checks' numbers with the caller's tensors in ONE host read and refuses
    what the checked calls refuse, in their order: drafts out of range, then p, then q."""

    def __init__(self, verifier, p, q, drafts, outside: bool = False):
        begin_call()
        self.device = call_device(p=p, q=q, drafts=drafts)
        n = verifier._draft_count(drafts, q)
        self.target, self.draft, self.n, self.batched = laws(p, q, n, verifier.scheme_kind, self.device, measure=False)
        self.B, self.V = self.target.values.shape
        self._ndims = (2,) if self.batched else (1,)
        self.d, self._given = self._stage_drafts(drafts)
        p_rows, q_rows = self.target.values, self.draft.values.reshape(-1, self.V)
        parts = [p_rows, q_rows]
        if outside:  # one draft law per row (compressed problems of iid-like schemes)
            self.support = q_rows > 0
            self.outside = p_rows.masked_fill(self.support, 0)  # summed, not 1 - p(S): no cancellation
            parts.append(self.outside)
        self.rows, sums = stacked_row_sums(parts)
        self._laws = len(p_rows) + len(q_rows)  # the rows of p and q, whose minima are checked
        self._minima = self.rows[:self._laws].amin(-1)
        self._sums = sums
        self.target.measured(sums[:self.B])
        self.draft.measured(sums[self.B:self._laws])
        self.host_sums: Optional[np.ndarray] = None

    def _stage_drafts(self, drafts):
        """(drafts (B, n) checked on the host, or None; the integer tensor to read with the call, or
        None). An integer tensor's shape is checked now, its values with the call's read; other
        drafts are read and checked now as :func:`host_tokens` does (host arrays: no device read)."""
        if isinstance(drafts, torch_module().Tensor) and host_integer(drafts.dtype):
            check.tokens(_placeholder(drafts.shape), self.V, self.n, ndims=self._ndims)
            if drafts.numel() // self.n == self.B:
                return None, drafts.detach()
        d = host_tokens(drafts, self.V, self.n, self._ndims).reshape(-1, self.n)
        if d.shape[0] != self.B:
            raise ValueError(f"'drafts' has batch size {d.shape[0]}, but 'p' has {self.B}")
        return d, None

    def normalised(self):
        """(p, q) (B, V) float64 on the device, each row divided by its sum (the law every entry point
        samples: :func:`_validation.probabilities`' to the last bit), in one division."""
        laws = self.rows[:2 * self.B] / self._sums[:2 * self.B].unsqueeze(-1)
        return laws[:self.B], laws[self.B:]

    def drafts_on_device(self):
        """(B, n) int64 drafts on the device: an integer tensor as given, clamped into [0, V) so that
        gathers at them stay in bounds before the read checks them, or the host's checked drafts."""
        if self._given is None:
            return to_device(self.d, self.device)
        return self._given.reshape(-1, self.n).to(torch_module().int64).clamp(0, self.V - 1)

    def read(self, *tensors) -> List[np.ndarray]:
        """``tensors`` on the host (:func:`read_together`), read with the checks' numbers in ONE host
        read; the refusals of the checked calls raised first, with their messages."""
        given = [] if self._given is None else [self._given]
        sums, minima, *arrays = read_together(self._sums, self._minima, *given, *tensors)
        if given:
            self.d = check.tokens(arrays.pop(0), self.V, self.n, ndims=self._ndims).reshape(-1, self.n)
            self._given = None
        for law, rows in ((self.target, slice(0, self.B)), (self.draft, slice(self.B, self._laws))):
            if law.failed(sums[rows], minima[rows]):
                law.refuse()
        self.host_sums = sums
        return arrays


def compressible(verifier) -> bool:
    """Whether :func:`verify_compressed` takes the verifier: one draft law per row (not ``"khisti"``'s
    independent scheme) and a compressed problem of the draft support alone (not ``"khisti"`` with a
    truncation, which keeps tokens outside it: Section 4). The others take the checked call."""
    return verifier.scheme_kind != "independent" and kept_outside(verifier) is None


def _support_rows(call: Call, support: int):
    """The compressed problem's inputs on the device: (ids (B, m), q (B, m)) the top ``support`` + 1
    tokens of q, most probable first (:func:`compressed.top_entries`), and p at the first ``support``
    (B, m - 1), both as passed (float64): the host divides them by their sums, as :class:`Compressed`
    divides."""
    ids, values = top_entries(call.rows[call.B:2 * call.B], support)
    return ids, values, call.rows[:call.B].gather(1, ids[:, :support])


def verify_compressed(verifier, p, q, drafts, rng=None):
    """:meth:`Verifier.verify` of tensors, for a verifier that solves a compressed problem on the host
    (:func:`compressible`): ONE host read of the checks, the drafts, the top :data:`SUPPORT_GUESS` + 1
    of q with p there, the outside mass, the support sizes and a token drawn outside the support from
    each row's seed (Section 6); the host builds the compressed rows
    (:func:`compressed.compressed_from_top`: ids ascending, then the outside token) and solves them
    (:func:`verified_on_host`). A row with more
    than :data:`SUPPORT_GUESS` tokens (known from the sizes read) costs a second read, of the exact
    support."""
    call = Call(verifier, p, q, drafts, outside=True)
    B = call.B
    # the seeds are drawn before the checks are read (the outside draw needs them): a refused call
    # puts a generator back as it found it, as the checked call, which refuses first, leaves it
    state = rng.bit_generator.state if isinstance(rng, np.random.Generator) else None
    seeds = check.row_seeds(rng, B)
    drawn = inverse_cdf_at(call.outside, to_device(row_uniforms(seeds), call.device))[:, 0]
    guessed = _support_rows(call, SUPPORT_GUESS)
    try:
        counts, outside_tokens, ids, values, p_kept = call.read(call.support.sum(-1), drawn, *guessed)
    except ValueError:
        if state is not None:
            rng.bit_generator.state = state
        raise
    support = SUPPORT_GUESS
    if counts.max() > support:  # a wider support than guessed: read it exactly (the second read)
        support = int(counts.max())
        ids, values, p_kept = read_together(*_support_rows(call, support))
    p_scale, q_scale, outside_sums = call.host_sums[:B], call.host_sums[B:2 * B], call.host_sums[2 * B:]
    problem = compressed_from_top(ids, values / q_scale[:, None], support, call.V, p_kept / p_scale[:, None],
                                  outside_sums / p_scale)
    tokens, accepted, drawn_outside = verified_on_host(verifier, problem, call.d, seeds)
    token = to_device(np.where(drawn_outside, outside_tokens, tokens), call.device)
    hit = to_device(accepted, call.device)
    return (token, hit) if call.batched else (token[0], hit[0])

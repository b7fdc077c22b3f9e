"""The device path: torch tensors in, torch tensors out, on the tensors' own device.

A call whose ``p``, ``q`` or ``drafts`` is a torch tensor comes here (``takes``), whatever the
device: a CPU tensor takes exactly the path of a CUDA tensor. The O(V) work runs in torch on the
device, in float64: validation (the rules and messages of :mod:`multidraft._validation`),
normalisation p / sum(p), the draft support S (tokens with q > 0; for independent drafts the
union over the draft models), gathers, scatters, and sampling outside S. The host solves a
*compressed* problem of k + 1 tokens per row: the k tokens of S plus one "outside" token of mass
p(complement of S) and draft mass 0, on the existing NumPy path. Every verifier's output law
outside S is proportional to p there, so the compressed law, spread back in proportion to p, is
the full law (docs/design/device-path.md, Section 2); and the spreading keeps any verifier
lossless (Section 3). Only O(k) numbers per row cross to the host; :func:`last_host_bytes` counts
them. ``"sps"``, ``"naive"`` and ``"topk"``, whose laws are closed-form, compute them wholly on the
device instead (:mod:`multidraft._device.closed_form`, Section 9).

Mixed input (docs/design/device-path.md, Section 5): non-tensor arguments of a call with a
tensor go to that tensor's device; tensors on two devices are refused.
"""
from __future__ import annotations

import functools
import inspect
import sys
import threading
from typing import List, Optional, Sequence, Tuple

import numpy as np

from .. import _validation as check

# ----------------------------------------------------------------------------- which calls

_TENSOR_TYPE = None  # torch.Tensor once torch is imported: torch stays optional
# torch's dtypes the host path tells apart, set with _TENSOR_TYPE (constants)
_HOST_INTEGERS, _BFLOAT16 = (), None


def takes(*arguments) -> bool:
    """Whether a call with these arguments takes the device path: one of them is a torch tensor."""
    global _TENSOR_TYPE, _HOST_INTEGERS, _BFLOAT16
    if _TENSOR_TYPE is None:
        torch = sys.modules.get("torch")  # a tensor exists only if torch was imported
        if torch is None:
            return False
        _HOST_INTEGERS = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)
        _BFLOAT16 = torch.bfloat16
        _TENSOR_TYPE = torch.Tensor
    for argument in arguments:
        if isinstance(argument, _TENSOR_TYPE):
            return True
    return False


#: CPU tensors are computed on the host path, by the core reading NumPy views of their memory (no
#: copy), and the results come back as CPU tensors: on the CPU the core is the fast path, and the
#: O(V) work this module does in torch costs tens of times more there. tests/device turn this off to
#: run CPU tensors through exactly the path of an accelerator's tensors.
CPU_ON_HOST = True


def on_host(*arguments) -> bool:
    """Whether a call with tensors among ``arguments`` takes the host path: all of them on the CPU, of
    real dtypes (others go the device path, which explains the refusal)."""
    takes()  # learns torch.Tensor, for a caller that did not ask first
    return CPU_ON_HOST and all(a.is_cpu and (a.dtype.is_floating_point or a.dtype in _HOST_INTEGERS)
                               for a in arguments if isinstance(a, _TENSOR_TYPE))


def on_device(*arguments) -> bool:
    """Whether a call with these arguments computes on a device: a tensor among them, and not all
    of them for the host path (:func:`on_host`)."""
    return takes(*arguments) and not on_host(*arguments)


def host_view(x, name: str):
    """A CPU tensor as the NumPy path takes it: a view of its memory, or for a bfloat16 law (which
    NumPy lacks) its checked float64 law (:func:`_validation.probabilities`, with bfloat16's
    tolerance); anything else unchanged."""
    if not isinstance(x, _TENSOR_TYPE):
        return x
    if x.dtype == _BFLOAT16:
        return check.probabilities(x, name, ndims=(1, 2, 3)) if name in ("p", "q") else check.as_array(x, name)[0]
    try:
        return (x.detach() if x.requires_grad else x).numpy()
    except (RuntimeError, TypeError) as error:  # e.g. sparse or quantised tensors
        raise ValueError(f"'{name}' cannot be read as an array: {error}") from None


def host_tensors(result):
    """The host path's result as CPU tensors: arrays shared, Python numbers as 0-d tensors."""
    torch = _torch()
    if isinstance(result, tuple):
        return tuple(host_tensors(r) for r in result)
    if isinstance(result, np.ndarray):
        return torch.from_numpy(result)
    return torch.from_numpy(_as_numbers(result))  # a third of torch.tensor's cost


def _as_numbers(result):
    """A Python number as the 0-d array a tensor result holds (bool, int64 or float64)."""
    dtype = np.bool_ if isinstance(result, (bool, np.bool_)) else (
        np.int64 if isinstance(result, (int, np.integer)) else np.float64)
    return np.array(result, dtype=dtype)


def device_tensors(result, device):
    """A result (arrays, Python numbers, tensors, tuples of them) as tensors on ``device``, arrays
    and numbers copied there (counted); anything else (an object the call builds) unchanged."""
    if isinstance(result, tuple):
        return tuple(device_tensors(r, device) for r in result)
    if isinstance(result, (np.ndarray, bool, int, float, np.generic)):
        return to_device(result if isinstance(result, np.ndarray) else _as_numbers(result), device)
    return result


def tensor_route(device_body=None):
    """Decorate an entry point so that it takes torch tensors (Section 5); a call with no tensor among
    its arguments runs the body.

    With ``device_body`` (a body written for NumPy): a call whose tensors are all on the CPU runs the
    body on NumPy views of their memory (:func:`host_view`, by parameter name), and gives its results
    back as CPU tensors (:func:`host_tensors`); any other tensor call runs ``device_body`` with the
    same arguments, whose results are tensors on their device.

    Without one (a body that reads tensors itself, by :mod:`._validation`, and computes on the
    device where :func:`on_device` says so): all on the CPU, its results come back as CPU tensors;
    otherwise its tensor results stay as they are and its array results go to the call's device (a
    body that reads host copies: calibration-time functions, called once)."""
    def decorate(function):
        names = tuple(inspect.signature(function).parameters)

        @functools.wraps(function)
        def call(*args, **kwargs):
            arguments = (*args, *kwargs.values()) if kwargs else args
            if not takes(*arguments):
                return function(*args, **kwargs)
            if on_host(*arguments):
                if device_body is None:
                    return host_tensors(function(*args, **kwargs))
                views = [host_view(a, name) if isinstance(a, _TENSOR_TYPE) else a for a, name in zip(args, names)]
                return host_tensors(function(*views, **{name: host_view(a, name) for name, a in kwargs.items()}))
            if device_body is not None:
                return device_body(*args, **kwargs)
            result = function(*args, **kwargs)
            if all(isinstance(r, _TENSOR_TYPE) for r in (result if isinstance(result, tuple) else (result,))):
                return result
            return device_tensors(result, call_device(**dict(zip(names, args)), **kwargs))
        return call
    return decorate


def _torch():
    import torch  # only reached with a tensor in hand

    return torch


def call_device(**arguments):
    """The one device of the call's tensors (``name=value`` pairs; arguments that are no tensor skipped)."""
    device, first = None, None
    for name, value in arguments.items():
        if not isinstance(value, _TENSOR_TYPE):
            continue
        if device is None:
            device, first = value.device, name
        elif value.device != device:
            raise ValueError(f"'{name}' is on device '{value.device}' but '{first}' is on '{device}': "
                             "pass the tensors of one call on one device")
    if device is not None and device.type == "meta":
        raise ValueError(f"'{first}' is a torch tensor on device 'meta', which holds no values")
    return device


class PerDevice:
    """Copies of one host object on each device, ``build(device)`` made on first use there under a
    lock, so that objects shared by threads build each copy once (an affinity matrix's M^T, a
    vocabulary map's index tensors)."""

    def __init__(self, build):
        self._build, self._copies, self._lock = build, {}, threading.Lock()

    def on(self, device):
        with self._lock:
            if device not in self._copies:
                self._copies[device] = self._build(device)
            return self._copies[device]


# ----------------------------------------------------------------------------- host traffic

_traffic = threading.local()


def last_host_bytes() -> int:
    """Bytes the calling thread's last device-path call copied from its device to the host."""
    return getattr(_traffic, "to_host", 0)


def last_device_bytes() -> int:
    """Bytes the calling thread's last device-path call copied from the host to its device."""
    return getattr(_traffic, "to_device", 0)


def host_reads() -> int:
    """Host reads (calls of :func:`to_host`) the calling thread has made since it started: each one a
    synchronisation with the device, whatever its size (a caller that spans several subtracts)."""
    return getattr(_traffic, "reads", 0)


def host_bytes_read() -> int:
    """Bytes the calling thread has copied from tensors to the host through :func:`to_host` since it
    started (every call: a caller that spans several, as the generation loop's rounds, subtracts)."""
    return getattr(_traffic, "total_to_host", 0)


def _begin() -> None:
    _traffic.to_host = 0
    _traffic.to_device = 0


def to_host(tensor) -> np.ndarray:
    """``tensor`` as a NumPy array on the host, counted (every host read of this module goes here)."""
    tensor = tensor.detach()
    size = tensor.numel() * tensor.element_size()
    _traffic.to_host = last_host_bytes() + size
    _traffic.total_to_host = host_bytes_read() + size
    _traffic.reads = host_reads() + 1
    return tensor.cpu().numpy()


def read_together(*tensors) -> List[np.ndarray]:
    """``tensors`` as NumPy arrays of their shapes, in ONE host read (:func:`to_host`): float64 as float64,
    integers and bools as int64. They travel in one int64 tensor: a float64 tensor as its bits (a view:
    no kernel), another float converted to float64 first (one kernel), integers and bools promoted by
    the one ``cat`` itself; so a read of float64 sums and int64 ids costs one kernel, the ``cat``."""
    torch = _torch()
    parts = []
    for t in tensors:
        t = t.detach()
        if t.dtype.is_floating_point:
            t = t.to(torch.float64).view(torch.int64)
        parts.append(t.reshape(-1))
    packed = to_host(torch.cat(parts))
    out, at = [], 0
    for t in tensors:
        chunk = packed[at:at + t.numel()].astype(np.int64, copy=False)
        out.append((chunk.view(np.float64) if t.dtype.is_floating_point else chunk).reshape(tuple(t.shape)))
        at += t.numel()
    return out


def to_device(array: np.ndarray, device):
    """A host array as a tensor on ``device``, counted."""
    array = np.asarray(array)
    if not array.flags.c_contiguous:
        array = array.copy()  # (np.ascontiguousarray would make a 0-d array 1-D)
    _traffic.to_device = last_device_bytes() + array.nbytes
    return _torch().from_numpy(array).to(device)


# ----------------------------------------------------------------------------- row sums

def row_sums(x):
    """float64 sums over the last axis, in the same order for a row alone or in any batch, on any device:
    a pairwise tree of elementwise additions (the row padded with zeros to a power of two, then
    halves added, level by level). A reduction kernel's order may depend on the tensor's shape (on
    the CPU a long row is split over threads, a row of a batch is not; on a GPU the launch
    configuration follows the shape), elementwise additions' does not (docs/design/device-path.md,
    Section 6)."""
    torch = _torch()
    rows = x.reshape(-1, x.shape[-1]).to(torch.float64)
    V = rows.shape[1]
    return _pairwise(torch.nn.functional.pad(rows, (0, _padded_width(V) - V))).reshape(x.shape[:-1])


def _padded_width(V: int) -> int:
    """The power of two :func:`row_sums` pads a row of V entries to."""
    return 1 << max(V - 1, 0).bit_length()


def _pairwise(rows):
    """(R,) float64 sums of the rows (R, a power of two) of :func:`row_sums`: halves added level by level."""
    while rows.shape[1] > 1:
        rows = rows[:, 0::2] + rows[:, 1::2]
    return rows[:, 0]


def stacked_row_sums(parts: Sequence):
    """:func:`row_sums` of several (R_i, V) tensors (any float dtypes) at once, for the price of one:
    ``(rows, sums)``, ``rows`` the parts stacked as float64 (sum R_i, V) (a view of the padded
    buffer, in the parts' order) and ``sums`` (sum R_i,) their float64 sums, each bit for bit
    :func:`row_sums` of its row (the same conversion, padding and pairwise order: a row's sum does
    not depend on the rows beside it). Two kernels stack and pad (the padding zeroed, the parts
    converted into the buffer by one ``cat``), then one addition per level for all rows together:
    a public call sums p, q and p outside q's support in one tree instead of three."""
    torch = _torch()
    V = parts[0].shape[-1]
    width = _padded_width(V)
    buffer = torch.empty(sum(part.shape[0] for part in parts), width, dtype=torch.float64, device=parts[0].device)
    if width > V:
        buffer[:, V:].zero_()
    torch.cat(list(parts), out=buffer[:, :V])  # float32, bfloat16, float16 -> float64: exact
    return buffer[:, :V], _pairwise(buffer)


# ----------------------------------------------------------------------------- validation

def _tensor(x, name: str, device):
    """``x`` as a tensor on ``device``: a tensor itself, a NumPy array or list copied there."""
    if isinstance(x, _TENSOR_TYPE):
        return x.detach()
    array, _ = check.as_array(x, name)
    if array.dtype == object or array.dtype.kind not in "iuf":
        raise ValueError(f"'{name}' must be a float16, float32 or float64 array or a torch tensor of floats, "
                         f"got dtype {array.dtype}")
    return to_device(array, device)


class Law:
    """One probability argument on its device: ``values``, its entries as passed (no O(V) copy: the
    gathered entries are converted to float64 and divided by their row's float64 sum, ``scale``, the
    law :func:`_validation.probabilities` returns), and ``bad``, a 0-d bool tensor set when a rule
    of that function fails (read with the call's other small numbers, then :meth:`refuse` explains).
    With ``measure=False`` the shapes are checked only: the caller sums the law with others
    (:meth:`measured`) and applies the rules on the host to what it reads (:meth:`failed`), without
    ``bad``."""

    def __init__(self, x, name: str, device, ndims: Sequence[int], measure: bool = True):
        torch = _torch()
        tensor = _tensor(x, name, device)
        if tensor.dtype == torch.bool or tensor.is_complex() or tensor.is_quantized:
            raise ValueError(f"'{name}' must be a float16, float32 or float64 array or a torch tensor of floats, "
                             f"got dtype {tensor.dtype}")
        if tensor.dim() not in ndims:
            expected = " or ".join(f"{d}-D" for d in ndims)
            raise ValueError(f"'{name}' must be {expected}, got shape {tuple(tensor.shape)}")
        if tensor.numel() == 0:
            raise ValueError(f"'{name}' is empty (shape {tuple(tensor.shape)})")
        self.name, self.stored, self.raw = name, tensor.dtype, tensor
        self.tolerance = check.sum_tolerance(tensor.dtype, tensor.shape[-1])
        self.values = tensor
        if not measure:  # a public call's laws: summed together, checked with its one read (checked.Call)
            return
        self.sums = row_sums(tensor)
        # a NaN or an infinite entry makes its row's sum NaN or infinite: two reductions check all
        self.bad = ~torch.isfinite(self.sums).all() | (tensor.amin() < 0) \
            | ((self.sums - 1.0).abs() > self.tolerance).any()
        self.scale = self.sums

    def measured(self, sums) -> None:
        """Take the row sums (one per row of :attr:`values`, float64 on the device) of a law made with
        ``measure=False`` (summed with others: :func:`stacked_row_sums`)."""
        self.sums = sums.reshape(self.raw.shape[:-1])
        self.scale = sums.reshape(self.values.shape[:-1])

    def failed(self, sums: np.ndarray, minima: np.ndarray) -> bool:
        """The rule of :attr:`bad` on the host, from this law's row sums and row minima read there: a
        row sum not finite (a NaN or an infinite entry), a negative entry, or a row sum off 1 by more
        than the tolerance."""
        return bool(not np.isfinite(sums).all() or (minima < 0).any() or (np.abs(sums - 1.0) > self.tolerance).any())

    def rows(self):
        """The whole law as (B, V) float64 rows divided by their sums: an O(V) copy, for the calls
        whose result is a law over the vocabulary."""
        return self.raw.reshape(-1, self.raw.shape[-1]).to(_torch().float64) / self.sums.reshape(-1, 1)

    def refuse(self) -> None:
        """Raise the ValueError of :func:`_validation.probabilities` for this (refused) argument."""
        torch = _torch()
        values = self.raw.to(torch.float64)
        for failed, what in ((~torch.isfinite(values), "is not finite"), (values < 0, "has a negative entry")):
            where = torch.nonzero(failed)
            if where.shape[0]:
                index = tuple(int(i) for i in to_host(where[0]))
                raise ValueError(f"'{self.name}' {what} at index {index}")
        off = torch.nonzero(((self.sums - 1.0).abs() > self.tolerance).reshape(self.sums.shape))
        row = tuple(int(i) for i in to_host(off[0])) if off.shape[0] else ()
        total = float(to_host(self.sums.reshape(-1)[0] if not row else self.sums[row]))
        where = "" if self.raw.dim() == 1 else f" in row {row[0] if len(row) == 1 else row}"
        raise ValueError(f"'{self.name}' must sum to 1 within {self.tolerance:.3g} (the tolerance for {self.stored} "
                         f"at V = {self.raw.shape[-1]}), but sums to {total!r}{where}")


def refuse_failed(*laws: Law) -> None:
    """Read the laws' refusal flags in one host read; the first law that failed explains itself."""
    torch = _torch()
    for law, failed in zip(laws, to_host(torch.stack([law.bad for law in laws]))):
        if failed:
            law.refuse()


def laws(p, q, n: Optional[int], kind: str, device, measure: bool = True):
    """Validated laws of a call, in the layout of :func:`schemes.batched_inputs`:
    ``(p Law (B, V), q Law (B, rows, V), n, batched)``; ``p`` may be None (draft-only calls).
    ``measure=False``: the laws' shapes checked, their sums left to the caller (:meth:`Law.measured`)."""
    target = Law(p, "p", device, (1, 2), measure) if p is not None else None
    rank = target.raw.dim() if target is not None else None
    if kind == "independent":
        draft = Law(q, "q", device, (rank + 1,) if rank else (2, 3), measure)
        if n is not None and check.count(n) != draft.raw.shape[-2]:
            raise ValueError(f"'n' = {n} does not match the {draft.raw.shape[-2]} draft rows of 'q'")
        n = draft.raw.shape[-2]
        batched = draft.raw.dim() == 3
    else:
        draft = Law(q, "q", device, (rank,) if rank else (1, 2), measure)
        if n is None:
            raise ValueError("'n' (the number of drafts) is required unless 'q' holds one row per draft model")
        n = check.count(n)
        batched = draft.raw.dim() == 2
    if target is not None:
        check.same_vocabulary(target.raw.shape[-1], draft.raw, "q")
        if batched and draft.raw.shape[0] != target.raw.shape[0]:
            raise ValueError(f"'q' has batch size {draft.raw.shape[0]}, but 'p' has {target.raw.shape[0]}")
    V = draft.raw.shape[-1]
    B = draft.raw.shape[0] if batched else 1
    if target is not None:
        target.values = target.raw.reshape(B, V)
    draft.values = draft.raw.reshape(B, -1, V)
    if measure:
        for law in (target, draft):
            if law is not None:
                law.measured(law.sums)
    return target, draft, n, batched


# ----------------------------------------------------------------------------- compression

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
        compressed.count, compressed.host_ids, compressed.p_c, compressed.q_c, compressed.V = count, host_ids, p_c, q_c, V
        return compressed

    @staticmethod
    def _checked_counts(laws: List[Law], counts) -> np.ndarray:
        """The kept tokens per row, read with the laws' refusal flags (the call's first host read)."""
        torch = _torch()
        header = to_host(torch.cat([law.bad.reshape(1) for law in laws] + [counts]).to(torch.int64))
        for law, failed in zip(laws, header):
            if failed:
                law.refuse()
        return header[len(laws):]

    def _gather(self, target: Optional[Law], draft: Law, counts, K: int) -> None:
        """Gather the compressed rows on the device, normalised, and read them in one O(k) host read."""
        torch = _torch()
        q = draft.values
        B, models, V = q.shape
        zero = torch.zeros(B, 1, dtype=torch.float64, device=q.device)
        valid = torch.arange(K, device=q.device) < counts.unsqueeze(-1)
        columns = [self.ids.to(torch.float64)]  # ids < 2**53: exact in float64
        if self.p is not None:
            scale = target.scale.unsqueeze(-1)
            p_kept = torch.where(valid, self.p.gather(1, self.ids).to(torch.float64) / scale, 0.0)
            self.outside = row_sums(torch.where(self.support, 0, self.p))  # summed, not 1 - p(S): no cancellation
            p_out = (self.outside.unsqueeze(-1) / scale)
            columns.append(torch.cat([p_kept, zero], 1).scatter(1, counts.unsqueeze(-1), p_out))
        q_kept = q.gather(2, self.ids.unsqueeze(1).expand(B, models, K)).to(torch.float64) / draft.scale.unsqueeze(-1)
        q_kept = torch.where(valid.unsqueeze(1), q_kept, 0.0)
        columns.append(torch.cat([q_kept, zero.unsqueeze(1).expand(B, models, 1)], 2).reshape(B, -1))
        packed = to_host(torch.cat(columns, 1))
        self.host_ids = packed[:, :K].astype(np.int64)
        width, at = K + 1, K
        if self.p is not None:
            self.p_c, at = packed[:, at:at + width], at + width
        self.q_c = packed[:, at:].reshape(B, models, width)

    def _support_ids(self, support, K: int):
        """(B, K) ids of the kept tokens, ascending, padded with 0: the row-major nonzeros of
        ``support``, whose number is known from the counts (no host read)."""
        torch = _torch()
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
        torch = _torch()
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
    if isinstance(drafts, _TENSOR_TYPE):
        drafts = to_host(drafts)
    return check.tokens(drafts, V, n, ndims=ndims)


# ----------------------------------------------------------------------------- sampling on the device

#: The spawn key of the stream that gives a row's uniform for a draw on the device ("outs" in ASCII):
#: a stream of its own, independent of the core's generator for that seed.
OUTSIDE_STREAM = 0x6F757473


def row_uniforms(seeds: np.ndarray, count: int = 1) -> np.ndarray:
    """(len(seeds), count) uniforms in [0, 1) for draws on the device (a token outside the draft
    support, a token of a law: :func:`sample_rows`, RDK's two stages): row b's are the first
    ``count`` doubles of NumPy's PCG64 seeded by ``SeedSequence(seeds[b], spawn_key=(OUTSIDE_STREAM,))``.
    A function of the row's seed only, so the same seed gives the same tokens and a batch equals
    the loop over its rows."""
    out = np.empty((len(seeds), count))
    for b, seed in enumerate(seeds):
        stream = np.random.SeedSequence(int(seed), spawn_key=(OUTSIDE_STREAM,))
        out[b] = np.random.Generator(np.random.PCG64(stream)).random(count)
    return out


def inverse_cdf_at(weights, uniforms):
    """(B, m) tokens on the device: ``[b, j]`` drawn from ``weights[b]`` (B, V) >= 0 in proportion
    by inverse CDF at ``uniforms[b, j]`` ((B, m) tensor in [0, 1)): the first token whose float64
    running sum exceeds u times the total (never a token of weight 0: its running sum equals its
    predecessor's; u close to 1 is held to the last positive token)."""
    torch = _torch()
    running = weights.cumsum(-1, dtype=torch.float64)
    total = running[:, -1:]
    token = torch.searchsorted(running, uniforms * total, right=True)
    last = torch.searchsorted(running, total.contiguous())  # the first to reach the total: the last positive
    return torch.minimum(token, last)


def inverse_cdf(weights, seeds: np.ndarray):
    """(B,) tokens on the device, row b drawn from ``weights[b]`` by :func:`inverse_cdf_at` with the
    first of :func:`row_uniforms` of ``seeds[b]``."""
    return inverse_cdf_at(weights, to_device(row_uniforms(seeds), weights.device))[:, 0]


def draw_outside(compressed: Compressed, rows: np.ndarray, seeds: np.ndarray):
    """(len(rows),) tokens drawn from p restricted to the complement of S, on the device."""
    at = to_device(rows.astype(np.int64), compressed.p.device)
    return inverse_cdf(_torch().where(compressed.support[at], 0, compressed.p[at]), seeds)


def sample_rows(laws, rng):
    """One token per row of checked laws (B, V) (float64 tensors, rows summing to 1), one seed per
    row from ``rng`` (:func:`_validation.row_seeds`): (B,) int64 on their device. On the host path
    the core draws them; on a device, :func:`inverse_cdf`."""
    seeds = check.row_seeds(rng, laws.shape[0])
    if on_host(laws):
        from .. import _core
        return host_tensors(_core.sample_rows(host_view(laws, "laws"), seeds))
    return inverse_cdf(laws, seeds)


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
        torch = _torch()
        outside = torch.where(support, -1.0, p)  # p >= 0: kept tokens rank below every outside one
        s_th = outside.topk(min(s, p.shape[-1]), -1).values[:, -1:]
        above = outside > s_th
        tied = (outside == s_th) & ((outside == s_th).cumsum(-1) <= s - above.sum(-1, keepdim=True))
        return (above | tied) & ~support

    return keep


def truncation_for(verifier, p_c: np.ndarray, q_c: np.ndarray, k: int) -> int:
    """The truncation of a row's compressed [CD] Algorithm 2: s, or s + 1 when the outside token
    (ranked last on ties, having the largest id) would take one of the s places, which then holds
    the s best kept tokens and the outside token, whose draft mass 0 gives it no pair."""
    s = verifier.truncation
    keys = p_c[:k + 1] - q_c[:k + 1] ** 2
    return s + 1 if np.count_nonzero(keys[:k] >= keys[k]) < s else s


# ----------------------------------------------------------------------------- the verifiers' calls

def _groups(verifier, compressed: Compressed, independent: bool):
    """(rows, k, the verifier solving them, p_c, q_c) per group of rows with one compressed shape."""
    from ..verifiers import verifier as build  # the registry, for a compressed Algorithm 2

    for rows, k in compressed.groups():
        p_c, q_c = compressed.problem(rows, k, independent)
        if kept_outside(verifier) is None or p_c is None:
            yield rows, k, verifier, p_c, q_c
            continue
        truncations = np.array([truncation_for(verifier, p_c[g], q_c[g], k) for g in range(len(rows))])
        for s in np.unique(truncations):
            part = truncations == s
            yield rows[part], k, build("khisti", truncation=int(s)), p_c[part], q_c[part]


def call_laws(verifier, p, q, drafts):
    """The validated laws of a transport or verify call (:func:`laws`; flags not read yet), the
    drafts on the host, (B, n), and whether the call is batched."""
    _begin()
    device = call_device(p=p, q=q, drafts=drafts)
    n = verifier._draft_count(drafts, q)
    target, draft, n, batched = laws(p, q, n, verifier.scheme_kind, device)
    d = host_tokens(drafts, draft.values.shape[-1], n, (2,) if batched else (1,)).reshape(-1, n)
    if d.shape[0] != draft.values.shape[0]:
        raise ValueError(f"'drafts' has batch size {d.shape[0]}, but 'p' has {draft.values.shape[0]}")
    return target, draft, d, batched


def _inputs(verifier, p, q, drafts):
    """The validated, compressed rows of a transport or verify call, and the drafts on the host."""
    target, draft, d, batched = call_laws(verifier, p, q, drafts)
    return Compressed(target, draft, kept_outside(verifier)), d, batched


def transport(verifier, p, q, drafts):
    """:meth:`Verifier.transport` of tensors: (V,) or (B, V) float64 on their device."""
    from . import checked, closed_form

    if verifier.name in closed_form.NAMES:
        return closed_form.transport(verifier, checked.Call(verifier, p, q, drafts))
    compressed, d, batched = _inputs(verifier, p, q, drafts)
    independent = verifier.scheme_kind == "independent"
    laws_c = np.zeros((d.shape[0], compressed.ids.shape[1] + 1))
    for rows, k, solver, p_c, q_c in _groups(verifier, compressed, independent):
        laws_c[rows, :k + 1] = solver.transport(p_c, q_c, compressed.drafts(d, rows, k))
    laws_full = compressed.spread(laws_c)
    return laws_full if batched else laws_full[0]


def verified_on_host(verifier, compressed: Compressed, d: np.ndarray, seeds: np.ndarray):
    """The host's side of a verify call on compressed rows: (token ids (B,), accepted (B,), whether
    the token is the outside one (B,), whose id the caller draws on the device: Section 6)."""
    B = d.shape[0]
    tokens, accepted, outside = np.zeros(B, np.int64), np.zeros(B, bool), np.zeros(B, bool)
    for rows, k, solver, p_c, q_c in _groups(verifier, compressed, verifier.scheme_kind == "independent"):
        token, hit = solver.verify(p_c, q_c, compressed.drafts(d, rows, k), seeds[rows])
        outside[rows] = token == k
        tokens[rows] = compressed.host_ids[rows, np.minimum(token, k - 1)]
        accepted[rows] = hit
    return tokens, accepted, outside


def verify(verifier, p, q, drafts, rng=None):
    """:meth:`Verifier.verify` of tensors: (token int64, accepted bool), 0-d or (B,), on their device, in
    ONE host read (:mod:`multidraft._device.checked`; Section 11): the closed forms on the device, the
    other verifiers from their compressed problems. ``"khisti"`` with the independent scheme or a
    truncation takes the checked call below (a read of the drafts, one of the counts and checks,
    one of the compressed rows)."""
    from . import checked, closed_form

    if verifier.name in closed_form.NAMES:
        return closed_form.verify(verifier, checked.Call(verifier, p, q, drafts), rng)
    if checked.compressible(verifier):
        return checked.verify_compressed(verifier, p, q, drafts, rng)
    compressed, d, batched = _inputs(verifier, p, q, drafts)
    seeds = check.row_seeds(rng, d.shape[0])
    tokens, accepted, outside = verified_on_host(verifier, compressed, d, seeds)
    device = compressed.ids.device
    token = to_device(tokens, device)
    if outside.any():
        rows = np.flatnonzero(outside)
        token[to_device(rows, device)] = draw_outside(compressed, rows, seeds[rows])
    hit = to_device(accepted, device)
    return (token, hit) if batched else (token[0], hit[0])


def acceptance(verifier, p, q, n=None):
    """:meth:`Verifier.acceptance` of tensors: 0-d or (B,) float64 on their device."""
    return _solved_per_row(verifier, "acceptance", p, q, n)


def rho(verifier, p, q, n):
    """``"spectr"``'s :meth:`rho` of tensors: 0-d or (B,) float64 on their device."""
    return _solved_per_row(verifier, "rho", p, q, n)


def _solved_per_row(verifier, method: str, p, q, n):
    """``verifier.<method>(p, q, n)`` of tensors, one number per row from the compressed rows."""
    _begin()
    device = call_device(p=p, q=q)
    if n is None and method == "acceptance" and verifier.scheme_kind != "independent":
        n = verifier.fixed_n or 1  # the default of Verifier.acceptance
    if n is not None:
        verifier._check_n(check.count(n))
    target, draft, n, batched = laws(p, q, verifier.fixed_n or n, verifier.scheme_kind, device)
    compressed = Compressed(target, draft, kept_outside(verifier))
    values = np.zeros(draft.values.shape[0])
    for rows, k, solver, p_c, q_c in _groups(verifier, compressed, verifier.scheme_kind == "independent"):
        values[rows] = getattr(solver, method)(p_c, q_c, n)
    out = to_device(values, device)
    return out if batched else out[0]


def _draft_law(verifier, q, device) -> Law:
    """The validated draft law of one row of :meth:`Verifier.draft` and ``draft_probability``, in the
    layout of :class:`Compressed`: (1, rows, V)."""
    draft = Law(q, "q", device, (2,) if verifier.scheme_kind == "independent" else (1,))
    draft.values = draft.values.reshape(1, -1, draft.raw.shape[-1])
    return draft


def _draws(verifier, draft: Law, n: int, rngs: Sequence) -> np.ndarray:
    """(B, n) int64 token ids on the host: row b drawn as ``verifier.draft`` draws it from its
    compressed law with ``rngs[b]`` (one compression and one host read for all rows)."""
    return drawn_on_host(verifier, Compressed(None, draft), n, rngs)


def drawn_on_host(verifier, compressed: Compressed, n: int, rngs: Sequence) -> np.ndarray:
    """(B, n) int64 token ids: row b drawn by ``verifier.draft`` from its compressed law with
    ``rngs[b]`` (the outside token has draft mass 0, so it is never drawn)."""
    out = np.empty((len(rngs), n), dtype=np.int64)
    for rows, k in compressed.groups():
        _, q_c = compressed.problem(rows, k, verifier.scheme_kind == "independent")
        for row, law in zip(rows, q_c):
            out[row] = compressed.host_ids[row, verifier.draft(law, n, rngs[row])]
    return out


def draft(verifier, q, n, rng=None):
    """:meth:`Verifier.draft` of a tensor ``q``: (n,) int64 on its device."""
    _begin()
    device = call_device(q=q)
    return to_device(_draws(verifier, _draft_law(verifier, q, device), n, [rng])[0], device)


def draft_rows(verifier, q, n: int, seeds: Sequence[int]) -> np.ndarray:
    """(N, n) int64 draft ids on the host: row i drawn as ``verifier.draft(q[i], n, seeds[i])``
    draws it, for the N laws of ``q`` (N, V) (a tensor or an array) in one call: on a device one
    validation, one compression and one host read of the compressed laws for all rows (the
    generation loop draws every node of a depth this way); on the host, row by row."""
    if not on_device(q):
        rows = host_view(q, "q") if takes(q) else q
        return np.stack([np.asarray(verifier.draft(rows[i], n, seed)) for i, seed in enumerate(seeds)])
    _begin()
    draft = Law(q, "q", call_device(q=q), (2,))
    draft.values, draft.scale = draft.raw.unsqueeze(1), draft.sums.unsqueeze(1)
    return _draws(verifier, draft, n, [int(seed) for seed in seeds])


def draft_probability(verifier, q, drafts):
    """:meth:`Verifier.draft_probability` of tensors: a 0-d float64 tensor on their device."""
    _begin()
    device = call_device(q=q, drafts=drafts)
    compressed = Compressed(None, _draft_law(verifier, q, device))
    k = int(compressed.count[0])
    _, q_c = compressed.problem(np.array([0]), k, verifier.scheme_kind == "independent")
    d = host_tokens(drafts, compressed.support.shape[-1], None, (1,))
    value = verifier.draft_probability(q_c[0], compressed.drafts(d.reshape(1, -1), np.array([0]), k)[0])
    return to_device(np.array(value, dtype=np.float64), device)


# ----------------------------------------------------------------------------- acceptance and softmax

def acceptance_rate(p, q):
    """:func:`multidraft.acceptance_rate` of tensors, on their device: sum_i min(p_i, q_i)."""
    torch = _torch()
    _begin()
    device = call_device(p=p, q=q)
    target, draft, _, batched = laws(p, q, 1, "iid", device)
    refuse_failed(target, draft)
    out = row_sums(torch.minimum(target.values / target.scale.unsqueeze(-1),
                                 draft.values[:, 0] / draft.scale[:, :1]))
    return out if batched else out[0]


def optimal_subset(p, q, n=None, *, scheme=None):
    """:func:`multidraft.optimal_subset` of tensors: ``(alpha, H)`` on their device. H* lies inside S (a
    token of draft mass 0 only adds target mass to psi), so the compressed minimiser, scattered back,
    is the full one."""
    from ..otlp import draft_kind, optimal_subset as solve

    kind = draft_kind(p, q, scheme)
    _begin()
    device = call_device(p=p, q=q)
    target, draft, n, batched = laws(p, q, n, kind, device)
    compressed = Compressed(target, draft)
    B, K = compressed.ids.shape
    alpha, in_H = np.zeros(B), np.zeros((B, K + 1))
    for rows, k in compressed.groups():
        p_c, q_c = compressed.problem(rows, k, kind == "independent")
        alpha[rows], subset = solve(p_c, q_c, n, scheme=kind)
        in_H[rows, :k + 1] = subset
    H = compressed.spread(in_H) > 0  # the outside column is never in H*: spread gives it 0 there
    values = to_device(alpha, device)
    return (values, H) if batched else (values[0], H[0])


def softmax(logits, temperature: float = 1.0):
    """:func:`multidraft.softmax` of a tensor: float64 on its device, the same rules and messages."""
    probs, flags = softmax_deferred(logits, temperature)
    if to_host(flags).any():
        refuse_logits(logits)
    return probs


def softmax_deferred(logits, temperature: float = 1.0, normalise: bool = True):
    """(:func:`softmax` of a tensor, its refusal flag: a 0-d bool tensor on the device, set for the
    logits :func:`refuse_logits` refuses) without reading the flag: a caller that reads the host
    anyway reads it there (the generation loop: :class:`multidraft._device.loop.Checks`).
    ``normalise=False`` leaves out the division by the row sums (each row's largest entry is 1): for
    a caller that renormalises anyway (the loop's top-k cut of a draft law)."""
    check.temperature(temperature)
    torch = _torch()
    _begin()
    call_device(logits=logits)
    x = logits.detach()
    if x.dtype == torch.bool or x.is_complex():
        raise ValueError(f"'logits' must be an array of floats, got dtype {x.dtype}")
    if x.dim() not in (1, 2) or x.shape[-1] == 0:
        raise ValueError(f"'logits' must be (V,) or (B, V) with V >= 1, got shape {tuple(x.shape)}")
    x = x.to(torch.float64)
    top = x.amax(-1, keepdim=True)
    # NaN or +inf anywhere makes a row's maximum NaN or +inf; an all -inf row has maximum -inf
    refused = ~torch.isfinite(top).all()
    shifted = x - top if temperature == 1.0 else (x - top) / float(temperature)
    probs = shifted.exp()  # every exponent <= 0, the sum >= 1
    return (probs / row_sums(probs).unsqueeze(-1) if normalise else probs), refused


def refuse_logits(logits) -> None:
    """Raise the ValueError of :func:`softmax` for refused logits (NaN, +inf, a row all -inf)."""
    torch = _torch()
    x = logits.detach().to(torch.float64)
    refused = torch.isnan(x) | (x == torch.inf)
    where = torch.nonzero(refused)
    if where.shape[0]:
        index = tuple(int(i) for i in to_host(where[0]))
        raise ValueError(f"'logits' has {float(to_host(x[index]))} at index {index}: logits must be finite or -inf")
    empty = torch.nonzero((x.amax(-1) == -torch.inf).reshape(-1))
    row = int(to_host(empty[0])[0])
    raise ValueError(f"'logits' row {row} is all -inf: no token has a positive probability")

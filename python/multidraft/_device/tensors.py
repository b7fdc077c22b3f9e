"""Tensors between the host and a device: the torch module (imported only with a tensor in hand), the
one device of a call, per-device copies of host objects, counted transfers (every host read of the
device path goes through :func:`to_host`), waiting for a device (:func:`synchronize`), and float64
row sums in an order that does not depend on the batch (docs/design/device-path.md, Section 6)."""
from __future__ import annotations

import threading
from typing import List, Sequence

import numpy as np



def torch_module():
    import torch  # only reached with a tensor in hand

    return torch


def call_device(**arguments):
    """The one device of the call's tensors (``name=value`` pairs; arguments that are no tensor skipped)."""
    device, first = None, None
    for name, value in arguments.items():
        if not isinstance(value, torch_module().Tensor):
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


def begin_call() -> None:
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
    torch = torch_module()
    parts = []
    for t in tensors:
        t = t.detach()
        if t.dtype.is_floating_point:
            t = t.to(torch.float64).view(torch.int64)
        parts.append(t.reshape(-1))
    packed = to_host(torch.cat(parts) if len(parts) > 1 else parts[0])
    out, at = [], 0
    for t in tensors:
        chunk = packed[at:at + t.numel()].astype(np.int64, copy=False)
        out.append((chunk.view(np.float64) if t.dtype.is_floating_point else chunk).reshape(tuple(t.shape)))
        at += t.numel()
    return out


def synchronize(device=None) -> None:
    """Wait until the kernels queued on ``device`` (a torch device or its name) have run: a timer
    of a call on an asynchronous device stops there. None: every accelerator the process has
    started; a no-op on the CPU."""
    torch = torch_module()
    kind = None if device is None else torch.device(device).type
    if kind == "cuda" or kind is None and torch.cuda.is_initialized():
        torch.cuda.synchronize(device)
    if kind == "mps" or kind is None and torch.backends.mps.is_available():
        torch.mps.synchronize()


def to_device(array: np.ndarray, device):
    """A host array as a tensor on ``device``, counted. The copy does not wait for the device's
    queue (a blocking one would drain it first): from pageable memory CUDA stages the source
    before the call returns, so the array may go at once."""
    array = np.asarray(array)
    if not array.flags.c_contiguous:
        array = array.copy()  # (np.ascontiguousarray would make a 0-d array 1-D)
    _traffic.to_device = last_device_bytes() + array.nbytes
    return torch_module().from_numpy(array).to(device, non_blocking=True)


# ----------------------------------------------------------------------------- row sums

def leading(x, cut, count):
    """True at exactly ``count`` (an int or (N, 1)) entries of each row of ``x`` (N, V): those above
    ``cut`` (N, 1), the row's count-th largest value, then those equal to it, lowest index first.
    The ties are ranked by an integer cumulative sum: the same order on any device and in any batch
    (the core's stable sort ranks them the same way)."""
    above = x > cut
    tied = x == cut
    return above | tied & (tied.cumsum(-1) <= count - above.sum(-1, keepdim=True))


def row_sums(x):
    """float64 sums over the last axis, in the same order for a row alone or in any batch, on any device:
    a pairwise tree of elementwise additions (the row padded with zeros to a power of two, then
    halves added, level by level). A reduction kernel's order may depend on the tensor's shape (on
    the CPU a long row is split over threads, a row of a batch is not; on a GPU the launch
    configuration follows the shape), elementwise additions' does not (docs/design/device-path.md,
    Section 6)."""
    torch = torch_module()
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
    torch = torch_module()
    V = parts[0].shape[-1]
    width = _padded_width(V)
    buffer = torch.empty(sum(part.shape[0] for part in parts), width, dtype=torch.float64, device=parts[0].device)
    if width > V:
        buffer[:, V:].zero_()
    torch.cat(list(parts), out=buffer[:, :V])  # float32, bfloat16, float16 -> float64: exact
    return buffer[:, :V], _pairwise(buffer)

"""The device path: torch tensors in, torch tensors out, on the tensors' own device.

A call whose ``p``, ``q`` or ``drafts`` is a torch tensor comes here (``takes``), whatever the
device: a CPU tensor takes exactly the path of a CUDA tensor (unless :data:`CPU_ON_HOST`). The O(V)
work runs in torch on the device, in float64: validation (the rules and messages of
:mod:`multidraft._validation`), normalisation p / sum(p), the draft support S (tokens with q > 0;
for independent drafts the union over the draft models), gathers, scatters, and sampling outside S.
The host solves a *compressed* problem of k + 1 tokens per row: the k tokens of S plus one
"outside" token of mass p(complement of S) and draft mass 0, on the existing NumPy path. Every
verifier's output law outside S is proportional to p there, so the compressed law, spread back in
proportion to p, is the full law (docs/design/device-path.md, Section 2); and the spreading keeps
any verifier lossless (Section 3). Only O(k) numbers per row cross to the host;
:func:`last_host_bytes` counts them. ``"sps"``, ``"naive"`` and ``"topk"``, whose laws are
closed-form, compute them wholly on the device instead (Section 9).

Mixed input (docs/design/device-path.md, Section 5): non-tensor arguments of a call with a
tensor go to that tensor's device; tensors on two devices are refused.

This module routes the calls (which ones take the device path, and :func:`tensor_route`, which
hands a public entry point's tensor calls to its device body); the layers below, each importing
only those beneath it:

- :mod:`.tensors`: the torch module, a call's device, counted transfers, batch-invariant row sums;
- :mod:`.laws`: validated laws (:class:`Law`) and the softmax of logits;
- :mod:`.compressed`: compressed problems and the host's side of their verify calls and draws;
- :mod:`.sampling`: uniforms per row, inverse-CDF draws, the outside token;
- :mod:`.closed_form`: ``"sps"``, ``"naive"``, ``"topk"`` from their closed-form laws;
- :mod:`.checked`: the public verify call in one host read;
- :mod:`.calls`: the device bodies of the public entry points;
- :mod:`.loop`: the generation loop's own calls (its laws are its own: no re-validation).
"""
from __future__ import annotations

import functools
import inspect
import sys

import numpy as np

from .. import _validation as check
from .tensors import call_device, to_device, torch_module

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
    torch = torch_module()
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
    same arguments (and ``host=`` the body itself, if it takes one: it calls the NumPy body on its
    compressed problem directly), whose results are tensors on their device.

    Without one (a body that reads tensors itself, by :mod:`._validation`, and computes on the
    device where :func:`on_device` says so): all on the CPU, its results come back as CPU tensors;
    otherwise its tensor results stay as they are and its array results go to the call's device (a
    body that reads host copies: calibration-time functions, called once)."""
    def decorate(function):
        names = tuple(inspect.signature(function).parameters)
        extra = {"host": function} if device_body is not None and "host" in inspect.signature(device_body).parameters \
            else {}

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
                return device_body(*args, **kwargs, **extra)
            result = function(*args, **kwargs)
            if all(isinstance(r, _TENSOR_TYPE) for r in (result if isinstance(result, tuple) else (result,))):
                return result
            return device_tensors(result, call_device(**dict(zip(names, args)), **kwargs))
        return call
    return decorate


def host_body(method):
    """The body of a bound public method, without its :func:`tensor_route` decoration: what a device
    body calls on the compressed NumPy problem it built (no second routing of host arrays)."""
    function = getattr(method, "__func__", method)
    body = getattr(function, "__wrapped__", function)
    return functools.partial(body, method.__self__) if hasattr(method, "__self__") else body


def host_integer(dtype) -> bool:
    """Whether a torch dtype is one of the integer dtypes the host path reads (int8 to int64, uint8)."""
    takes()  # learns the dtypes, for a caller that did not ask first
    return dtype in _HOST_INTEGERS


# ----------------------------------------------------------------------------- the layers, re-exported

from .tensors import (PerDevice, begin_call, host_bytes_read, host_reads, last_device_bytes,  # noqa: E402
                      last_host_bytes, leading, read_together, row_sums, stacked_row_sums, synchronize,
                      to_host)
from .laws import Law, as_tensor, laws, refuse_failed, refuse_logits, softmax, softmax_deferred  # noqa: E402
from .compressed import (Compressed, drawn_on_host, host_tokens, kept_outside, solver_groups,  # noqa: E402
                         truncation_for, verified_on_host)
from .sampling import OUTSIDE_STREAM, draw_outside, inverse_cdf, inverse_cdf_at, row_uniforms, sample_rows  # noqa: E402
from .calls import (acceptance, acceptance_rate, call_laws, draft, draft_probability, draft_rows,  # noqa: E402
                    optimal_subset, rho, transport, verify)

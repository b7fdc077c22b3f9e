"""Sampling on a device: per-row uniforms from the rows' seeds, inverse-CDF draws at them, and the
token drawn outside a compressed problem's support in proportion to p (docs/design/device-path.md,
Section 6)."""
from __future__ import annotations


import numpy as np

from .. import _validation as check
from . import host_tensors, host_view, on_host
from .tensors import to_device, torch_module
from .compressed import Compressed


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
    torch = torch_module()
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
    return inverse_cdf(torch_module().where(compressed.support[at], 0, compressed.p[at]), seeds)


def sample_rows(laws, rng):
    """One token per row of checked laws (B, V) (float64 tensors, rows summing to 1), one seed per
    row from ``rng`` (:func:`_validation.row_seeds`): (B,) int64 on their device. On the host path
    the core draws them; on a device, :func:`inverse_cdf`."""
    seeds = check.row_seeds(rng, laws.shape[0])
    if on_host(laws):
        from .. import _core
        return host_tensors(_core.sample_rows(host_view(laws, "laws"), seeds))
    return inverse_cdf(laws, seeds)

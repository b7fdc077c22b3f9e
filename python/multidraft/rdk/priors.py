"""First-order RDK ([OOV] Eq. 3) and its priors: the linear-time proposal and the unigram and
leading-component priors it mixes in."""
from __future__ import annotations

from typing import Optional

import numpy as np

from .. import _device
from . import _on_device
from ._common import _calibration_samples, _nonnegative_vector, _rdk, _rows, _unbatch, effective_size


@_device.tensor_route()
def taylor_proposal(q_prime, prior, n_eff: Optional[float] = None) -> np.ndarray:
    """First-order RDK, [OOV] Eq. (3), verbatim: (V,) or (B, V).

    theta = prior . q'; ptilde_t = (n_eff q'_t + theta prior_t) / (n_eff + prior_t); normalised.
    ``prior`` (V,) >= 0 stands for the paper's p: a context-free prior (:func:`unigram_prior`,
    :func:`leading_component_prior`), since the live target is unknown at draft time (Eq. (3) writes the target p);
    passing the true p is an oracle, valid only for metrics. ``n_eff`` > 0 is the paper's N,
    default V = ``|T|`` (faithful). Warning (unnormalised, each entry moves by at most
    prior_t / n_eff): ``||p_Taylor - q'||_1 <= 2/n_eff``
    and ``|alpha_Taylor - alpha_TLI| <= 1/n_eff``; with n_eff = ``|T|`` it is TLI to ``~1/|T|``, and it
    approximates M^T q' only when q' is close to uniform (Theorem 5.4's regime). O(V), no matrix.
    Torch tensors give a float64 tensor on their device, computed there.
    """
    if _device.on_device(q_prime, prior):
        return _unbatch(*_on_device.taylor(q_prime, prior, n_eff))
    rows, batched = _rows(q_prime, "q_prime")
    prior = _nonnegative_vector(prior, "prior", rows.shape[1])
    return _unbatch(_rdk.taylor(rows, prior, effective_size(n_eff, rows.shape[1])), batched)


@_device.tensor_route()
def unigram_prior(token_counts) -> np.ndarray:
    """The target unigram distribution from corpus counts (V,): counts / sum."""
    counts = _nonnegative_vector(token_counts, "token_counts")
    if counts.sum() <= 0:
        raise ValueError("'token_counts' are all zero")
    return counts / counts.sum()


@_device.tensor_route()
def leading_component_prior(samples) -> np.ndarray:
    """The absolute value of the leading principal component of Omega, normalised to sum 1 (V,):
    the proof of Theorem 5.4 assumes Omega is dominated by one component aligned with p.
    ``samples`` (K, V) as in :func:`affinity_scores`; costs one thin SVD of the centred samples
    (O(K^2 V))."""
    samples = _calibration_samples(samples)
    centred = samples - samples.mean(axis=0)
    if not np.any(centred):
        raise ValueError("'samples' do not vary across contexts: Omega is zero")
    component = np.abs(np.linalg.svd(centred, full_matrices=False)[2][0])
    return component / component.sum()

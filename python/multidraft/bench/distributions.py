"""Synthetic but realistic (target p, draft q) pairs for the benchmark.

Notation as everywhere in multidraft: ``p`` is the TARGET distribution and ``q`` the DRAFT.

The generator (one instance = one token position of a decoding loop)
--------------------------------------------------------------------
1. **Target logits, Zipf-like and heavy-tailed.** The token of rank ``r`` (1-based, over the
   whole base vocabulary of size ``V``) gets the logit ``-a * log(r) + jitter * N(0, 1)``, so
   ``softmax`` gives a power law ``p(r) ~ r^(-a)`` with irregular per-token noise, as next-token
   distributions of language models do. The exponent ``a`` is drawn per instance uniformly from
   ``zipf_exponent = (lo, hi)``, so every regime mixes confident and uncertain positions.
   Token ids are a random permutation of the ranks (solvers must not rely on sorted input).
2. **Draft logits, a noisy copy of the target's.** ``draft_gain * target_logits +
   draft_noise * N(0, 1)``: the draft logits are correlated with the target logits
   (:func:`summarize_pairs` reports the correlation of ``log p`` and ``log q`` on the draft's
   support); ``draft_gain < 1`` models a less confident (smaller) draft model.
3. **Temperature.** Both logit vectors are divided by ``temperature`` (the sampling temperature
   applies to both models), then ``p = softmax(target)`` and ``q = softmax(draft)`` in float64.
4. **Draft top-k** ([GR] Appendix N, which slices p too; here only q is cut): ``q`` is zeroed outside its ``k``
   largest entries and renormalised. ``p`` is NEVER sliced: it stays a full-length,
   strictly positive distribution over all ``V`` tokens, and solvers receive both at length ``V``.

Regimes (:data:`REGIMES`): ``"peaked"`` puts most draft mass on a few tokens (top-3 mass about
0.8); ``"flat"`` uses a small exponent and temperature 1.5, so the draft spreads over hundreds of
tokens, ``alpha*`` stays well below 1 and the optimal subset ``H*`` fills the whole top-k
(this is where truncation-based solvers struggle; see DESIGN.md "Benchmark distributions").
"""

from __future__ import annotations

import dataclasses
import zlib
from typing import Dict, Optional, Tuple, Union

import numpy as np

DEFAULT_SEED = 20240611
"""Fixed default seed of the benchmark (all instances derive from it)."""

DEFAULT_VOCAB = 32000
"""Default base vocabulary size V (Llama-2/Mistral sized)."""


@dataclasses.dataclass(frozen=True)
class Regime:
    """Parameters of one family of (p, q) pairs; see the module docstring for the model.

    Attributes:
        name: regime name used on the command line and in reports.
        zipf_exponent: (lo, hi) range of the per-instance power-law exponent ``a`` of the target.
        target_jitter: standard deviation of the Gaussian noise on the target logits (nats).
        draft_gain: factor applied to the target logits to form the draft logits.
        draft_noise: standard deviation of the Gaussian noise on the draft logits (nats).
        temperature: sampling temperature applied to both logit vectors.
        description: one line for humans.
    """

    name: str
    zipf_exponent: Tuple[float, float]
    target_jitter: float
    draft_gain: float
    draft_noise: float
    temperature: float
    description: str = ""

    def params(self) -> Dict[str, object]:
        """The parameters as a JSON-friendly dict (printed in every benchmark report)."""
        d = dataclasses.asdict(self)
        d["zipf_exponent"] = list(self.zipf_exponent)
        return d


REGIMES: Dict[str, Regime] = {
    r.name: r
    for r in (
        Regime(
            name="peaked",
            zipf_exponent=(1.8, 2.8),
            target_jitter=0.5,
            draft_gain=1.0,
            draft_noise=0.5,
            temperature=1.0,
            description="confident positions: most draft mass on a few tokens",
        ),
        Regime(
            name="flat",
            zipf_exponent=(1.1, 1.5),
            target_jitter=0.5,
            draft_gain=0.9,
            draft_noise=0.5,
            temperature=1.5,
            description="uncertain positions, high temperature: draft mass over hundreds of tokens",
        ),
    )
}


def get_regime(regime: Union[str, Regime]) -> Regime:
    """Look a regime up by name (or pass a :class:`Regime` through)."""
    if isinstance(regime, Regime):
        return regime
    try:
        return REGIMES[regime]
    except KeyError:
        raise ValueError(
            f"regime: unknown {regime!r}; known: {', '.join(REGIMES)}"
        ) from None


def register_regime(regime) -> None:
    """Make a regime object known by its ``name``; one with a ``sample_pairs(V, k, count, seed)``
    method (e.g. :class:`multidraft.bench.dataset.DatasetRegime`) supplies its own pairs."""
    REGIMES[regime.name] = regime


def derive_seed(seed: int, *keys: Union[int, str]) -> int:
    """A reproducible 63-bit seed from a base seed and keys (strings hashed with CRC-32)."""
    words = [int(seed)] + [zlib.crc32(k.encode()) if isinstance(k, str) else int(k) for k in keys]
    return int(np.random.SeedSequence(words).generate_state(1, np.uint64)[0] >> np.uint64(1))


def _softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax in float64, normalised so each row sums to 1 within a few ulps."""
    z = logits - logits.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def top_k(q: np.ndarray, k: Optional[int]) -> np.ndarray:
    """Zero each row of ``q`` outside its ``k`` largest entries and renormalise (a copy).

    ``k=None`` or ``k >= V`` returns a renormalised copy. Ties at the k-th value are broken
    arbitrarily, so exactly ``k`` entries per row stay positive.
    """
    q = np.array(q, dtype=np.float64, copy=True)
    V = q.shape[-1]
    if k is not None and k < V:
        if k < 1:
            raise ValueError(f"k: must be >= 1, got {k}")
        drop = np.argpartition(-q, k - 1, axis=-1)[..., k:]
        np.put_along_axis(q, drop, 0.0, axis=-1)
    return q / q.sum(axis=-1, keepdims=True)


def make_logits(
    regime: Union[str, Regime], V: int, count: int, rng: np.random.Generator
) -> Tuple[np.ndarray, np.ndarray]:
    """Target and draft logits (before temperature), each of shape ``(count, V)``, float64."""
    r = get_regime(regime)
    lo, hi = r.zipf_exponent
    exponent = rng.uniform(lo, hi, size=(count, 1))
    log_rank = np.log(np.arange(1, V + 1, dtype=np.float64))
    target = -exponent * log_rank + r.target_jitter * rng.standard_normal((count, V))
    target = rng.permuted(target, axis=1)  # token ids: a random permutation of the ranks per row
    draft = r.draft_gain * target + r.draft_noise * rng.standard_normal((count, V))
    return target, draft


def make_pairs(
    regime: Union[str, Regime],
    V: int = DEFAULT_VOCAB,
    k: Optional[int] = None,
    count: int = 1,
    seed: int = DEFAULT_SEED,
) -> Tuple[np.ndarray, np.ndarray]:
    """Generate ``count`` (target, draft) pairs of the named regime.

    Args:
        regime: a name in :data:`REGIMES` or a :class:`Regime`.
        V: vocabulary size; both outputs have full length ``V``.
        k: draft top-k (``None`` = no truncation). Only ``q`` is truncated; ``p`` stays full.
        count: number of instances (rows).
        seed: the same seed gives the same arrays.

    Returns:
        ``(p, q)``, float64 arrays of shape ``(count, V)``; every row is non-negative and sums
        to 1 within a few ulps; ``p > 0`` everywhere and ``q`` has exactly ``min(k, V)``
        positive entries per row.
    """
    if V < 2 or count < 1:
        raise ValueError(f"V and count: need V >= 2 and count >= 1, got V={V}, count={count}")
    r = get_regime(regime)
    if hasattr(r, "sample_pairs"):  # a registered data set instead of the generator
        return r.sample_pairs(V, k, count, seed)
    rng = np.random.default_rng(seed)
    target, draft = make_logits(r, V, count, rng)
    p = _softmax(target / r.temperature)
    q = top_k(_softmax(draft / r.temperature), k)
    return p, q


def summarize_pairs(p: np.ndarray, q: np.ndarray) -> Dict[str, float]:
    """Descriptive statistics of a batch of pairs (means over rows), for reports.

    Keys: ``q_top3_mass`` (draft mass on its 3 largest tokens), ``p_top_k_mass`` (target mass
    on the draft's support, an upper bound on any acceptance rate), ``acceptance_1`` (single-draft
    acceptance ``sum(min(p, q))``), ``q_support`` (number of tokens with ``q > 0``) and
    ``log_corr`` (Pearson correlation of ``log p`` and ``log q`` on the draft's support).
    """
    q_sorted = np.sort(q, axis=-1)
    corr = [np.corrcoef(np.log(pr[qr > 0]), np.log(qr[qr > 0]))[0, 1] for pr, qr in zip(p, q)]
    return {
        "q_top3_mass": float(q_sorted[:, -3:].sum(axis=-1).mean()),
        "p_top_k_mass": float(np.where(q > 0, p, 0.0).sum(axis=-1).mean()),
        "acceptance_1": float(np.minimum(p, q).sum(axis=-1).mean()),
        "q_support": float((q > 0).sum(axis=-1).mean()),
        "log_corr": float(np.nanmean(corr)),
    }

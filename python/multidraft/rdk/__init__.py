"""Out-of-vocabulary drafting: RDK, Redistributing Drafter Kernels ([OOV]).

A drafter whose vocabulary was pruned (or differs from the target's) cannot propose the target
tokens it lacks. RDK turns its distribution ``q`` into a proposal over the **whole target
vocabulary**, and speculative sampling with that proposal used everywhere (accept ratio,
residual, bonus token) is lossless for any valid proposal. Notation: ``p`` target, ``q`` drafter.

Pieces, one submodule per concept (all batched over a leading axis where it makes sense;
float32 or float64 input), each re-exported here:

- ``vocabulary``: :class:`VocabularyMap`, the partial id map drafter -> target. ``frequency_ranked`` (FR pruning,
  Algorithm 3, ties by ascending id), ``pruned``, ``intersection`` (by token string). ``tli(q)`` is
  Eq. (1) (q restricted to the shared set I and renormalised), ``masked(q)`` the baseline without
  renormalisation.
- ``affinity``: :class:`AffinityMatrix`, the row-stochastic token-affinity matrix M (Assumption 4.1) as CSR,
  built from calibration data by Eq. (2) (softmax of the target-logit covariance over ``tau``,
  top-k per row, renormalised), or supplied by the user and validated. ``M.proposal(q_prime)`` is
  the full RDK proposal p' = M^T q' (Algorithm 1); ``M.sample`` is its exact two-stage sampler
  (i ~ q', j ~ M[i, :]). :func:`select_temperature` picks tau by held-out mean acceptance.
- ``priors``: :func:`taylor_proposal`, the first-order linear-time form of Eq. (3) with its prior ``pi`` and
  ``n_eff`` (the paper's N = ``|T|``) as parameters. Implemented verbatim; note that
  ``||p_Taylor - q'||_1 <= 2 / n_eff``, so with the paper's N = ``|T|`` it is numerically TLI
  (unnormalised, each entry moves by at most ``prior_t / n_eff``; see docs/benchmarks/rdk.md). Smaller
  ``n_eff`` moves more mass onto the prior.
- ``verification``: :func:`verify` / :func:`transport`, speculative sampling with the proposal through the ``"sps"``
  verifier; :func:`verify_block` runs one draft block with lookahead L (stops at the first
  rejection, bonus token from the target); :func:`masked_verify` / :func:`masked_transport`: the
  lossless discard sampler of the masked baseline.

Multi-draft: a proposal is an ordinary draft distribution, so ``n`` i.i.d. drafts from it
(``M.sample(q_prime, n, rng)``) can be verified by any i.i.d. verifier with ``q = p'``, e.g.
``md.verifier("otlp").verify(p, p_prime, drafts, rng)``; losslessness carries over, since those
verifiers are lossless for any draft law.

Torch tensors: every per-position function (TLI, the masked law, q(I), the proposals, the
two-stage sampler, verification, the masked baseline) takes tensors on any device and returns
tensors on that device, computed there; only flags and O(n) token ids per row reach the host. The
calibration functions (``frequency_ranked``, the priors, ``affinity_scores``,
``select_temperature``, the constructors) read host copies of tensors, once, and return arrays as
tensors on their device (docs/design/device-path.md, Section 8).

The samplers take distributions, not models: feeding an out-of-vocabulary drafted token back to
the drafter (its input embedding table is not pruned; [OOV] leaves this open) is the caller's job.
"""
from .affinity import (
    MAX_DENSE_VOCAB,
    OMEGA_KINDS,
    AffinityMatrix,
    AffinityScores,
    affinity_scores,
    rdk_proposal,
    select_temperature,
)
from .priors import leading_component_prior, taylor_proposal, unigram_prior
from .verification import masked_acceptance, masked_transport, masked_verify, transport, verify, verify_block
from .vocabulary import VocabularyMap, frequency_ranked

__all__ = [
    "MAX_DENSE_VOCAB",
    "OMEGA_KINDS",
    "AffinityMatrix",
    "AffinityScores",
    "VocabularyMap",
    "affinity_scores",
    "frequency_ranked",
    "leading_component_prior",
    "masked_acceptance",
    "masked_transport",
    "masked_verify",
    "rdk_proposal",
    "select_temperature",
    "taylor_proposal",
    "transport",
    "unigram_prior",
    "verify",
    "verify_block",
]

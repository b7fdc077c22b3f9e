"""The online acceptance estimate of ``tree="auto"``: :class:`AcceptanceEstimate` (alpha(k) from
the run's statistics, with a prior; docs/design/tree-search.md, "The estimator")."""
from __future__ import annotations

import math
import threading
from typing import Tuple

import numpy as np

from ... import _validation as check


def _family(k: np.ndarray, a: np.ndarray, gamma: np.ndarray) -> np.ndarray:
    """alpha(k) = 1 - (1 - a)^(k^gamma), broadcast over a, gamma and k."""
    return 1.0 - np.power(1.0 - a, np.power(k, gamma))


def _isotonic(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Weighted least-squares nondecreasing fit (pool adjacent violators)."""
    blocks = []  # [mean, weight, count]
    for v, w in zip(values, weights):
        blocks.append([v, w, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            v2, w2, c2 = blocks.pop()
            v1, w1, c1 = blocks.pop()
            blocks.append([(v1 * w1 + v2 * w2) / (w1 + w2), w1 + w2, c1 + c2])
    return np.concatenate([np.full(c, v) for v, _, c in blocks])


class AcceptanceEstimate:
    """alpha(k) learnt while generating, with a prior for group sizes never seen.

    State: per group size k, the verified groups n_k and their accepted count s_k (an exact
    observation adds its alpha to s_k and 1 to n_k). :meth:`curve` fits the family
    1 - (1 - a)^(k^gamma) to all sizes (MAP on a grid; prior: a ~ Beta with mean prior[0] and
    weight prior_weight, gamma ~ Normal(prior[1], 0.5)), shrinks each size's rate s_k / n_k
    towards the fit with prior_weight pseudo-groups, and makes the result nondecreasing by
    weighted isotonic regression (docs/design/tree-search.md, "The estimator"). With no data the
    curve is the prior 1 - (1 - prior[0])^(k^prior[1]).

    The loop makes one per generate call; a lock still makes every method safe from several threads.
    """

    def __init__(self, prior: Tuple[float, float] = (0.5, 0.5), prior_weight: float = 2.0):
        a0, gamma0 = (float(x) for x in prior)
        if not (0.0 < a0 < 1.0) or not (0.0 <= gamma0 <= 2.0):
            raise ValueError(f"'prior' must be (a, gamma) with 0 < a < 1 and 0 <= gamma <= 2, got {prior!r}")
        if not (math.isfinite(float(prior_weight)) and prior_weight > 0):
            raise ValueError(f"'prior_weight' must be a finite number > 0, got {prior_weight!r}")
        self.prior = (a0, gamma0)
        self.prior_weight = float(prior_weight)
        self._groups = np.zeros(0)
        self._accepted = np.zeros(0)
        self._fit = (a0, gamma0)
        self._stale = False
        self._lock = threading.Lock()

    def _add(self, k: int, accepted: float, groups: float = 1.0) -> None:
        with self._lock:
            if k > self._groups.size:
                self._groups = np.pad(self._groups, (0, k - self._groups.size))
                self._accepted = np.pad(self._accepted, (0, k - self._accepted.size))
            self._groups[k - 1] += groups
            self._accepted[k - 1] += accepted
            self._stale = True

    def observe(self, k: int, accepted: bool) -> None:
        """One verified group of k children; ``accepted``: whether one of them was accepted."""
        k = check.count(k, "k", 1)
        if not isinstance(accepted, (bool, np.bool_, int, np.integer)) or accepted not in (0, 1):
            raise ValueError(f"'accepted' must be a bool, got {accepted!r}")
        self._add(k, float(accepted))

    def observe_counts(self, k: int, groups: int, accepted: int) -> None:
        """``groups`` verified groups of k children, ``accepted`` of them accepted (as many
        :meth:`observe` calls)."""
        k = check.count(k, "k", 1)
        groups = check.count(groups, "groups", 0)
        accepted = check.count(accepted, "accepted", 0)
        if accepted > groups:
            raise ValueError(f"'accepted' ({accepted}) must be at most 'groups' ({groups})")
        if groups:
            self._add(k, float(accepted), float(groups))

    def observe_exact(self, k: int, alpha: float) -> None:
        """The verifier's exact P(accept) at a visited node with a group of k children (lower variance)."""
        k = check.count(k, "k", 1)
        value = float(alpha)
        if not (0.0 <= value <= 1.0):
            raise ValueError(f"'alpha' must be a probability in [0, 1], got {alpha!r}")
        self._add(k, value)

    def counts(self) -> Tuple[np.ndarray, np.ndarray]:
        """(groups, accepted): (K_seen,) float64 per group size 1..K_seen (accepted may be fractional)."""
        with self._lock:
            return self._groups.copy(), self._accepted.copy()

    def _fit_family(self, groups: np.ndarray, accepted: np.ndarray) -> Tuple[float, float]:
        """MAP (a, gamma) of the family on a grid, refined once around the coarse optimum."""
        seen = np.flatnonzero(groups > 0)
        k = (seen + 1.0)[None, None, :]
        a0, gamma0 = self.prior
        a_grid, gamma_grid = np.linspace(0.01, 0.99, 99), np.linspace(0.0, 2.0, 51)
        for _ in range(2):
            a, gamma = a_grid[:, None, None], gamma_grid[None, :, None]
            alpha = np.clip(_family(k, a, gamma), 1e-12, 1 - 1e-12)
            score = (accepted[seen] * np.log(alpha) + (groups[seen] - accepted[seen]) * np.log1p(-alpha)).sum(axis=2)
            score += self.prior_weight * (a0 * np.log(a[..., 0]) + (1 - a0) * np.log1p(-a[..., 0]))
            score -= (gamma[..., 0] - gamma0) ** 2 / (2 * 0.5 ** 2)
            i, j = np.unravel_index(np.argmax(score), score.shape)
            a_best, gamma_best = a_grid[i], gamma_grid[j]
            a_grid = np.clip(np.linspace(a_best - 0.01, a_best + 0.01, 21), 1e-4, 1 - 1e-4)
            gamma_grid = np.clip(np.linspace(gamma_best - 0.04, gamma_best + 0.04, 21), 0.0, 2.0)
        return float(a_best), float(gamma_best)

    def curve(self, K: int) -> np.ndarray:
        """(K,) nondecreasing estimate of alpha(1..K), in [0, 1]."""
        K = check.count(K, "K", 1)
        with self._lock:
            groups, accepted = self._groups.copy(), self._accepted.copy()
            if self._stale:
                self._fit = self._fit_family(groups, accepted) if groups.sum() > 0 else self.prior
                self._stale = False
            a, gamma = self._fit
        n = np.zeros(K)
        s = np.zeros(K)
        n[:min(K, groups.size)] = groups[:K]
        s[:min(K, groups.size)] = accepted[:K]
        fitted = _family(np.arange(1.0, K + 1), a, gamma)
        c = self.prior_weight
        return np.clip(_isotonic((s + c * fitted) / (n + c), n + c), 0.0, 1.0)

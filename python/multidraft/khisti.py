"""Khisti et al.'s theorems for identical drafts ([CD] Section 3), in this project's notation
(``p`` target, ``q`` draft; the paper swaps the letters). Both reduce to [GR]'s subset
selection, evaluated by its O(V log V) ratio scan; the sampler is ``multidraft.verifier("khisti")``.
"""
from __future__ import annotations

from typing import Union

import numpy as np

from .otlp import optimal_subset


def optimal_acceptance_two_drafts(p, q) -> Union[float, np.ndarray]:
    """Theorem 3: P*(acc) = 1 + min_S [p(S) - q(S)^2] for two identical drafts from ``q``.

    ``p``, ``q``: (V,) or (B, V). Equal to ``multidraft.optimal_acceptance(p, q, 2)``.
    """
    return optimal_subset(p, q, 2)[0]


def accepts_always(p, q, n: int = 2) -> Union[bool, np.ndarray]:
    """Theorem 2 (n = 2; its K-draft analogue for n > 2): P*(acc) = 1 iff p(S) >= q(S)^n for every
    token set S, i.e. iff the smallest minimiser H* of [GR]'s psi is empty (the optimal
    importance weights make the selected token's law equal to p exactly).
    """
    _, H = optimal_subset(p, q, n)
    empty = ~np.asarray(H).any(axis=-1)
    return bool(empty) if np.ndim(empty) == 0 else empty

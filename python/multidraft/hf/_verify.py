"""Step 3 of a round: a row's drafts verified position by position, and the round's tokens cut
where the stopping criteria end the row."""
from __future__ import annotations

from typing import Callable, List, Tuple

import numpy as np
import torch

from .. import _core
from .. import _validation as check
from ._draft import Groups
from ._stats import GenerationStats


def verify_row(drafts, q, p: Callable[[int, int], np.ndarray], groups: Groups, rng: np.random.Generator,
               stats: GenerationStats):
    """Verify one row's drafts (n, L) position by position; ``p(m, j)``: the target law after the
    first j tokens of chain m.

    Returns the round's new tokens (the accepted draft tokens, then the verifier's or the bonus
    token) and the index of a draft sequence whose prefix they extend (its cache slots are kept).
    """
    n, L = drafts.shape
    alive = tuple(range(n))
    tokens: List[int] = []
    for j in range(L):
        drawn, scheme = groups[j][alive]
        token, accepted = scheme.verify(p(alive[0], j), q[alive[0], j], drawn, rng)
        tokens.append(int(token))
        stats.reached[j] += 1
        if not accepted:
            return tokens, alive[0]
        stats.accepted[j] += 1
        alive = tuple(m for m in alive if drafts[m, j] == token)
    bonus = _core.sample_rows(p(alive[0], L)[None], check.row_seeds(rng, 1))  # every draft accepted
    tokens.append(int(bonus[0]))
    return tokens, alive[0]


def until_stop(stopping, row: List[int], tokens: List[int]) -> Tuple[List[int], bool]:
    """(the round's tokens up to the first after which the stopping criteria end the row, whether
    they did): criteria are checked after every token, as transformers checks them."""
    for i in range(len(tokens)):
        if bool(stopping(torch.tensor([row + tokens[: i + 1]]), None)[0]):
            return tokens[: i + 1], True
    return tokens, False

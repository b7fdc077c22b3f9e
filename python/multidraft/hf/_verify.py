"""Step 3 of a round: a row's draft tree verified from the root down, one group per node, and
the round's tokens cut where the stopping criteria end the row."""
from __future__ import annotations

from typing import Callable, List, Tuple

import numpy as np
import torch

from .._device import sample_rows, to_host
from ._round import RoundTree
from ._stats import GenerationStats


def verify_row(tree: RoundTree, p: Callable[[int], torch.Tensor], rng: np.random.Generator,
               stats: GenerationStats) -> Tuple[List[int], List[int]]:
    """Verify one row's tree; ``p(node)``: the target law (V,) after that node (0: the root), on
    the models' device; each verification brings its token and whether it was a draft to the host.

    At each node its group is verified against the target law there: the output token is a sample
    of that law; if it is one of the drafts the walk continues at that child, else the round ends
    with it. A node without drafts (a leaf) ends the round with a token drawn from its law.

    Returns the round's new tokens and the accepted nodes (the path whose slots the caches keep).
    """
    node, tokens, path = 0, [], []
    while True:
        group = tree.groups[node]
        if group is None:  # a leaf accepted: the bonus token
            tokens.append(int(to_host(sample_rows(p(node)[None], rng))[0]))
            return tokens, path
        token, accepted = (to_host(x) for x in group.verifier.verify(p(node), group.q, group.drafts, rng))
        tokens.append(int(token))
        stats.record(tree.depths[node], len(group.drafts), accepted)
        if not accepted:
            return tokens, path
        node = group.children[int(token)]
        path.append(node)


def until_stop(stopping, row: List[int], tokens: List[int]) -> Tuple[List[int], bool]:
    """(the round's tokens up to the first after which the stopping criteria end the row, whether
    they did): criteria are checked after every token, as transformers checks them."""
    for i in range(len(tokens)):
        if bool(stopping(torch.tensor([row + tokens[: i + 1]]), None)[0]):
            return tokens[: i + 1], True
    return tokens, False

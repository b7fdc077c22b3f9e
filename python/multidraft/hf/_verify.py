"""Step 3 of a round: the rows' draft trees verified from the root down, one group per node (the
rows in lockstep, batched), and the round's tokens cut where the stopping criteria end the row."""
from __future__ import annotations

from typing import Dict, List, Tuple

import numpy as np
import torch

from .._device import sample_rows, to_host
from .._validation import row_seeds
from ._round import RoundTree
from ._stats import GenerationStats


def verify_rows(trees: List[RoundTree], laws, generators: List[np.random.Generator],
                stats: GenerationStats) -> List[Tuple[List[int], List[int]]]:
    """Verify every active row's tree; ``laws(pairs)``: the target laws (len(pairs), V) after the
    (row, node) pairs (node 0: the root), on the models' device.

    Each row walks its tree from the root: at a node its group is verified against the target law
    there, the output token is a sample of that law; if it is one of the drafts the walk continues
    at that child, else the row's round ends with it. A node without drafts (a leaf) ends the round
    with a token drawn from its law. The rows walk in lockstep: at each step, the rows verifying a
    group of the same verifier and size form one batched call, and the rows at a leaf one draw,
    each row with a seed from its own generator. A batch equals its rows one at a time (the
    verifiers' contract, kept by the device path: docs/design/device-path.md, Section 6), so every
    row gets the tokens it would get alone. Each call brings its tokens and flags to the host.

    Returns per row the round's new tokens and the accepted nodes (the path whose slots the caches
    keep).
    """
    node = [0] * len(trees)
    tokens: List[List[int]] = [[] for _ in trees]
    paths: List[List[int]] = [[] for _ in trees]
    walking = list(range(len(trees)))
    while walking:
        calls: Dict[Tuple[int, int], List[int]] = {}
        for r in walking:
            group = trees[r].groups[node[r]]
            key = (-1, 0) if group is None else (id(group.verifier), len(group.drafts))
            calls.setdefault(key, []).append(r)
        ended = set()
        for key, rows in calls.items():
            p = laws([(r, node[r]) for r in rows])
            seeds = [int(row_seeds(generators[r], 1)[0]) for r in rows]
            if key == (-1, 0):  # leaves reached: the bonus token
                for r, token in zip(rows, to_host(sample_rows(p, seeds)).tolist()):
                    tokens[r].append(token)
                    ended.add(r)
                continue
            groups = [trees[r].groups[node[r]] for r in rows]
            drafted = groups[0].verifier.verify(p, torch.stack([g.q for g in groups]),
                                                np.stack([g.drafts for g in groups]), seeds)
            for r, group, token, accepted in zip(rows, groups, *(to_host(x).tolist() for x in drafted)):
                tokens[r].append(token)
                stats.record(trees[r].depths[node[r]], len(group.drafts), accepted)
                if not accepted:
                    ended.add(r)
                    continue
                node[r] = group.children[token]
                paths[r].append(node[r])
        walking = [r for r in walking if r not in ended]
    return list(zip(tokens, paths))


def until_stop(stopping, row: List[int], tokens: List[int]) -> Tuple[List[int], bool]:
    """(the round's tokens up to the first after which the stopping criteria end the row, whether
    they did): criteria are checked after every token, as transformers checks them."""
    for i in range(len(tokens)):
        if bool(stopping(torch.tensor([row + tokens[: i + 1]]), None)[0]):
            return tokens[: i + 1], True
    return tokens, False

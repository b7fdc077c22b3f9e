"""Step 3 of a round: the rows' draft trees verified from the root down, one group per node (the
rows in lockstep, batched), and the round's tokens cut where the stopping criteria end the row."""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np
import torch

from .._device import on_device, sample_rows, to_host
from .._device.loop import Checks, verify_all
from .._validation import row_seeds
from ._round import RoundTree
from ._stats import GenerationStats

#: (node's verifier id, group size) of a leaf: a bonus token drawn from the node's law.
_LEAF = (-1, 0)


def verify_rows(trees: List[RoundTree], laws, generators: List[np.random.Generator], stats: GenerationStats,
                support: Optional[int], checks: Checks) -> List[Tuple[List[int], List[int]]]:
    """Verify every active row's tree; ``laws(pairs)``: the target laws (len(pairs), V) after the
    (row, node) pairs (node 0: the root), on the models' device; ``support``: the bound on the
    draft laws' supports (``_laws.support_bound``); ``checks``: read with the verification's read.

    Each row walks its tree from the root: at a node its group is verified against the target law
    there, the output token is a sample of that law; if it is one of the drafts the walk continues
    at that child, else the row's round ends with it. A node without drafts (a leaf) ends the round
    with a token drawn from its law. Each node's seed is drawn from its row's generator first, in
    node order, so a node's outcome does not depend on when it is computed:

    - on a device, every node of every row is verified (and every leaf drawn) before the walk, one
      call per verifier and group size, read in ONE host read (``_device.loop.verify_all``); an
      unreached node's outcome is unused, so the law is that of the walk;
    - on the host (models on the CPU, where the core reads the laws in place and an unreached node
      would be wasted work), the rows walk in lockstep, verifying what they reach: at each step the
      rows verifying a group of the same verifier and size form one batched call, the rows at a
      leaf one draw.

    A batch equals its rows one at a time (the verifiers' contract, kept by the device path:
    docs/design/device-path.md, Section 6), so every row gets the tokens it would get alone.
    Returns per row the round's new tokens and the accepted nodes (the path whose slots the caches
    keep).
    """
    seeds = [row_seeds(generator, len(tree.tokens)) for tree, generator in zip(trees, generators)]
    outcome = _verified_before_the_walk(trees, laws, seeds, support, checks) \
        if trees and on_device(trees[0].groups[0].q) else None
    node = [0] * len(trees)
    tokens: List[List[int]] = [[] for _ in trees]
    paths: List[List[int]] = [[] for _ in trees]
    walking = list(range(len(trees)))
    while walking:
        calls: Dict[Tuple[int, int], List[int]] = {}
        for r in walking:
            calls.setdefault(_key(trees[r], node[r]), []).append(r)
        ended = set()
        for key, rows in calls.items():
            pairs = [(r, node[r]) for r in rows]
            found = [outcome[pair] for pair in pairs] if outcome is not None else \
                list(zip(*_verified(trees, laws, seeds, {key: pairs}, checks)[key]))
            for r, (token, accepted) in zip(rows, found):
                tokens[r].append(token)
                if key == _LEAF:
                    ended.add(r)
                    continue
                group = trees[r].groups[node[r]]
                stats.record(trees[r].depths[node[r]], len(group.drafts), accepted)
                if not accepted:
                    ended.add(r)
                    continue
                node[r] = group.children[token]
                paths[r].append(node[r])
        walking = [r for r in walking if r not in ended]
    return list(zip(tokens, paths))


def _key(tree: RoundTree, node: int) -> Tuple[int, int]:
    group = tree.groups[node]
    return _LEAF if group is None else (id(group.verifier), len(group.drafts))


def _verified(trees, laws, seeds, calls: Dict[Tuple[int, int], List[Tuple[int, int]]], checks: Checks,
              support: Optional[int] = None) -> Dict[Tuple[int, int], Tuple[List[int], List[bool]]]:
    """{key: (tokens, accepted flags)} of the (row, node) pairs of each call; on a device the calls
    together in one host read (``verify_all``), on the host each call and its read in turn."""
    groups, order = [], []
    for key, pairs in calls.items():
        if key == _LEAF:
            continue
        nodes = [trees[r].groups[n] for r, n in pairs]
        p = laws(pairs)
        q = torch.stack([g.q for g in nodes])
        groups.append((nodes[0].verifier, p, q, np.stack([g.drafts for g in nodes]),
                       np.array([seeds[r][n] for r, n in pairs], dtype=np.uint64)))
        order.append(key)
    leaves = calls.get(_LEAF)
    leaf_laws = laws(leaves) if leaves else None
    leaf_seeds = np.array([seeds[r][n] for r, n in leaves or ()], dtype=np.uint64)
    if on_device(groups[0][1] if groups else leaf_laws):
        verified, drawn = verify_all(groups, leaf_laws, leaf_seeds, support, checks)
    else:
        checks.read()
        verified = [tuple(to_host(x) for x in g[0].verify(*g[1:])) for g in groups]
        drawn = to_host(sample_rows(leaf_laws, leaf_seeds)) if leaves else None
    out = {key: (t.tolist(), a.tolist()) for key, (t, a) in zip(order, verified)}
    if leaves:
        out[_LEAF] = (drawn.tolist(), [False] * len(leaves))
    return out


def _verified_before_the_walk(trees, laws, seeds, support: Optional[int], checks: Checks):
    """{(row, node): (token, accepted)} for every node of every row, in one host read."""
    calls: Dict[Tuple[int, int], List[Tuple[int, int]]] = {}
    for r, tree in enumerate(trees):
        for n in range(len(tree.tokens)):
            calls.setdefault(_key(tree, n), []).append((r, n))
    found = _verified(trees, laws, seeds, calls, checks, support)
    return {pair: outcome for key, pairs in calls.items() for pair, outcome in zip(pairs, zip(*found[key]))}


def until_stop(stopping, row: List[int], tokens: List[int]) -> Tuple[List[int], bool]:
    """(the round's tokens up to the first after which the stopping criteria end the row, whether
    they did): criteria are checked after every token, as transformers checks them."""
    for i in range(len(tokens)):
        if stopping(torch.tensor([row + tokens[: i + 1]], device="cpu"), None)[0].tolist():  # no device read
            return tokens[: i + 1], True
    return tokens, False

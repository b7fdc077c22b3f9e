"""The generation loop: rounds of draft, score and verify (see the package docstring) until every
row stops, with both models' caches kept across rounds."""
from __future__ import annotations

import time
from typing import List, Optional, Tuple

import torch

from .._device import host_bytes_read
from .._device.loop import Checks
from ._draft import draft_round
from ._laws import support_bound
from ._score import score_round
from ._setup import Setup, row_generators
from ._stats import GenerationStats
from ._cache import TreeCache, check_model
from ._verify import until_stop, verify_rows


def run(s: Setup) -> Tuple[torch.Tensor, GenerationStats]:
    """The generation loop (package docstring): (sequences (B, T + N), statistics)."""
    layouts = check_model(s.target, "target"), check_model(s.draft, "draft_model")
    V = s.vocabulary.target_width(s.target, s.draft)
    s.start(V)
    B = len(s.prompts)
    rows = [s.ids[b].tolist() for b in range(B)]  # grows with the new tokens
    generators = row_generators(s.seed, B)
    stats = s.new_stats()
    new: List[List[int]] = [[] for _ in range(B)]
    done = [False] * B
    caches: Optional[Tuple[TreeCache, TreeCache]] = None
    checks = Checks()  # the refusals of the laws the loop computes, read with its next host read
    with torch.inference_mode():
        while not all(done):
            if caches is None:  # both models read every committed token not in their cache
                caches = TreeCache(s.draft, layouts[1], B), TreeCache(s.target, layouts[0], B)
                pending = [[[] if done[b] else s.prompts[b] + new[b] for b in range(B)] for _ in caches]
            active = [b for b in range(B) if not done[b]]
            shape = s.shape_for_round(stats)
            limits = [_depth_limit(s, shape.depth, rows[b]) for b in active]
            read_before = host_bytes_read()
            start = time.perf_counter()
            trees = draft_round(s, shape, caches[0], pending[0], active, rows, [generators[b] for b in active], V,
                                limits, checks)
            middle = time.perf_counter()
            p = score_round(s, caches[1], pending[1], active, rows, trees, V, checks)
            end = time.perf_counter()
            kept = [[[] for _ in range(B)] for _ in caches]
            verified = verify_rows(trees, p.batch, [generators[b] for b in active], stats,
                                   support_bound(s.draft_top_k), checks)
            for r, b in enumerate(active):
                tree = trees[r]
                tokens, path = verified[r]
                if s.planner is not None and r == 0 and s.planner.observing:
                    s.planner.observe_root(p(r, 0), tree.groups[0].q)  # tree="auto": its first roots, exactly
                stats.tree_nodes += tree.size
                tokens, done[b] = until_stop(s.stopping, rows[b], tokens)
                rows[b] += tokens
                new[b] += tokens
                stats.new_tokens += len(tokens)
                if s.streamer is not None and tokens:
                    s.streamer.put(torch.tensor(tokens, device="cpu"))
                fed = [node for node in path if tree.groups[node] is not None]  # the draft model read these
                kept[0][b], kept[1][b] = fed, path
                pending[0][b] = [] if done[b] else tokens[len(fed):]
                pending[1][b] = [] if done[b] else tokens[-1:]
            stats.verify_seconds += time.perf_counter() - end
            stats.draft_seconds += middle - start
            stats.target_seconds += end - middle
            stats.row_rounds += len(active)
            stats.target_calls += 1
            alive = [not d for d in done]
            if s.kv_cache:
                for cache, nodes in zip(caches, kept):
                    cache.commit(nodes, alive)
            else:
                _count_positions(stats, caches)
                caches = None
            stats.host_bytes += host_bytes_read() - read_before
    if caches is not None:
        _count_positions(stats, caches)
    if s.streamer is not None:
        s.streamer.end()
    width = max(len(t) for t in new)
    # built on the host, one copy to the device (not one per row)
    tail = torch.tensor([row + [s.pad_token_id] * (width - len(row)) for row in new], dtype=torch.long,
                        device=s.ids.device)
    return torch.cat([s.ids, tail], dim=1), stats


def _count_positions(stats: GenerationStats, caches: Tuple[TreeCache, TreeCache]) -> None:
    stats.draft_positions += caches[0].positions_computed
    stats.target_positions += caches[1].positions_computed


def _depth_limit(s: Setup, depth: int, row: List[int]) -> int:
    """Draft depth worth drawing for a row this round: the shape's, or less near ``max_length``
    (so that no position id runs past what the row can reach)."""
    return depth if s.max_length is None else max(1, min(depth, s.max_length - len(row) - 1))

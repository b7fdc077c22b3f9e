"""The bookkeeping of multidraft.hf's KV cache (hf/_cache.py, hf/_slots.py) lives on the host: a
forward pass and a commit read nothing from the device and launch nothing of their own but one copy
per forward (none on a CPU) and a commit's gathers; a mask is the bits of 0 and finfo.min in the
model's dtype; a commit that slices keeps what a gather keeps. (That the masks, positions and
kept caches are exact is the business of test_hf.py and test_trees.py.)"""
import numpy as np
import pytest

pytest.importorskip("torch", reason="multidraft.hf needs torch and transformers: pip install 'multidraft[hf]'")
import torch
from transformers import DynamicCache

from multidraft.bench.launches import Launches
from multidraft.hf._cache import TreeCache, _mask_values, _upload, check_model
from hf_models import tiny_model

_BITS = {2: torch.int16, 4: torch.int32, 8: torch.int64}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.float64])
def test_mask_values_are_the_bits_of_zero_and_finfo_min(dtype):
    host, blocked = _mask_values(dtype)
    values = torch.from_numpy(np.array([0, blocked], dtype=host)).view(dtype)
    expected = torch.tensor([0.0, torch.finfo(dtype).min], dtype=dtype)
    assert torch.equal(values.view(_BITS[dtype.itemsize]), expected.view(_BITS[dtype.itemsize]))


def test_upload_gives_each_array_back_in_its_dtype():
    ids = np.arange(6, dtype=np.int64).reshape(2, 3)
    flags = np.array([[True, False, True]])
    host, blocked = _mask_values(torch.bfloat16)
    mask = np.where(np.eye(3, dtype=bool), host.type(0), blocked).astype(host)[None]  # (1, 3, 3), 18 bytes
    got = _upload([(ids, torch.long), (flags, torch.bool), (mask, torch.bfloat16)], torch.device("cpu"))
    assert torch.equal(got[0], torch.from_numpy(ids)) and torch.equal(got[1], torch.from_numpy(flags))
    expected = torch.zeros((1, 3, 3), dtype=torch.bfloat16).masked_fill(~torch.eye(3, dtype=torch.bool),
                                                                        torch.finfo(torch.bfloat16).min)
    assert got[2].dtype == torch.bfloat16 and torch.equal(got[2].view(torch.int16), expected.view(torch.int16))


def _round(cache: TreeCache):
    """Two rows: pending tokens (row 1 left-padded), then a chain of two draft nodes per row."""
    ids = np.array([[5, 6, 7], [0, 8, 9]])
    valid = np.array([[True, True, True], [False, True, True]])
    pos = np.array([[0, 1, 2], [0, 0, 1]])
    cache.forward(ids, valid, pos, np.zeros_like(ids), np.ones((2, 1, 1), dtype=bool), keep=1)
    chain = np.tril(np.ones((3, 3), dtype=bool))  # node 2's parent is node 1
    cache.forward(np.array([[3, 4], [3, 4]]), np.ones((2, 2), dtype=bool), np.array([[3, 4], [2, 3]]),
                  np.array([[1, 2], [1, 2]]), np.stack([chain, chain]), keep=2)


def test_forward_and_commit_read_nothing_from_the_device():
    model = tiny_model("llama", seed=0, layers=2)
    cache = TreeCache(model, check_model(model, "target"), rows=2)
    with torch.inference_mode(), Launches([model]) as count:
        _round(cache)
        assert (count.ops, count.reads) == (0, 0)
        cache.commit([[1], [1, 2]], [True, True])  # rows keep different slots: one gather per tensor
        assert (count.ops, count.reads) == (2 * len(cache.cache.layers), 0)
    assert cache.committed().tolist() == [4, 4] and cache.positions_computed == 9
    assert cache.pos.tolist() == [[0, 1, 2, 3], [0, 1, 2, 3]] and cache.valid.all()


@pytest.mark.parametrize("kept, alive", [([[1, 2], [1, 2]], [True, True]),  # the same run of slots: a slice
                                         ([[], [1]], [True, True]), ([[1], [2]], [True, False])])
def test_a_commit_keeps_the_kept_slots_right_aligned(kept, alive):
    model = tiny_model("llama", seed=0, layers=1)
    cache = TreeCache(model, check_model(model, "target"), rows=2)
    pos = np.array([[0, 0, 1, 2, 2], [0, 1, 2, 3, 3]])
    cache.valid, cache.pos = np.array([[False] + [True] * 4, [True] * 5]), pos
    cache.node = np.array([[0, 0, 0, 1, 2], [0, 0, 0, 1, 2]])
    keys, values = torch.randn(2, 2, 5, 3), torch.randn(2, 2, 5, 3)
    cache.cache = DynamicCache()
    cache.cache.update(keys, values, 0)
    kept_nodes = [{0, *nodes} if alive[b] else set() for b, nodes in enumerate(kept)]
    slots = [[i for i in range(5) if cache.valid[b, i] and cache.node[b, i] in kept_nodes[b]] for b in range(2)]
    cache.commit(kept, alive)
    width = max(map(len, slots))
    layer = cache.cache.layers[0]
    assert layer.keys.shape[2] == width
    for b, row in enumerate(slots):  # the row's kept slots last, in order; invalid slots before them
        assert cache.valid[b].tolist() == [False] * (width - len(row)) + [True] * len(row)
        assert cache.pos[b, width - len(row):].tolist() == pos[b, row].tolist()
        assert torch.equal(layer.keys[b, :, width - len(row):], keys[b][:, row])
        assert torch.equal(layer.values[b, :, width - len(row):], values[b][:, row])

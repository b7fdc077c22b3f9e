"""multidraft.hf's law of transformers' logits processors (hf/_processors.py: processor_law).

Each position's law must be the processors applied to that position alone (its prefix as a (1, T)
batch, its scores (1, V) in float32), in their order, then argmax or the law's softmax: compared
bit for bit, for random positions of mixed prefix lengths in mixed order, on the host path and on
the accelerator's path (CPU tensors with multidraft._device.CPU_ON_HOST = False). Processors that
ignore the ids run once over all positions and need no prefixes; those that read them get one
upload of the ids per call, whatever the number of groups, and none when they read only the ids'
length (multidraft.bench.launches counts both).
"""
import functools
import random

import pytest

pytest.importorskip("torch", reason="multidraft.hf needs torch and transformers: pip install 'multidraft[hf]'")
import torch
from transformers.generation.logits_process import (ExponentialDecayLengthPenalty, MinLengthLogitsProcessor,
                                                     MinNewTokensLengthLogitsProcessor, MinPLogitsWarper,
                                                     NoRepeatNGramLogitsProcessor, RepetitionPenaltyLogitsProcessor,
                                                     SuppressTokensAtBeginLogitsProcessor,
                                                     SuppressTokensLogitsProcessor, TemperatureLogitsWarper,
                                                     TopKLogitsWarper, TopPLogitsWarper)

import multidraft as md
from multidraft.bench.launches import Launches
from multidraft.hf._laws import one_hot_argmax
from multidraft.hf._processors import _call_reads, _ids_use, processor_law

V = 40
ROWS = 3
PROMPT_LENGTH = 3
EOS = 0


def id_free():
    return [TemperatureLogitsWarper(0.7), TopKLogitsWarper(12), TopPLogitsWarper(0.9), MinPLogitsWarper(0.05)]


def reading_ids():
    return [RepetitionPenaltyLogitsProcessor(1.5), NoRepeatNGramLogitsProcessor(2),
            MinNewTokensLengthLogitsProcessor(PROMPT_LENGTH, 3, EOS)]


def length_only():
    """Processors that read the prefix length only (``input_ids.shape[-1]``), each acting on some
    of the lengths of :func:`positions`."""
    return [MinLengthLogitsProcessor(5, EOS), MinNewTokensLengthLogitsProcessor(PROMPT_LENGTH, 3, EOS),
            SuppressTokensAtBeginLogitsProcessor([1, 2], 4), ExponentialDecayLengthPenalty((4, 1.5), EOS, 3)]


PROCESSORS = {  # name: a function making fresh processors (some keep state)
    "none": lambda: [],
    "id-free": id_free,
    "reading ids": reading_ids,
    "mixed": lambda: [RepetitionPenaltyLogitsProcessor(1.3), TemperatureLogitsWarper(0.8),
                      NoRepeatNGramLogitsProcessor(2), TopKLogitsWarper(10),
                      MinNewTokensLengthLogitsProcessor(PROMPT_LENGTH, 2, EOS), SuppressTokensLogitsProcessor([1, 2]),
                      TopPLogitsWarper(0.85), MinPLogitsWarper(0.02)],
    "id-free first": lambda: [*id_free()[:2], *reading_ids(), *id_free()[2:]],
    "length only": lambda: [*length_only(), *id_free()],
}


def positions(seed, n, lengths=(3, 4, 5, 6)):
    """(logits (n, V) float32, prefixes, owners): random prefixes of mixed lengths with repeated
    tokens (so the repetition and n-gram processors act), in random order."""
    rng = random.Random(seed)
    prefixes = [[rng.randrange(5) for _ in range(rng.choice(lengths))] for _ in range(n)]
    owners = [rng.randrange(ROWS) for _ in range(n)]
    logits = 3 * torch.randn(n, V, generator=torch.Generator().manual_seed(seed))
    return logits, prefixes, owners


def alone(processors, prefix, scores):
    """The processors on one position: its prefix as a (1, T) batch, its scores (1, V) in float32."""
    ids, scores = torch.tensor([prefix], dtype=torch.long), scores.to(torch.float32).reshape(1, -1)
    for processor in processors:
        scores = processor(ids, scores)
    return scores


def reference(processors, logits, prefixes, greedy):
    """Each position's law on its own: argmax or the law's softmax (md.softmax, float64) of its scores."""
    scores = torch.cat([alone(processors, prefix, row) for prefix, row in zip(prefixes, logits)])
    return one_hot_argmax(scores) if greedy else md.softmax(scores, 1.0)


@pytest.fixture(params=[True, False], ids=["host path", "device path"])
def cpu_on_host(request, monkeypatch):
    monkeypatch.setattr("multidraft._device.CPU_ON_HOST", request.param)
    return request.param


@pytest.mark.parametrize("greedy", [False, True], ids=["sampling", "greedy"])
@pytest.mark.parametrize("name", list(PROCESSORS))
@pytest.mark.parametrize("seed", range(3))
def test_each_position_gets_the_processors_on_its_own_prefix(seed, name, greedy, cpu_on_host):
    logits, prefixes, owners = positions(seed, 9 + seed)
    law = processor_law(PROCESSORS[name](), greedy, ROWS)
    got = law(logits, prefixes if law.uses_prefixes else None, owners)
    assert got.dtype == torch.float64 and got.shape == logits.shape
    assert torch.equal(got, reference(PROCESSORS[name](), logits, prefixes, greedy))


@pytest.mark.parametrize("name", ["reading ids", "mixed"])
def test_positions_already_in_group_order_and_one_group(name, cpu_on_host):
    """A chain's or a tree's positions come with nondecreasing prefix lengths (no reordering), a
    draft depth's positions often with one length (one group)."""
    logits, prefixes, owners = positions(7, 8)
    for ordered in (sorted(prefixes, key=len), [prefixes[0] + [1] * k for k in range(8)], [prefixes[0]] * 8):
        law = processor_law(PROCESSORS[name](), False, ROWS)
        assert torch.equal(law(logits, ordered, owners), reference(PROCESSORS[name](), logits, ordered, False))


def test_a_processor_with_batch_state_sees_each_position_in_its_owners_row(cpu_on_host):
    """The repetition penalty with per-row prompt lengths (a tensor of the batch's rows) is not
    row-wise: each position sits in its owner's row of a batch of exactly ROWS rows, where it is
    penalised as the same penalty with that row's prompt length (an int) penalises it alone."""
    ignore = [1, 4, 2]
    try:
        RepetitionPenaltyLogitsProcessor(1.7, prompt_ignore_length=torch.tensor(ignore))
    except ValueError:  # the tests' transformers (constraints.txt) takes one; releases before 5.23 do not
        pytest.skip("this transformers takes no per-row prompt_ignore_length")
    logits, prefixes, owners = positions(3, 10)
    law = processor_law([TemperatureLogitsWarper(0.9), RepetitionPenaltyLogitsProcessor(
        1.7, prompt_ignore_length=torch.tensor(ignore)), TopKLogitsWarper(15)], False, ROWS)
    got = law(logits, prefixes, owners)
    for i, (prefix, owner) in enumerate(zip(prefixes, owners)):
        own = [TemperatureLogitsWarper(0.9), RepetitionPenaltyLogitsProcessor(1.7, prompt_ignore_length=ignore[owner]),
               TopKLogitsWarper(15)]
        assert torch.equal(got[i], md.softmax(alone(own, prefix, logits[i]), 1.0)[0]), i


def test_only_processors_that_read_ids_need_prefixes():
    assert not processor_law([], False, 1).uses_prefixes
    assert not processor_law(id_free(), False, 1).uses_prefixes
    assert not processor_law([SuppressTokensLogitsProcessor([1])], True, 1).uses_prefixes
    assert processor_law(reading_ids(), False, 1).uses_prefixes
    assert processor_law([*id_free(), NoRepeatNGramLogitsProcessor(3)], False, 1).uses_prefixes


def counted(law, logits, prefixes, owners):
    with torch.inference_mode(), Launches() as count:
        law(logits, prefixes, owners)
    return count


def test_id_free_processors_run_once_over_all_positions(monkeypatch):
    """One call of each processor whatever the prefix lengths (a draft depth, a round's target
    laws): the same ops as for positions of one length, fewer than a call per length, no upload,
    and the same without prefixes."""
    monkeypatch.setattr("multidraft._device.CPU_ON_HOST", False)
    logits, prefixes, owners = positions(1, 12)
    law = processor_law(id_free(), False, ROWS)
    lengths = {len(prefix) for prefix in prefixes}
    mixed = counted(law, logits, prefixes, owners)
    one_length = counted(law, logits, [prefixes[0]] * len(prefixes), owners)
    per_length = len(lengths) * counted(law, logits[:1], prefixes[:1], owners[:1]).ops
    assert len(lengths) > 1 and mixed.uploads == 0
    assert mixed.ops == one_length.ops == counted(law, logits, None, owners).ops < per_length


def test_ids_go_to_the_device_in_one_upload(monkeypatch):
    """Processors that read ids: one upload per law call whatever the number of groups; positions
    out of group order cost one gather in (which is also the processors' copy of float32 logits)
    and one gather out, positions in order none."""
    monkeypatch.setattr("multidraft._device.CPU_ON_HOST", False)
    logits, prefixes, owners = positions(2, 12)
    law = processor_law(PROCESSORS["mixed"](), False, ROWS)
    assert len({len(prefix) for prefix in prefixes}) > 1 and prefixes != sorted(prefixes, key=len)
    shuffled = counted(law, logits, prefixes, owners)
    in_order = counted(law, logits, sorted(prefixes, key=len), owners)
    assert shuffled.uploads == in_order.uploads == 1
    assert shuffled.by_op["aten::index_select"] == 2 and in_order.by_op["aten::index_select"] == 0
    assert shuffled.ops == in_order.ops + 1


def test_processors_reading_the_length_only_need_no_ids_on_the_device(monkeypatch):
    """Processors that read only the prefix length (min length, min new tokens, suppression at
    the first token, the length penalty) get rectangles of each length without the ids: positions
    in group order need no upload at all, positions out of order one (the order)."""
    monkeypatch.setattr("multidraft._device.CPU_ON_HOST", False)
    logits, prefixes, owners = positions(4, 12)
    law = processor_law(PROCESSORS["length only"](), False, ROWS)
    assert law.uses_prefixes and len({len(prefix) for prefix in prefixes}) > 1
    assert counted(law, logits, sorted(prefixes, key=len), owners).uploads == 0
    assert counted(law, logits, prefixes, owners).uploads == 1


def test_the_installed_transformers_warpers_read_no_ids_and_length_processors_the_length_only():
    """The paths above are taken with the transformers the tests run on: read from the source of
    each processor's ``__call__`` (a release that starts reading the ids would change this)."""
    assert {_ids_use(p) for p in id_free() + [SuppressTokensLogitsProcessor([1])]} == {"none"}
    assert {_ids_use(p) for p in length_only()} == {"length"}
    assert {_ids_use(p) for p in reading_ids()[:2]} == {"values"}


def _top_k_reading_ids():
    """A processor named like transformers' top-k warper whose call reads the ids' values: the
    law must give it the ids (as a transformers release that changed the warper would)."""
    class TopKLogitsWarper:
        def __call__(self, input_ids, scores):
            return scores.scatter_add(1, input_ids[:, -1:], torch.full_like(scores[:, :1], 2.0))
    return TopKLogitsWarper()


def _length_reading_ids():
    class MinLengthLogitsProcessor:
        def __call__(self, input_ids, scores):
            return scores - input_ids.shape[-1] * input_ids.sum(-1, keepdim=True).to(scores.dtype) / 10
    return MinLengthLogitsProcessor()


@pytest.mark.parametrize("make", [_top_k_reading_ids, _length_reading_ids], ids=["id-free name", "length-only name"])
def test_a_known_name_whose_call_reads_the_ids_gets_them(make, cpu_on_host):
    logits, prefixes, owners = positions(5, 10)
    processors = [TemperatureLogitsWarper(0.8), make(), TopKLogitsWarper(20)]
    law = processor_law(processors, False, ROWS)
    assert _ids_use(processors[1]) == "values" and law.uses_prefixes
    assert torch.equal(law(logits, prefixes, owners), reference(processors, logits, prefixes, False))


def _wrapped(function):
    @functools.wraps(function)
    def wrapper(self, input_ids, scores):
        return function(self, input_ids[:, :0], scores)
    return wrapper


class _Calls:
    """``__call__`` shapes for :func:`_call_reads`."""
    def ignores(self, ids, scores):
        return scores * 2

    def length(self, ids, scores):
        return scores + ids.shape[-1]

    def batch_size(self, ids, scores):
        return scores + ids.shape[0]

    def shape_only(self, ids, scores):
        return scores + len(ids.shape)

    def passes_them_on(self, ids, scores):
        return self.ignores(ids, scores)

    def star(self, *arguments):
        return arguments[1]

    wrapper = _wrapped(ignores)


@pytest.mark.parametrize("name, expected", [("ignores", "none"), ("length", "length"), ("batch_size", "values"),
                                            ("shape_only", "values"), ("passes_them_on", "values"),
                                            ("star", "values"), ("wrapper", "values")])
def test_how_a_call_uses_its_ids_is_read_from_its_source(name, expected):
    assert _call_reads(getattr(_Calls, name)) == expected


def test_a_call_without_source_is_taken_to_read_the_ids():
    namespace = {}
    exec("class TopKLogitsWarper:\n    def __call__(self, ids, scores):\n        return scores\n", namespace)
    assert _ids_use(namespace["TopKLogitsWarper"]()) == "values"
    assert _ids_use(RepetitionPenaltyLogitsProcessor(1.2)) == "values"  # not a listed name: its source is not read

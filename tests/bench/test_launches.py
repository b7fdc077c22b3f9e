"""multidraft.bench.launches: exact counts of small snippets, the models' passes left out, the verify
table of every verifier and ``python -m multidraft.bench --launches`` on tiny sizes."""
import numpy as np
import pytest

pytest.importorskip("torch", reason="counting launches needs torch")
import torch

import multidraft as md
from multidraft import _device
from multidraft.bench import launches
from multidraft.bench.launches import Launches


def counted(run, models=()):
    with Launches(models) as count:
        run()
    return count


def test_an_elementwise_op_is_one_launch_and_a_view_none():
    a, b = torch.ones(3), torch.arange(3.0)
    count = counted(lambda: (a + b)[1:].unsqueeze(0).reshape(-1))
    assert (count.ops, count.reads, count.uploads) == (1, 0, 0)
    assert dict(count.by_op) == {"aten::add.Tensor": 1}


def test_reads_are_items_syncing_ops_and_to_host():
    x = torch.arange(4.0)
    count = counted(lambda: x.sum().item())
    assert (count.ops, count.reads) == (1, 1)  # sum launches; _local_scalar_dense is the read
    count = counted(lambda: x[x > 1.5])  # the mask's count is read to size the output
    assert (count.ops, count.reads) == (2, 1)
    count = counted(lambda: x.clone().__setitem__(x > 1.5, 0.0))
    assert (count.ops, count.reads) == (3, 1)
    count = counted(lambda: x[torch.tensor([0, 2])])  # integer indices: no read
    assert count.reads == 0
    assert counted(lambda: torch.nonzero(x)).reads == 1
    assert counted(lambda: bool(x.any())).reads == 1
    count = counted(lambda: _device.to_host(x))
    assert (count.ops, count.reads) == (0, 1)
    count = counted(lambda: _device.to_device(np.ones(3), x.device))
    assert (count.ops, count.reads, count.uploads) == (0, 0, 1)


def test_allocation_launches_nothing():
    count = counted(lambda: torch.empty(5))
    assert count.ops == 0


def test_counts_add_up_over_several_blocks():
    a = torch.ones(2)
    count = Launches()
    for _ in range(3):
        with count:
            a * 2
    assert count.ops == 3


def test_the_models_forward_passes_are_left_out():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU()).eval()
    x = torch.ones(1, 3)

    def run():
        y = model(x)
        (y * 2).sum().item()

    outside = counted(run, [model])
    assert (outside.ops, outside.reads, outside.passes(model)) == (2, 1, 1)  # mul, sum; the item
    everything = counted(run)
    assert everything.ops > outside.ops and everything.passes(model) == 0


def test_goals_of_the_loop_rows():
    timing = dict(uploads_per_round=0, host_ms_per_round=1.0)
    rows = [dict(method="assisted", kind="assisted", ops_per_round=300, ops_per_forward=60, reads_per_round=13,
                 **timing),
            dict(method="plain", kind="plain", rounds=10, reads=14, ops_per_round=35, ops_per_forward=35,
                 reads_per_round=1.4, **timing),  # 4 reads of generate()'s set-up
            dict(method="chain", kind="multidraft", options=dict(verifier="sps", num_drafts=1, draft_length=4),
                 ops_per_round=290, ops_per_forward=70, rounds=20, reads_per_round=5, **timing),
            dict(method="tree", kind="multidraft", options=dict(verifier="global_resolution", tree=(3, 2, 1)),
                 ops_per_round=500, ops_per_forward=91, rounds=40, reads_per_round=4.1, **timing)]  # 4 + 4 / 40
    assert launches.loop_goals(rows[0], rows) == [] and launches.loop_goals(rows[1], rows) == []
    assert [met for _, met in launches.loop_goals(rows[2], rows)] == [True, True]  # <= 300 ops, <= 5 reads
    tree = launches.loop_goals(rows[3], rows)
    assert [met for _, met in tree] == [False, True] and "<= 90" in tree[0][0] and "<= 4" in tree[1][0]
    table = launches.format_counts(rows)
    assert "| met |" in table and "not met (ops per forward)" in table
    rows[3]["reads_per_round"] = 4.11
    assert [met for _, met in launches.loop_goals(rows[3], rows)] == [False, False]


def test_a_verify_row_per_verifier():
    rows = launches.verify_counts(B=3, V=200, top=8, repeats=1)
    assert [r["verifier"] for r in rows] == list(md.verifier_names())
    n = {r["verifier"]: r["n"] for r in rows}
    assert n["sps"] == 1 and n["spechub"] == 2 and n["otlp"] == 2 and n["khisti"] == 2 and n["rrs"] == 4
    assert all(r["ops"] > 0 and r["reads"] >= 1 and r["host_ms"] > 0 for r in rows)
    assert _device.CPU_ON_HOST  # restored
    table = launches.format_verify_counts(rows)
    assert len(table.splitlines()) == 2 + len(rows) and "met" in table
    assert launches.verify_counts(["otlp"], B=2, V=50, top=4, n={"otlp": 3}, repeats=1)[0]["n"] == 3


def test_the_command_line_prints_both_tables(capsys):
    pytest.importorskip("transformers", reason="the loop table needs transformers")
    from multidraft.bench.cli import main

    assert main(["--launches", "--vocab", "64", "--new-tokens", "5", "--verify-vocab", "100", "--verify-batch", "2",
                 "--verify-top", "8", "--verifiers", "sps,global_resolution"]) == 0
    out = capsys.readouterr().out
    for row in ("| target.generate |", "| transformers assisted, 4 draft tokens |", "| multidraft sps chain L=4 |",
                "| multidraft global_resolution tree (3, 2, 1) |", "| multidraft otlp chains n=2 L=4 |",
                "| sps | 1 |", "| global_resolution | 4 |"):
        assert row in out
    assert "reads per round <= 5" in out and "reads per round <= 4" in out
    with pytest.raises(SystemExit):
        main(["--launches", "--verifiers", "nope"])

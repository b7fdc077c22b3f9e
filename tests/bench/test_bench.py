"""The benchmark harness (python -m multidraft.bench): generator properties and a tiny end-to-end run."""

import csv
import json

import numpy as np
import pytest

from multidraft.bench import REGIMES, make_pairs
from multidraft.bench.baselines import ONE_READ, THREADED
from multidraft.bench.cli import main, parse_grid
from multidraft.bench.methods import METHODS
from multidraft.bench.runner import ALPHA_TOL


@pytest.mark.parametrize("regime", sorted(REGIMES))
def test_make_pairs_full_length_target_and_top_k_draft(regime):
    p, q = make_pairs(regime, V=500, k=20, count=3, seed=7)
    assert p.shape == q.shape == (3, 500) and p.dtype == q.dtype == np.float64
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(q.sum(axis=1), 1.0, atol=1e-12)
    assert (p > 0).all(), "p must never be truncated"
    assert ((q > 0).sum(axis=1) == 20).all()
    p2, q2 = make_pairs(regime, V=500, k=20, count=3, seed=7)
    assert np.array_equal(p, p2) and np.array_equal(q, q2)


def test_regimes_differ_in_draft_concentration():
    top3 = {}
    for regime in ("peaked", "flat"):
        _, q = make_pairs(regime, V=2000, k=None, count=20, seed=1)
        top3[regime] = np.sort(q, axis=1)[:, -3:].sum(axis=1).mean()
    assert top3["peaked"] > 0.6 > 0.3 > top3["flat"]


def test_parse_grid():
    assert parse_grid("10:2, 10:3,100:2") == [(10, 2), (10, 3), (100, 2)]


def test_tiny_run_writes_json_and_csv_with_agreeing_alpha(tmp_path, capsys):
    status = main(["--grid", "10:2", "--regimes", "peaked", "--tokens", "2", "--vocab", "200",
                   "--full-vocab", "", "--out", str(tmp_path), "--no-progress"])
    assert status == 0
    table = capsys.readouterr().out
    assert all(m.label in table for m in METHODS.values())
    threads = table[table.index("| regime | verifier |"):]
    assert f"| peaked | {ONE_READ} | - |" in threads  # the floor of the thread table, then every verifier
    assert all(f"| peaked | {name} | (" in threads for name in THREADED)

    results = json.loads((tmp_path / "results.json").read_text())
    assert results["meta"]["seed"] is not None and "peaked" in results["meta"]["regimes"]
    (cell,) = results["cells"]
    assert (cell["k"], cell["n"], cell["V"]) == (10, 2, 200)
    assert set(cell["methods"]) == set(METHODS)
    for name, res in cell["methods"].items():
        assert res["status"] == "ok", (name, res["message"])
        assert len(res["times_ms"]) == 2 and res["median_ms"] > 0
        tau = METHODS[name].tau  # Global Resolution: within 10 tau of alpha* when successful
        assert res["max_alpha_dev"] <= (ALPHA_TOL if tau is None else 10 * tau), name
        assert res["success_rate"] == 1.0, name

    with open(tmp_path / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["method"] for r in rows} == set(METHODS)
    assert all(float(r["max_alpha_dev"]) <= (ALPHA_TOL if METHODS[r["method"]].tau is None else 10 * METHODS[r["method"]].tau)
               for r in rows)


def test_full_vocabulary_tables_show_the_floor(tmp_path, capsys):
    """Full-vocabulary cells carry the NumPy floor timed on their own arrays in the same run, and
    their tables show it with every median as its multiple."""
    status = main(["--grid", "10:2", "--regimes", "flat", "--tokens", "2", "--vocab", "300",
                   "--full-vocab", "300", "--methods", "alpha_star,gr3", "--no-baselines",
                   "--out", str(tmp_path), "--no-progress"])
    assert status == 0
    report = capsys.readouterr().out
    full = report[report.index("## Full vocabularies"):]
    assert "floor (ms)" in full and "x |" in full
    cells = json.loads((tmp_path / "results.json").read_text())["cells"]
    assert all(c["floor_ms"] > 0 for c in cells)
    assert any(c["k"] == c["V"] == 300 for c in cells)

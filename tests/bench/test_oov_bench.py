"""The RDK benchmark (python -m multidraft.bench --rdk): runs end to end on tiny inputs, reports
what must hold on any data, and runs on a file of real next-token pairs (--dataset)."""
import json

import numpy as np
import pytest

from multidraft.bench import oov as bench
from multidraft.bench.cli import main as bench_main


def test_synthetic_pairs_are_distributions_with_heavy_tails():
    data = bench.synthetic_pairs(400, 30, seed=1)
    for name in ("p", "q"):
        assert data[name].shape == (30, 400) and np.allclose(data[name].sum(axis=1), 1)
    assert data["target_logits"].dtype == np.float32 and data["token_counts"].dtype == np.int64
    unigram = np.sort(data["token_counts"])[::-1]
    assert unigram[:100].sum() / unigram.sum() > 0.85  # top 25% of tokens hold most of the corpus


def test_acceptance_vs_pruning_invariants():
    data = bench.synthetic_pairs(300, 64, seed=2)
    rows = bench.acceptance_vs_pruning(data["p"], data["q"], data["target_logits"], data["token_counts"],
                                       kept_fractions=(1.0, 0.25, 0.01), top_k=16, n_effs=(0.1, 300.0))
    assert [r["kept"] for r in rows] == [300, 75, 3]
    for r in rows:
        assert r["masked"] <= r["tli"] + 1e-12  # masked <= TLI always
        assert abs(r["taylor"] - r["tli"]) <= 1 / 300 + 1e-12  # Eq. 3 verbatim moves <= 1/|T|
        assert abs(r["taylor_oracle"] - r["tli"]) <= 1 / 300 + 1e-12
        for method in bench.METHODS:
            assert 0 <= r[method] <= 1
    assert rows[0]["masked"] == pytest.approx(rows[0]["tli"])  # nothing pruned
    assert rows[0]["oov_mass"] == pytest.approx(0.0, abs=1e-12)
    assert rows[-1]["oov_mass"] > rows[1]["oov_mass"]


def test_cli_rdk_runs_and_writes_json(tmp_path, capsys):
    status = bench_main(["--rdk", "--quick", "--vocab", "200", "--contexts", "40", "--top-k", "8",
                         "--timing-vocab", "", "--out", str(tmp_path)])
    assert status == 0
    out = capsys.readouterr().out
    assert "mean acceptance against pruning" in out and "RDK, corr" in out
    record = json.loads((tmp_path / "rdk.json").read_text())
    assert len(record["acceptance"]) == len(bench.KEPT_FRACTIONS) and record["timing"] == []


def test_timing_small():
    row = bench.timing(2000, contexts=8, rows_fraction=0.25, top_k=4, tokens=3)
    assert row["rows"] == 500 and row["nnz"] == 500 * 4 + 1500
    assert all(row[k] >= 0 for k in ("covariance_topk_s", "rdk_proposal_ms", "verify_ms"))


def test_cli_rdk_runs_on_a_dataset_file(tmp_path, capsys):
    """Real next-token pairs (the file format of scripts/train_pair.py) replace the synthetic ones."""
    data = bench.synthetic_pairs(200, 48, seed=3)
    np.savez(tmp_path / "pairs.npz", p=data["p"], q=data["q"], target_logits=data["target_logits"],
             token_counts=data["token_counts"], meta=np.array(json.dumps({"corpus": "test"})))
    status = bench_main(["--rdk", "--quick", "--dataset", str(tmp_path / "pairs.npz"), "--top-k", "8",
                         "--timing-vocab", "", "--out", str(tmp_path)])
    assert status == 0
    assert "pairs.npz, V=200" in capsys.readouterr().out
    record = json.loads((tmp_path / "rdk.json").read_text())
    for row in record["acceptance"]:
        assert row["masked"] <= row["tli"] + 1e-12 and 0 <= row["rdk_corr"] <= 1


def test_a_missing_dataset_is_a_clear_error(tmp_path):
    with pytest.raises((SystemExit, ValueError, FileNotFoundError), match="pairs.npz"):
        bench_main(["--rdk", "--dataset", str(tmp_path / "pairs.npz")])

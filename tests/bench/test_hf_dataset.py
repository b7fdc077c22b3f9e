"""The next-token-pairs file: loader validation, the benchmark's --dataset mode, and the training script."""
import importlib.util
import json
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

from multidraft.bench import distributions
from multidraft.bench.cli import main
from multidraft.bench.dataset import DatasetRegime, load_next_token_pairs

ROOT = pathlib.Path(__file__).resolve().parents[2]


def arrays(N=12, V=30, seed=0):
    rng = np.random.default_rng(seed)
    logits = (2 * rng.standard_normal((N, V))).astype(np.float32)
    p = np.exp(logits.astype(np.float64))
    p /= p.sum(1, keepdims=True)
    q = np.exp(0.8 * logits + rng.standard_normal((N, V)))
    q = (q / q.sum(1, keepdims=True)).astype(np.float32)  # float32 rows: sums off by ~1e-7
    return dict(p=p, q=q.astype(np.float64), target_logits=logits,
                token_counts=rng.integers(0, 100, V).astype(np.int64), meta=np.array(json.dumps({"corpus": "test"})))


def write(path, **overrides):
    data = {**arrays(), **overrides}
    np.savez(path, **{k: v for k, v in data.items() if v is not None})
    return path


def test_load_renormalises_rows_and_keeps_fields(tmp_path):
    pairs = load_next_token_pairs(write(tmp_path / "d.npz"))
    assert pairs.p.shape == pairs.q.shape == (12, 30) and pairs.V == 30 and len(pairs) == 12
    assert pairs.p.dtype == pairs.q.dtype == np.float64 and pairs.target_logits.dtype == np.float32
    assert np.all(np.abs(pairs.q.sum(1) - 1) < 1e-12) and pairs.meta == {"corpus": "test"}
    with pytest.raises(Exception):
        pairs.p = None  # frozen


@pytest.mark.parametrize("overrides, message", [
    (dict(q=None), "missing array"),
    (dict(q=np.ones((12, 29)) / 29), "'q' has shape"),
    (dict(p=np.ones(30) / 30), "'p' must be \\(N, V\\)"),
    (dict(p=np.full((12, 30), 0.5)), "row 0 of 'p' sums to"),
    (dict(p=-arrays()["p"]), "negative or non-finite"),
    (dict(target_logits=np.full((12, 30), np.nan, np.float32)), "target_logits"),
    (dict(token_counts=np.ones(5, np.int64)), "token_counts"),
    (dict(meta=np.array("{not json")), "not a JSON string"),
    (dict(meta=np.array("[1, 2]")), "JSON object"),
])
def test_bad_files_are_refused_with_clear_errors(tmp_path, overrides, message):
    with pytest.raises(ValueError, match=message):
        load_next_token_pairs(write(tmp_path / "bad.npz", **overrides))


def test_missing_and_unreadable_files(tmp_path):
    with pytest.raises(ValueError, match="no such file"):
        load_next_token_pairs(tmp_path / "absent.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a readable"):
        load_next_token_pairs(tmp_path / "junk.npz")


def test_dataset_regime_draws_rows_and_truncates_the_draft(tmp_path):
    regime = DatasetRegime.from_file(write(tmp_path / "d.npz"))
    p, q = regime.sample_pairs(30, 5, 8, seed=3)
    p2, _ = regime.sample_pairs(30, 5, 8, seed=3)
    assert np.array_equal(p, p2) and p.shape == (8, 30)
    assert np.all((q > 0).sum(1) == 5) and np.allclose(q.sum(1), 1)
    assert all(any(np.array_equal(row, r) for r in regime.data.p) for row in p)
    with pytest.raises(ValueError, match="V = 30"):
        regime.sample_pairs(31, 5, 2, seed=0)


def test_bench_runs_on_a_dataset(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(distributions, "REGIMES", dict(distributions.REGIMES))  # registration stays local
    path = write(tmp_path / "d.npz")
    status = main(["--dataset", str(path), "--grid", "4:2", "--tokens", "3", "--quick", "--out",
                   str(tmp_path / "out"), "--no-progress", "--no-baselines"])
    assert status == 0
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert list(results["meta"]["regimes"]) == ["dataset"] and results["meta"]["V"] == 30
    (cell,) = results["cells"]
    assert (cell["regime"], cell["k"], cell["n"]) == ("dataset", 4, 2)
    assert all(r["status"] == "ok" for r in cell["methods"].values())
    with pytest.raises(SystemExit):
        main(["--dataset", str(tmp_path / "absent.npz"), "--quick"])


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="training needs torch: pip install 'multidraft[hf]'")
@pytest.mark.skipif(shutil.which("bible") is None, reason="the corpus needs Debian's bible-kjv (make install)")
def test_training_script_writes_models_and_a_loadable_dataset(tmp_path):
    subprocess.run([sys.executable, str(ROOT / "scripts" / "train_pair.py"), "--out", str(tmp_path), "--vocab", "300",
                    "--context", "32", "--batch", "4", "--target-steps", "2", "--draft-steps", "2", "--pairs", "50",
                    "--max-verses", "3000", "--threads", "1"],
                   check=True, capture_output=True)
    pairs = load_next_token_pairs(tmp_path / "next_token_pairs.npz")
    assert pairs.p.shape == (50, 300) and pairs.token_counts.sum() > 10000
    report = json.loads((tmp_path / "pair" / "report.json").read_text())
    assert report["target_parameters"] > report["draft_parameters"]
    for role in ("target", "draft", "tokenizer"):
        assert (tmp_path / "pair" / role).is_dir()

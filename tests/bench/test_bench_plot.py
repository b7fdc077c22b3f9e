"""The benchmark's summary plot reads results.csv as the benchmark writes it."""
import pathlib

import pytest

pytest.importorskip("matplotlib")
from multidraft.bench.plot import read_cells, solve_time_plot  # noqa: E402

FULL_RUN = pathlib.Path(__file__).resolve().parents[2] / "docs" / "benchmarks" / "full-run.csv"


def test_plot_of_the_committed_full_run(tmp_path):
    table = read_cells(FULL_RUN)
    assert set(table) == {"peaked", "flat"}
    # Table 1 cells only, budget-limited times flagged as lower bounds
    assert (1000, 2) in table["peaked"] and all(k < 32000 for k, _ in table["peaked"])
    assert table["peaked"][(1000, 2)]["maxflow"][1] and not table["peaked"][(1000, 2)]["gr3"][1]
    out = solve_time_plot(FULL_RUN, tmp_path / "plot.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_refuses_a_file_without_rows(tmp_path):
    empty = tmp_path / "results.csv"
    empty.write_text(FULL_RUN.read_text().splitlines()[0] + "\n")
    with pytest.raises(ValueError, match="no benchmark rows"):
        solve_time_plot(empty, tmp_path / "plot.png")

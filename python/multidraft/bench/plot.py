"""The benchmark's summary plot: median time per token of each exact method, per cell and regime.

``python -m multidraft.bench.plot results.csv solve-times.png`` draws it from the ``results.csv`` that
``python -m multidraft.bench`` writes. Times that hit the budget are lower bounds: they are drawn with
open markers and an upward arrow (so are Global Resolution times whose success rate is below 99%).
"""
from __future__ import annotations

import argparse
import csv
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

#: (method key in results.csv, legend label, marker), in drawing order.
SERIES: Sequence[Tuple[str, str, str]] = (
    ("gr3", "Global Resolution, tau = 1e-3 (exact output)", "o"),
    ("gr4", "Global Resolution, tau = 1e-4 (exact output)", "s"),
    ("maxflow_cs", "max-flow, complementary slackness", "^"),
    ("maxflow", "max-flow, relaxed OTLP", "v"),
    ("lp", "LP (SciPy HiGHS)", "D"),
)


Cells = Dict[str, Dict[Tuple[int, int], Dict[str, Tuple[float, bool]]]]


def read_cells(path: Path) -> Cells:
    """``{regime: {(k, n): {method: (median_ms, open_marker)}}}`` from a results.csv.

    Only the draft top-k cells (k < V, [GR] Table 1) are kept: full-vocabulary rows have other V and
    other success rates, and belong in the tables. ``open_marker`` is True for a time that is only a
    lower bound (budget hit) or a Global Resolution time whose success rate is below 99%.
    """
    table: Cells = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            lower = row["lower_bound"] == "True"
            if (row["status"] != "ok" and not lower) or int(row["k"]) >= int(row["V"]):
                continue
            failed = row["success_rate"] not in ("", None) and float(row["success_rate"]) < 0.99
            table.setdefault(row["regime"], {}).setdefault((int(row["k"]), int(row["n"])), {})[
                row["method"]] = (float(row["median_ms"]), lower or failed)
    return table


def solve_time_plot(results_csv: Path, out_png: Path) -> Path:
    """Draw one panel per regime (log time axis, one column per (k, n) cell) and save it as a PNG."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = read_cells(Path(results_csv))
    if not table:
        raise ValueError(f"{results_csv}: no benchmark rows to plot")
    regimes = sorted(table)
    fig, axes = plt.subplots(1, len(regimes), figsize=(6.5 * len(regimes), 4.2), sharey=True,
                             squeeze=False)
    for ax, regime in zip(axes[0], regimes):
        cells: List[Tuple[int, int]] = sorted(table[regime])
        for key, label, marker in SERIES:
            xs, ys, bounds = [], [], []
            for x, cell in enumerate(cells):
                if key in table[regime][cell]:
                    ms, lower = table[regime][cell][key]
                    xs.append(x), ys.append(ms), bounds.append(lower)
            if not xs:
                continue
            line, = ax.plot(xs, ys, marker=marker, linestyle="-", linewidth=0.8, label=label)
            for x, y, lower in zip(xs, ys, bounds):
                if lower:  # budget hit (the true time is above) or success below 99%
                    ax.plot([x], [y], marker=marker, markerfacecolor="white",
                            color=line.get_color(), markersize=9)
                    ax.annotate("", (x, y * 3), (x, y), arrowprops=dict(arrowstyle="->",
                                                                          color=line.get_color()))
        ax.set_xticks(range(len(cells)))
        ax.set_xticklabels([f"({k}, {n})" for k, n in cells], fontsize=8)
        ax.set_yscale("log")
        ax.set_title(f"{regime} drafts")
        ax.set_xlabel("draft top-k, number of drafts n")
        ax.grid(True, which="major", alpha=0.3)
    axes[0][0].set_ylabel("median time per token (ms)")
    axes[0][-1].legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    out_png = Path(out_png)
    out_png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_png, dpi=110)
    plt.close(fig)
    return out_png


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m multidraft.bench.plot", description=__doc__)
    parser.add_argument("results_csv", type=Path, help="results.csv written by the benchmark")
    parser.add_argument("out_png", type=Path, help="where to write the PNG")
    args = parser.parse_args(argv)
    print(solve_time_plot(args.results_csv, args.out_png))


if __name__ == "__main__":
    main()

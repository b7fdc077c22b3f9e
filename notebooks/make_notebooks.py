"""Writes the project's notebooks from their cell sources (run: python notebooks/make_notebooks.py).

Keeping the cells here keeps the .ipynb files free of outputs and easy to review; the test suite
executes each notebook (tests/docs/test_notebooks.py) so that it cannot rot.
"""
import pathlib

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = pathlib.Path(__file__).resolve().parent

GLOBAL_RESOLUTION = [
    new_markdown_cell(
        "# Global Resolution: optimal multi-draft acceptance and solve times\n\n"
        "Reproduces [GR] Figure 1 (optimal acceptance alpha* against the draft top-k and the number of "
        "i.i.d. drafts n) and the solve-time table (Table 1) on the benchmark's generated target/draft pairs "
        "(`multidraft.bench.distributions`: heavy-tailed target logits, a noisy-copy draft, temperature and "
        "draft top-k; the *peaked* and *flat* regimes). Notation: `p` target, `q` draft.\n\n"
        "Set `MULTIDRAFT_NOTEBOOK_QUICK=1` for the small run the test suite executes."
    ),
    new_code_cell(
        "import os, time\n"
        "import numpy as np\n"
        "import matplotlib\n"
        "import matplotlib.pyplot as plt\n"
        "import multidraft as md\n"
        "from multidraft.bench.distributions import make_pairs\n\n"
        "QUICK = os.environ.get('MULTIDRAFT_NOTEBOOK_QUICK') == '1'\n"
        "V = 4000 if QUICK else 32000\n"
        "COUNT = 4 if QUICK else 40\n"
        "REGIMES = ['peaked', 'flat']"
    ),
    new_markdown_cell(
        "## Figure 1: alpha* against n, one curve per draft top-k\n\n"
        "`md.optimal_acceptance` is the O(V log V) subset-selection formula ([GR] Eq. 4), exact. "
        "With top-k drafts alpha* <= P(top-k), so small k saturates early."
    ),
    new_code_cell(
        "ks = [10, 100, 1000, V]\n"
        "ns = list(range(1, 11))\n"
        "fig, axes = plt.subplots(1, len(REGIMES), figsize=(11, 4), sharey=True)\n"
        "figure1 = {}\n"
        "for ax, regime in zip(axes, REGIMES):\n"
        "    for k in ks:\n"
        "        p, q = make_pairs(regime, V, k, COUNT, seed=1)\n"
        "        curve = [float(np.mean(md.optimal_acceptance(p, q, n))) for n in ns]\n"
        "        figure1[regime, k] = curve\n"
        "        ax.plot(ns, curve, marker='o', label=f'k = {k}')\n"
        "    ax.set_title(f'{regime} drafts (V = {V})')\n"
        "    ax.set_xlabel('number of i.i.d. drafts n')\n"
        "    ax.grid(alpha=0.3)\n"
        "axes[0].set_ylabel('optimal acceptance alpha*')\n"
        "axes[-1].legend()\n"
        "plt.tight_layout()\n"
        "for regime in REGIMES:  # alpha* never decreases with n (a plan may ignore the last draft)\n"
        "    for k in ks:\n"
        "        assert all(b >= a - 1e-12 for a, b in zip(figure1[regime, k], figure1[regime, k][1:]))"
    ),
    new_markdown_cell(
        "## Table 1: per-token solve time, side by side\n\n"
        "Each method builds its plan for one (p, q) pair and draws one verified token for drafts sampled "
        "from q. Global Resolution reports whether its Lemma 6.6 bound was met (`success`); the exact "
        "max-flow methods always are. Medians in ms per token."
    ),
    new_code_cell(
        "def solve_gr(tau):\n"
        "    return lambda p, q, n: md.GlobalResolution(p, q, n, tau=tau)\n\n"
        "METHODS = {\n"
        "    'GR tau=1e-3': solve_gr(1e-3),\n"
        "    'GR tau=1e-4': solve_gr(1e-4),\n"
        "    'maxflow_cs': lambda p, q, n: md.solve_otlp(p, q, n, method='maxflow_cs'),\n"
        "    'maxflow': lambda p, q, n: md.solve_otlp(p, q, n, method='maxflow'),\n"
        "}\n"
        "GRID = [(10, 2), (10, 3), (100, 2)] if QUICK else [(10, 2), (10, 3), (10, 4), (10, 5), (100, 2), (100, 3), (1000, 2)]\n"
        "rng = np.random.default_rng(0)\n"
        "rows = []\n"
        "for regime in REGIMES:\n"
        "    for k, n in GRID:\n"
        "        p_all, q_all = make_pairs(regime, V, k, COUNT, seed=2)\n"
        "        for name, solve in METHODS.items():\n"
        "            if name == 'maxflow' and (k, n) in [(100, 3), (1000, 2)]:\n"
        "                continue  # hundreds of ms per token: see python -m multidraft.bench\n"
        "            times, successes = [], []\n"
        "            for p, q in zip(p_all, q_all):\n"
        "                start = time.perf_counter()\n"
        "                plan = solve(p, q, n)\n"
        "                plan.sample(md.draft_scheme(q, n).sample(rng), rng)\n"
        "                times.append(1e3 * (time.perf_counter() - start))\n"
        "                successes.append(getattr(plan, 'success', True))\n"
        "            rows.append((regime, k, n, name, float(np.median(times)), float(np.mean(successes))))\n"
        "print(f\"{'regime':8} {'(k, n)':10} {'method':14} {'median ms':>10} {'success':>8}\")\n"
        "for regime, k, n, name, median, success in rows:\n"
        "    print(f'{regime:8} {str((k, n)):10} {name:14} {median:10.3f} {success:8.0%}')"
    ),
    new_code_cell(
        "fig, axes = plt.subplots(1, len(REGIMES), figsize=(11, 4), sharey=True)\n"
        "for ax, regime in zip(axes, REGIMES):\n"
        "    cells = [f'({k},{n})' for k, n in GRID]\n"
        "    for offset, name in enumerate(METHODS):\n"
        "        values = {(k, n): m for r, k, n, nm, m, _ in rows if r == regime and nm == name}\n"
        "        xs = [i + 0.2 * (offset - 1.5) for i, cell in enumerate(GRID) if cell in values]\n"
        "        ax.bar(xs, [values[c] for c in GRID if c in values], width=0.2, label=name)\n"
        "    ax.set_xticks(range(len(GRID)), cells)\n"
        "    ax.set_yscale('log')\n"
        "    ax.set_title(f'{regime} drafts')\n"
        "    ax.set_xlabel('(draft top-k, n)')\n"
        "axes[0].set_ylabel('median ms per token')\n"
        "axes[-1].legend()\n"
        "plt.tight_layout()"
    ),
]


KERNEL = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}


def write_notebook(cells, name: str) -> None:
    """Write notebooks/<name> from its cells (the one writer of every notebook generator)."""
    nbformat.write(new_notebook(cells=cells, metadata=KERNEL), HERE / name)


def main():
    write_notebook(GLOBAL_RESOLUTION, "global_resolution.ipynb")


if __name__ == "__main__":
    main()

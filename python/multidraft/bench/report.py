"""Reports of the benchmark: machine info, a Markdown table, results.json and results.csv.

Every time is a median in ms per token; ratios divide by the fastest exact OTLP method of the
same cell.
"""

from __future__ import annotations

import csv
import json
import os
import platform
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

from .distributions import get_regime
from .methods import METHODS, Method
from .runner import ALPHA_TOL, ERROR, REFUSED, SKIPPED, Cell

CSV_FIELDS = [
    "regime", "V", "k", "n", "instances", "alpha_star_mean", "h_star_median", "method", "label",
    "status", "runs", "median_ms", "lower_bound", "ratio", "max_alpha_dev", "success_rate", "max_l1_bound",
    "message",
]


def _version(module: str) -> Optional[str]:
    try:
        return getattr(__import__(module), "__version__", "unknown")
    except ImportError:
        return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_info() -> Dict[str, object]:
    """Platform, CPU, CPU counts and library versions of this run."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_usable": usable,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": _version("scipy"),
        "multidraft": _version("multidraft"),
    }


def cell_record(cell: Cell) -> Dict[str, object]:
    """One cell as a JSON-friendly dict, with every raw timing (ms per token)."""
    methods = {}
    for name, r in cell.methods.items():
        methods[name] = {
            "label": METHODS[name].label,
            "status": r.status,
            "message": r.message,
            "times_ms": r.times_ms,
            "alpha_dev": r.alpha_dev,
            "median_ms": r.median_ms,
            "lower_bound": r.lower_bound,
            "timed_out": r.timed_out,
            "ratio": cell.ratio(name),
            "max_alpha_dev": r.max_alpha_dev,
            "alphas": r.alphas,
            "successes": r.successes,
            "l1_bounds": r.l1_bounds,
            "success_rate": r.success_rate,
            "max_l1_bound": r.max_l1_bound,
        }
    return {
        "regime": cell.regime, "V": cell.V, "k": cell.k, "n": cell.n,
        "instances": len(cell.alpha_star),
        "alpha_star": cell.alpha_star,
        "h_star_size": cell.h_star_size,
        "pairs": cell.pairs,
        "floor_ms": cell.floor_ms,
        "reference": cell.reference(),
        "max_alpha_dev": cell.max_alpha_dev(),
        "methods": methods,
    }


def csv_rows(cells: Sequence[Cell]) -> List[Dict[str, object]]:
    """The table as flat rows: one per (cell, method)."""
    rows = []
    for cell in cells:
        for name, r in cell.methods.items():
            rows.append({
                "regime": cell.regime, "V": cell.V, "k": cell.k, "n": cell.n,
                "instances": len(cell.alpha_star),
                "alpha_star_mean": float(np.mean(cell.alpha_star)),
                "h_star_median": float(np.median(cell.h_star_size)),
                "method": name, "label": METHODS[name].label, "status": r.status,
                "runs": len(r.times_ms), "median_ms": r.median_ms, "lower_bound": r.lower_bound,
                "ratio": cell.ratio(name), "max_alpha_dev": r.max_alpha_dev, "success_rate": r.success_rate,
                "max_l1_bound": r.max_l1_bound, "message": r.message,
            })
    return rows


def write_results(out: Path, meta: Dict[str, object], cells: Sequence[Cell]) -> Dict[str, Path]:
    """Write ``results.json`` (parameters + raw timings) and ``results.csv`` (the table) into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "results.json", "csv": out / "results.csv"}
    with open(paths["json"], "w") as f:
        json.dump({"meta": meta, "cells": [cell_record(c) for c in cells]}, f, indent=1)
    with open(paths["csv"], "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        writer.writeheader()
        writer.writerows(csv_rows(cells))
    return paths


def format_ms(ms: float) -> str:
    """Milliseconds with 3 significant digits, never in exponent notation."""
    if ms >= 100:
        return f"{ms:.0f}"
    return f"{ms:.3g}" if ms >= 0.001 else f"{ms:.1e}"


def format_ratio(ratio: float) -> str:
    """A ratio with 2-3 significant digits: 0.012x, 1.35x, 83.2x, 1732x."""
    if ratio < 1:
        return f"{ratio:.2g}x"
    return f"{ratio:.2f}x" if ratio < 10 else (f"{ratio:.1f}x" if ratio < 100 else f"{ratio:.0f}x")


def format_entry(cell: Cell, name: str) -> str:
    """Table entry of one method in one cell: ``median (ratio)``, ``+`` for lower bounds."""
    r = cell.methods[name]
    if r.status in (REFUSED, SKIPPED, ERROR) and not r.times_ms:
        return {REFUSED: "refused", SKIPPED: "skipped", ERROR: "**error**"}[r.status]
    plus = "+" if r.lower_bound else ""
    ratio = cell.ratio(name)
    text = format_ms(r.median_ms) + plus
    if ratio is not None:
        text += f" ({format_ratio(ratio)}{plus})"
    if METHODS[name].tau is not None and r.success_rate is not None:  # Global Resolution
        text += f" {100 * r.success_rate:.0f}%"
    return text + (" **error**" if r.status == ERROR else "")


def format_dev(dev: Optional[float]) -> str:
    """The deviation column: max |alpha - alpha*|, flagged when above the tolerance."""
    if dev is None:
        return "n/a"
    return f"{dev:.1e}" + ("" if dev <= ALPHA_TOL else " **FAIL**")


def markdown_table(cells: Sequence[Cell], methods: Sequence[Method], floor: bool = False) -> str:
    """One Markdown table for the cells of one regime; with ``floor``, a column of the cells' NumPy
    floor and every time also as its multiple (``= 250x``)."""
    head = ["(k, n)", "q top-3", "alpha*", "\\|H*\\|"] + (["floor (ms)"] if floor else [])
    head += [m.label for m in methods] + ["max \\|alpha - alpha*\\|"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in cells:
        row = [f"({c.k}, {c.n})", f"{c.pairs['q_top3_mass']:.2f}", f"{np.mean(c.alpha_star):.4f}",
               f"{np.median(c.h_star_size):.0f}"] + ([format_ms(c.floor_ms)] if floor else [])
        for m in methods:
            entry = format_entry(c, m.name) if m.name in c.methods else "n/a"
            median = c.methods[m.name].median_ms if m.name in c.methods else None
            if floor and median is not None and c.floor_ms > 0:
                entry += f" = {median / c.floor_ms:.0f}x"
            row.append(entry)
        row.append(format_dev(c.max_alpha_dev()))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def markdown_report(meta: Dict[str, object], cells: Sequence[Cell], methods: Sequence[Method]) -> str:
    """The full printed report: legend, parameters, machine, one table per regime, problems."""
    m = meta["machine"]
    out = [
        "# multidraft benchmark: exact multi-draft verification, ms per token",
        "",
        "Median ms per token (solve + one verified sample; alpha*: subset selection only) over the "
        "instances of each cell; in parentheses the ratio to the fastest exact OTLP method of the cell. "
        f"`+`: lower bound (an instance exceeded the {meta['budget_s']:g} s budget, and the method's other "
        f"instances in the cell were skipped; a call still running after {meta['max_call_s']:g} s was "
        "stopped and counts as that long). `refused`: the package refused the problem as too large. "
        "`skipped`: the method exceeded the budget in a smaller cell. q top-3: mean mass of the draft (after top-k) "
        "on its 3 largest tokens; alpha*: mean optimal acceptance; "
        f"\\|H*\\|: median size of the optimal subset; last column: max deviation of any exact method's "
        f"alpha from alpha* (tolerance {ALPHA_TOL:g}).",
        "",
        f"- mode: {meta['mode']}; seed: {meta['seed']}; V = {meta['V']}; instances per cell: {meta['tokens']}; "
        f"budget: {meta['budget_s']:g} s per instance; hard cap: {meta['max_call_s']:g} s per call",
        f"- machine: {m['platform']}; {m['cpu']}; {m['cpu_count']} CPUs ({m['cpu_usable']} usable); "
        f"Python {m['python']}; numpy {m['numpy']}; scipy {m['scipy']}; multidraft {m['multidraft']}",
        "- generator (multidraft.bench.distributions, Zipf-like target logits, draft = noisy copy, "
        "temperature, draft top-k; p never truncated):",
    ]
    for name, params in meta["regimes"].items():
        shown = {k: v for k, v in params.items() if k not in ("name", "description")}
        out.append(f"  - `{name}` ({params['description']}): `{json.dumps(shown)}`")
    for regime in meta["regimes"]:
        grid_cells = [c for c in cells if c.regime == regime and c.V == meta["V"] and c.k != c.V]
        out += ["", f"## Regime `{regime}`", "", markdown_table(grid_cells, methods)]
    full = [c for c in cells if c.V != meta["V"] or c.k == c.V]
    if full:
        out += ["", "## Full vocabularies (no draft top-k: k = V)", "",
                "The exact max-flow methods are refused beyond MAX_NETWORK_ARCS; alpha* stays exact. "
                "floor: median over the instances of one NumPy pass over p and q (np.minimum(p, q).sum()) "
                "on the same arrays in this run; `= Nx`: a median time as a multiple of it."]
        for V in sorted({c.V for c in full}):
            for regime in meta["regimes"]:
                rows = [c for c in full if c.V == V and c.regime == regime]
                if rows:
                    used = [m for m in methods if any(m.name in c.methods for c in rows)]
                    out += ["", f"### V = {V}, regime `{regime}`", "", markdown_table(rows, used, floor=True)]
    bounds = gr_bounds_table(cells, methods)
    if bounds:
        out += ["", "## Global Resolution: success and achieved bounds", "",
                "Promise when successful (Lemma 6.6): L1 distance of the output law to p <= 15 tau, "
                "\\|alpha - alpha*\\| <= 10 tau. The percentage after a G.R. time above is its success rate.",
                "", bounds]
    out += ["", "## Best acceptance within a per-token time limit ([GR] Table 2 style)", "",
            "Best mean acceptance over the cells whose mean time per token is within the limit; "
            "Global Resolution is credited min(its plan's acceptance, alpha*), and 0 where it missed its bound.", "",
            best_acceptance_table(cells, methods)]
    problems = [(c, r) for c in cells for r in c.methods.values() if r.status == ERROR]
    if problems:
        out += ["", "## Errors", ""]
        out += [f"- ({c.regime}, k={c.k}, n={c.n}) {r.name}: {r.message}" for c, r in problems]
    out += ["", f"Total wall time: {meta['wall_s']:.1f} s."]
    return "\n".join(out)


def regime_params(names: Sequence[str]) -> Dict[str, Dict[str, object]]:
    """Generator parameters of the named regimes, as printed and stored."""
    return {name: get_regime(name).params() for name in names}


def all_agree(cells: Sequence[Cell]) -> bool:
    """True if no method errored, every exact method's alpha matched alpha* within tolerance, and
    every successful Global Resolution plan was within 10 tau of alpha*."""
    for c in cells:
        dev = c.max_alpha_dev()
        if (dev is not None and dev > ALPHA_TOL) or any(r.status == ERROR for r in c.methods.values()):
            return False
        if any(r.bound_violations(METHODS[r.name].tau) for r in c.methods.values()):
            return False
    return True


def gr_bounds_table(cells: Sequence[Cell], methods: Sequence[Method]) -> str:
    """Global Resolution per cell: success rate, worst achieved L1 bound and worst |alpha - alpha*|,
    each against its promise (15 tau and 10 tau when successful)."""
    gr = [m for m in methods if m.tau is not None]
    if not gr:
        return ""
    head = ["regime", "(k, n)"] + [f"{m.label}: success, max L1 bound, max \\|alpha - alpha*\\|" for m in gr]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in cells:
        row = [c.regime, f"({c.k}, {c.n})"]
        for m in gr:
            r = c.methods.get(m.name)
            if r is None or not r.times_ms:
                row.append(r.status if r else "n/a")
                continue
            met = [(bound, dev) for ok, bound, dev in zip(r.successes, r.l1_bounds, r.alpha_dev) if ok]
            worst = (f"{max(b for b, _ in met):.2g}, {max(d for _, d in met):.2g}" if met else "-, -")
            row.append(f"{100 * r.success_rate:.0f}%, {worst}" + (" **FAIL**" if r.bound_violations(m.tau) else ""))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


BUDGETS_MS = (0.1, 1.0, 10.0)
"""Per-token time limits of the best-acceptance table ([GR] Table 2 style)."""


def best_acceptance_table(cells: Sequence[Cell], methods: Sequence[Method]) -> str:
    """[GR] Table 2 style: per regime and time limit, the best mean acceptance each solver
    reaches over the cells whose MEAN time per token is within the limit. Exact plans reach
    alpha*; Global Resolution is credited min(its plan's acceptance, alpha*) (a plan above alpha*
    is so only through its bounded error) and 0 on instances that missed their bound, since no
    fallback is timed."""
    solvers = [m for m in methods if m.exact_plan or m.tau is not None]
    regimes = sorted({c.regime for c in cells})
    head = ["regime", "limit (ms/token)"] + [m.label for m in solvers]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for regime in regimes:
        for limit in BUDGETS_MS:
            row = [regime, f"{limit:g}"]
            for m in solvers:
                best = None
                for c in cells:
                    r = c.methods.get(m.name)
                    if c.regime != regime or r is None or r.status != "ok" or not r.times_ms:
                        continue
                    if float(np.mean(r.times_ms)) > limit:
                        continue
                    credited = [min(a, star) if ok else 0.0 for a, ok, star in zip(r.alphas, r.successes, c.alpha_star)]
                    value = float(np.mean(credited))
                    best = value if best is None else max(best, value)
                row.append("-" if best is None else f"{100 * best:.2f}%")
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


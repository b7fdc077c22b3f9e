"""Time of a full-vocabulary Global Resolution verify, and the part of it outside the Newton solver.

Rows: ``make_pairs(regime, V, None, ...)`` (every token has q > 0), flat and peaked. For n = 2, 3,
4 and tau = 1e-3, 1e-4 it prints the median over the rows of the fastest of ``--repeats`` verifies
of each, as a multiple of the NumPy floor ``np.minimum(p, q).sum()`` timed on the same rows:

    python scripts/measure_full_vocabulary_overhead.py [--tokens 10] [--repeats 3] [--V 32000]

With ``--perf REGIME N TAU`` it instead samples ``--loops`` passes over the rows of that one case
under ``perf record`` (perf on the PATH; an unstripped build names the functions) and prints the
time per token under the verify call and under ``minimise_newton``, their difference being the
plan's own work (ratio sort, subset scan, truncation sets, warm start, output correction):

    python scripts/measure_full_vocabulary_overhead.py --perf flat 3 1e-4 [--loops 40]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import multidraft as md
from multidraft.bench.distributions import derive_seed, make_pairs

SEED = 20240611
SAMPLE_HZ = 4000


def rows(regime, V, tokens):
    return make_pairs(regime, V, None, tokens, derive_seed(SEED, regime, V))


def drafts_for(Q, n):
    rng = np.random.default_rng(1)
    return [rng.choice(Q.shape[1], size=n, p=q) for q in Q]


def fastest(call, repeats):
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def table(args):
    for regime in ("flat", "peaked"):
        P, Q = rows(regime, args.V, args.tokens)
        floor = np.median([fastest(lambda: np.minimum(p, q).sum(), 200) for p, q in zip(P, Q)])
        for n in (2, 3, 4):
            drafts = drafts_for(Q, n)
            for tau in (1e-3, 1e-4):
                verifier = md.verifier("global_resolution", tau=tau)
                times = [fastest(lambda: verifier.verify(P[i], Q[i], drafts[i], i), args.repeats)
                         for i in range(args.tokens)]
                median = float(np.median(times))
                print(f"{regime:6s} n={n} tau={tau:g}: {median * 1e3:6.3f} ms = {median / floor:5.0f}x floor "
                      f"({floor * 1e6:.1f} us)", flush=True)


def loop(args):
    regime, n, tau = args.perf[0], int(args.perf[1]), float(args.perf[2])
    P, Q = rows(regime, args.V, args.tokens)
    drafts = drafts_for(Q, n)
    verifier = md.verifier("global_resolution", tau=tau)
    for _ in range(args.loops):
        for i in range(args.tokens):
            verifier.verify(P[i], Q[i], drafts[i], i)


def children_share(report, name):
    """The `perf report --children` share (%) of the first line naming `name`."""
    for line in report.splitlines():
        fields = line.split()
        if len(fields) > 4 and fields[0].endswith("%") and name in line:
            return float(fields[0][:-1])
    raise ValueError(f"perf report: no line names {name!r} (a stripped build?)")


def profile(args):
    with tempfile.TemporaryDirectory() as folder:
        data = os.path.join(folder, "perf.data")
        command = [sys.executable, __file__, "--loop", *args.perf, "--loops", str(args.loops),
                   "--tokens", str(args.tokens), "--V", str(args.V)]
        subprocess.run(["perf", "record", "-F", str(SAMPLE_HZ), "-g", "-o", data, *command], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        report = subprocess.run(["perf", "report", "-i", data, "--children", "--sort", "symbol", "-g", "none",
                                 "--percent-limit", "0", "-n"], check=True, capture_output=True, text=True).stdout
    samples = sum(int(line.split()[2]) for line in report.splitlines()
                  if line.strip() and not line.startswith("#") and line.split()[0].endswith("%"))
    per_token = samples / SAMPLE_HZ / (args.loops * args.tokens) / 100.0  # seconds per token per percent
    verify = children_share(report, "verify_row") * per_token
    solver = children_share(report, "multidraft::minimise_newton ") * per_token
    print(f"{' '.join(args.perf)}: per token {verify * 1e6:.0f} us in the verify, {solver * 1e6:.0f} us in "
          f"minimise_newton, {(verify - solver) * 1e6:.0f} us outside it")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--V", type=int, default=32000)
    parser.add_argument("--perf", nargs=3, metavar=("REGIME", "N", "TAU"))
    parser.add_argument("--loops", type=int, default=40)
    parser.add_argument("--loop", nargs=3, help=argparse.SUPPRESS)  # the profiled process
    args = parser.parse_args()
    if args.loop:
        args.perf = args.loop
        loop(args)
    elif args.perf:
        profile(args)
    else:
        table(args)


if __name__ == "__main__":
    main()

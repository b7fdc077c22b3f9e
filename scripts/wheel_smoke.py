"""Smoke test of an installed multidraft (a wheel in a fresh venv; cibuildwheel's test command).

Imports the package, runs one verify and one solve_otlp under every instruction-set level this CPU
runs (one process per level: a process imports exactly one core), checks that the levels agree, and
that the installed metadata states lower bounds only. With --wheel / --sdist it also checks that the
archives carry LICENSE and the third-party licenses. Run it outside the source tree.
"""
import argparse
import json
import os
import subprocess
import sys
import tarfile
import zipfile

LICENSES = ("LICENSE", "third_party/lemon/LICENSE", "third_party/eigen/LICENSE")


def check(condition, message):
    if not condition:
        sys.exit(f"wheel smoke test FAILED: {message}")


def run_level():
    """Prints this process's core and one verify / solve_otlp result as JSON."""
    import numpy as np

    import multidraft as md

    rng = np.random.default_rng(7)
    p, q = rng.dirichlet(np.ones(12)), rng.dirichlet(np.ones(12))
    plan = md.solve_otlp(p, q, 3)
    drafts = md.verifier("otlp").draft(q, 3, 11)
    token, accepted = md.verifier("otlp").verify(p, q, drafts, 11)
    print(json.dumps({
        "core": md._core.__name__,
        "alpha": plan.alpha,
        "transport": plan.transport(drafts).tolist(),
        "token": int(token),
        "accepted": bool(accepted),
    }))


def check_levels():
    import multidraft as md
    from multidraft import _isa

    levels = _isa.runnable_levels()
    check(md._core.__name__ == f"multidraft._isa.{levels[-1]}._core",
          f"imported {md._core.__name__}, expected the highest runnable level of {levels}")
    results = {}
    for level in levels:
        env = dict(os.environ, MULTIDRAFT_ISA=level)
        out = subprocess.run([sys.executable, __file__, "--run-level"], env=env, check=True,
                             capture_output=True, text=True).stdout
        results[level] = json.loads(out)
        check(results[level]["core"] == f"multidraft._isa.{level}._core", f"MULTIDRAFT_ISA={level} loaded {out}")
    first = results[levels[0]]
    for level, result in results.items():
        check(abs(result["alpha"] - first["alpha"]) < 1e-12, f"alpha differs between {levels[0]} and {level}")
        check(max(abs(a - b) for a, b in zip(result["transport"], first["transport"])) < 1e-12,
              f"transport differs between {levels[0]} and {level}")
        check(0.0 < result["alpha"] <= 1.0 and 0 <= result["token"] < 12, f"implausible result {result}")
    print(f"levels run: {', '.join(levels)} (built: {', '.join(_isa.built_levels())})")


def check_installed_metadata():
    from importlib import metadata

    requirements = metadata.requires("multidraft") or []
    check(requirements, "no Requires-Dist in the installed metadata")
    pinned = [r for r in requirements if "==" in r.split(";")[0]]  # the marker says extra == "hf"
    check(not pinned, f"exact pins in the installed metadata: {pinned}")
    check(metadata.metadata("multidraft").get("License-Expression") == "MIT", "License-Expression is not MIT")


def check_wheel(path):
    names = zipfile.ZipFile(path).namelist()
    for license_file in LICENSES:
        check(any(n.endswith(f".dist-info/licenses/{license_file}") for n in names), f"{license_file} not in {path}")
    check(any("/_isa/_probe" in n for n in names), f"the ISA probe is not in {path}")


def check_sdist(path):
    names = {n.split("/", 1)[1] for n in tarfile.open(path).getnames() if "/" in n}
    for needed in LICENSES + ("third_party/lemon/lemon/preflow.h", "third_party/lemon/lemon/config.h", "constraints.txt"):
        check(needed in names, f"{needed} not in {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--wheel", help="the built wheel, to check its license files")
    parser.add_argument("--sdist", help="the built sdist, to check its license files and vendored headers")
    parser.add_argument("--run-level", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run_level:
        return run_level()
    check_levels()
    check_installed_metadata()
    if args.wheel:
        check_wheel(args.wheel)
    if args.sdist:
        check_sdist(args.sdist)
    print("wheel smoke test passed")


if __name__ == "__main__":
    main()

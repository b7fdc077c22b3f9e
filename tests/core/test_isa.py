"""Load-time choice of the compiled core (multidraft._isa): one core per instruction-set level."""
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from multidraft import _core, _isa
from multidraft._isa._probe import supported_levels

SMOKE = Path(__file__).resolve().parents[2] / "scripts" / "wheel_smoke.py"


def test_the_imported_core_is_the_forced_or_highest_runnable_level():
    expected = os.environ.get(_isa.ENVIRONMENT_VARIABLE) or _isa.runnable_levels()[-1]
    assert _core.__name__ == f"multidraft._isa.{expected}._core"


def test_every_runnable_level_loads_and_agrees():
    # The smoke test of the wheel: one process per level, same plan and law, lower-bound metadata.
    env = {k: v for k, v in os.environ.items() if k != _isa.ENVIRONMENT_VARIABLE}
    result = subprocess.run([sys.executable, str(SMOKE)], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert f"levels run: {', '.join(_isa.runnable_levels())}" in result.stdout


def test_a_level_this_installation_cannot_run_is_refused_by_name():
    env = dict(os.environ, MULTIDRAFT_ISA="avx1024")
    result = subprocess.run([sys.executable, "-c", "import multidraft"], env=env, capture_output=True, text=True)
    assert result.returncode != 0
    assert "ValueError: MULTIDRAFT_ISA='avx1024'" in result.stderr


@pytest.mark.skipif(not (sys.platform.startswith("linux") and platform.machine() == "x86_64"),
                    reason="/proc/cpuinfo flags are the oracle")
def test_probe_agrees_with_the_kernels_cpu_flags():
    flags = set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    # x86-64-v3 and v4 as the psABI defines them (the kernel calls LZCNT "abm", SSE3 "pni").
    v3 = {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave", "cx16", "lahf_lm", "popcnt",
          "pni", "ssse3", "sse4_1", "sse4_2"}
    v4 = {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}
    expected = ["baseline"] + ["avx2"] * v3.issubset(flags) + ["avx512"] * (v3 | v4).issubset(flags)
    assert supported_levels() == expected


def test_a_second_core_cannot_be_imported_next_to_the_first():
    # Each core has its own thread pool: pybind11 refuses the second one's types, so a process
    # never runs two (in a subprocess: the failed import leaves a half-initialised module).
    if len(_isa.runnable_levels()) < 2:
        pytest.skip("a single core is built")
    # Without MULTIDRAFT_ISA the package loads the highest level; then import the lowest.
    code = f"import importlib, multidraft; importlib.import_module('multidraft._isa.{_isa.runnable_levels()[0]}._core')"
    env = {k: v for k, v in os.environ.items() if k != _isa.ENVIRONMENT_VARIABLE}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert result.returncode != 0
    assert "already registered" in result.stderr

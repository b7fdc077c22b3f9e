"""The core's folders as docs/design/architecture.md describes them: each header includes only its
own folder and the layers below it, nothing under cpp/include includes Python, and the umbrella
header compiles on its own."""
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
INCLUDE = ROOT / "cpp" / "include"
CORE = INCLUDE / "multidraft"

# Lowest first; a folder may include its own headers and those of lower layers.
LAYERS = [
    ("detail",),
    ("core", "global_resolution/sums"),
    ("otlp", "oov"),
    ("baselines", "global_resolution"),
    ("registry",),
    ("batch",),
]
LAYER_OF = {folder: level for level, folders in enumerate(LAYERS) for folder in folders}
PROJECT_INCLUDE = re.compile(r'^\s*#\s*include\s+"multidraft/(.+)"', re.M)
ANY_INCLUDE = re.compile(r"^\s*#\s*include\s+[<\"]([^>\"]+)[>\"]", re.M)


def folder_of(header: str) -> str:
    return str(pathlib.PurePosixPath(header).parent)


def headers():
    return sorted(p.relative_to(CORE).as_posix() for p in CORE.rglob("*.hpp") if p.name != "multidraft.hpp")


def test_every_header_is_in_a_layer_and_guarded():
    for header in headers():
        assert folder_of(header) in LAYER_OF, f"{header}: its folder is in no layer of LAYERS (add it there)"
        assert "#pragma once" in (CORE / header).read_text(), f"{header} lacks #pragma once"


def test_headers_include_only_their_folder_and_lower_layers():
    for header in headers():
        level = LAYER_OF[folder_of(header)]
        for included in PROJECT_INCLUDE.findall((CORE / header).read_text()):
            assert (CORE / included).is_file(), f"{header} includes missing multidraft/{included}"
            other = folder_of(included)
            assert other == folder_of(header) or LAYER_OF[other] < level, (
                f"{header} (layer {level}) includes multidraft/{included} (layer {LAYER_OF[other]})")


def test_core_is_free_of_python():
    for header in headers():
        for included in ANY_INCLUDE.findall((CORE / header).read_text()):
            assert not included.startswith(("pybind11", "Python")), f"{header} includes {included}"


def test_umbrella_header_includes_every_folder_and_compiles_alone(tmp_path):
    umbrella = (CORE / "multidraft.hpp").read_text()
    reached = {folder_of(h) for h in PROJECT_INCLUDE.findall(umbrella)}
    assert {f for f in LAYER_OF if f != "detail" and f != "global_resolution/sums"} <= reached
    compiler = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    eigen = [p / "cmeel.prefix" / "include" / "eigen3" for p in map(pathlib.Path, sys.path)]
    eigen = [p for p in eigen if p.is_dir()]
    if compiler is None or not eigen:
        pytest.skip("needs a C++ compiler and the cmeel-eigen headers (the build requirements)")
    source = tmp_path / "umbrella.cpp"
    source.write_text('#include "multidraft/multidraft.hpp"\nint main() { return 0; }\n')
    command = [compiler, "-std=c++17", "-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-Wno-unknown-pragmas",
               f"-I{INCLUDE}", "-isystem", str(eigen[0]), "-isystem", str(ROOT / "third_party" / "lemon"), str(source)]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-4000:]

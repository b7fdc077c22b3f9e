"""Every notebook in notebooks/ is what its generator writes, and runs top to bottom (quick mode),
so it cannot rot."""
import importlib.util
import pathlib
import sys

import nbformat
import pytest
from nbclient import NotebookClient

HERE = pathlib.Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOKS = sorted(HERE.glob("*.ipynb"))
GENERATORS = sorted(HERE.glob("make_*.py"))


def test_there_are_notebooks():
    assert NOTEBOOKS and GENERATORS


def generated_notebooks(monkeypatch):
    """{file name: cells} that the generators' main() would write (nothing is written)."""
    monkeypatch.syspath_prepend(str(HERE))  # the generators import their shared writer
    written = {}
    for path in GENERATORS:
        spec = importlib.util.spec_from_file_location(f"_notebook_generator_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        monkeypatch.setattr(module, "write_notebook", lambda cells, name: written.setdefault(name, cells))
        module.main()
    sys.modules.pop("make_notebooks", None)
    return written


def cell_sources(cells):
    """What a generator controls: each cell's type and source (ids are random, outputs not stored)."""
    return [(cell["cell_type"], cell["source"]) for cell in cells]


def test_committed_notebooks_equal_their_generators(monkeypatch):
    generated = generated_notebooks(monkeypatch)
    assert sorted(generated) == [path.name for path in NOTEBOOKS], "a notebook without a generator, or the reverse"
    for path in NOTEBOOKS:
        committed = nbformat.read(path, as_version=4)
        assert cell_sources(committed.cells) == cell_sources(generated[path.name]), (
            f"{path.name} differs from its generator: regenerate it with python notebooks/make_*.py")
        assert not any(cell.get("outputs") for cell in committed.cells), f"{path.name} has stored outputs"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_executes(path, monkeypatch):
    notebook = nbformat.read(path, as_version=4)
    if any("import torch" in cell.source for cell in notebook.cells):
        pytest.importorskip("torch", reason=f"{path.name} needs torch and transformers: pip install 'multidraft[hf]'")
    monkeypatch.setenv("MULTIDRAFT_NOTEBOOK_QUICK", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    errors = [o for cell in notebook.cells for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors

"""Sphinx configuration of the API reference (``make docs``): the pages are generated from the
docstrings, their ``.. doctest::`` examples run (``-b doctest``), and the notebooks of notebooks/
(linked here as docs/api/notebooks) are executed in quick mode and rendered with their outputs."""
import importlib.util
import os
import pathlib
import re

from sphinx.errors import ExtensionError

project = "multidraft"
author = "the multidraft authors"
# napoleon: the docstrings' "Attributes:" sections are Google style. myst_nb: notebooks as pages.
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.doctest", "myst_nb"]
exclude_patterns = ["notebooks/.ipynb_checkpoints"]

# multidraft.hf imports torch and transformers at import time; without them the reference still
# documents it. With them (make docs installs them) the real modules are imported, so that the hf
# page's example, run by the doctest builder in the same process, sees the real multidraft.hf.
HAVE_HF = all(importlib.util.find_spec(name) for name in ("torch", "transformers"))
autodoc_mock_imports = [] if HAVE_HF else ["torch", "transformers"]
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_typehints = "none"  # signatures stay readable; the docstrings say the shapes
napoleon_numpy_docstring = False

# The notebooks run at every build (they are committed without outputs); a failing cell fails it.
nb_execution_mode = "force"
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True
nb_render_markdown_format = "gfm"  # Markdown outputs (the rdk notebook's table) as GitHub renders them
# The kernel inherits this process's environment: the notebooks' small runs (as in
# tests/docs/test_notebooks.py) unless the caller asks for the full ones (MULTIDRAFT_NOTEBOOK_QUICK=0),
# and matplotlib's inline backend (a non-interactive MPLBACKEND such as Agg would show no figure).
os.environ.setdefault("MULTIDRAFT_NOTEBOOK_QUICK", "1")
os.environ.pop("MPLBACKEND", None)
QUICK = os.environ["MULTIDRAFT_NOTEBOOK_QUICK"] == "1"
nb_execution_timeout = 600 if QUICK else -1  # seconds per cell; the full runs are not bounded


def check_notebook_pages(app, exception):
    """Fail the HTML build unless every notebook page shows figures whose image files exist and
    the printed or displayed output of its cells (a page of bare sources would pass unnoticed)."""
    if exception is not None or app.builder.name != "html":
        return
    out = pathlib.Path(app.outdir)
    for docname in sorted(d for d in app.env.found_docs if d.startswith("notebooks/")):
        page = out / f"{docname}.html"
        html = page.read_text(encoding="utf-8")
        images = re.findall(r'<img [^>]*src="([^"]+\.png)"', html)
        missing = [src for src in images if not (page.parent / src).is_file()]
        if not images or missing:
            raise ExtensionError(f"{page}: no figure rendered, or image files missing: {missing}")
        if "cell_output" not in html or "output traceback" in html:
            raise ExtensionError(f"{page}: no cell output rendered, or a traceback")


def setup(app):
    app.connect("build-finished", check_notebook_pages)

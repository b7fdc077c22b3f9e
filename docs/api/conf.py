"""Sphinx configuration of the API reference, generated from the docstrings (``make docs``)."""
project = "multidraft"
author = "the multidraft authors"
# napoleon: the docstrings' "Attributes:" sections are Google style.
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon"]
# multidraft.hf imports torch and transformers at import time; the reference documents it without them.
autodoc_mock_imports = ["torch", "transformers"]
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_typehints = "none"  # signatures stay readable; the docstrings say the shapes
napoleon_numpy_docstring = False

# A package, so that pytest imports this folder's conftest.py as ``property.conftest``: a second
# top-level module named ``conftest`` would replace tests/conftest.py, which test modules import.

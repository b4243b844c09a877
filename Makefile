# Every target uses the virtual environment in .venv/ and creates it when missing.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
PYTEST  := $(BIN)/pytest
# Where Go exists, `make test` first builds (once per machine, cached) the real control plane.
GO      := $(shell command -v go 2>/dev/null)

.PHONY: install test unit integration lint demo bench e2e manifests controlplane clean

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

test: $(STAMP) lint $(if $(GO),controlplane)
	$(PYTEST) -q

# etcd + kube-apiserver built from upstream into ~/.cache/k8slease/controlplane (minutes, once).
controlplane: $(STAMP)
	$(BIN)/python -m k8slease controlplane --build-only

unit: $(STAMP)
	$(PYTEST) -q tests/unit

integration: $(STAMP)
	$(PYTEST) -q tests/integration

demo: $(STAMP)
	$(BIN)/python -m k8slease demo

bench: $(STAMP)
	$(BIN)/python -m benchmarks --server both

e2e: $(STAMP)
	$(PYTEST) -q -m kind tests/e2e

manifests: $(STAMP)
	$(BIN)/python charts/render_manifests.py --write manifests/

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache build dist

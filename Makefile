# Every target uses the virtual environment in .venv/ and creates it when missing.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
PYTEST  := $(BIN)/pytest
# Where Go exists, `make test` first builds (once per machine, cached) the real control plane.
GO      := $(shell command -v go 2>/dev/null)

.PHONY: install test unit integration lint demo bench e2e manifests peers controlplane constraints clean

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
	$(PYTEST) -q tests/unit tests/chart

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

# Peers: other implementations that tests and benchmarks run next to k8slease (needs Go).
PEERS      := build/peers
CLIENTGO   := tests/peers/clientgo
peers: $(PEERS)/clientgo-elector

$(PEERS)/clientgo-elector: $(wildcard $(CLIENTGO)/*.go) $(CLIENTGO)/go.mod $(CLIENTGO)/go.sum
	@command -v go >/dev/null || { echo "make peers: the Go toolchain (go) is not on PATH" >&2; exit 1; }
	mkdir -p $(PEERS)
	cd $(CLIENTGO) && go build -mod=readonly -o $(CURDIR)/$@ .

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

# Every target uses the virtual environment in .venv/ and creates it when missing.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
PYTEST  := $(BIN)/pytest
# Where Go exists, `make test` first builds (once per machine, cached) the real control plane
# and the client-go peer.
GO      := $(shell command -v go 2>/dev/null)
# `make test` runs the test files on this many pytest-xdist workers (0: in one process).
TEST_WORKERS ?= 2

.PHONY: install test test-floor unit integration lint demo bench bench-docs e2e manifests peers controlplane cluster cluster-binaries cluster-image constraints clean soak chaos

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# mypy's incremental cache lives with the project's other caches (XDG_CACHE_HOME, ~/.cache), not
# in the checkout: a fresh clone (CI) then checks in about 1 s instead of about 25. Entries are
# checked against each file's hash, so clones of other commits share it safely.
MYPY_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/k8slease/mypy

lint: $(STAMP)
	$(BIN)/ruff check k8slease tests benchmarks examples charts/render_manifests.py
	$(BIN)/ruff format --check k8slease tests benchmarks examples charts/render_manifests.py
	$(BIN)/mypy --cache-dir $(MYPY_CACHE)

test: $(STAMP) lint $(if $(GO),controlplane peers)
	$(PYTEST) -q -n $(TEST_WORKERS) --dist loadfile

# etcd + kube-apiserver built from upstream into ~/.cache/k8slease/controlplane (minutes, once).
controlplane: $(STAMP)
	$(BIN)/python -m k8slease controlplane --build-only

# The declared dependency floors: k8slease installed with .ci/floor-constraints.txt (every floor
# pinned) in its own venv, then the unit tests and a few integration tests, on the embedded API
# server (the floors are of Python libraries; `make test` covers the real server, and CI builds
# that server while this runs). The venv is kept in build/ and rebuilt only when the
# constraints or pyproject.toml change.
FLOOR       := build/venv-floor
FLOOR_STAMP := $(FLOOR)/.installed
FLOOR_TESTS := tests/unit tests/integration/test_readme_examples.py \
	tests/integration/election/test_elector_inprocess.py tests/integration/election/test_signals.py \
	tests/integration/jobs/test_jobs_locks.py tests/integration/jobs/test_jobs_async.py \
	tests/integration/operator/test_operator_writes.py

$(FLOOR_STAMP): .ci/floor-constraints.txt pyproject.toml
	rm -rf $(FLOOR)
	$(PY) -m venv $(FLOOR)
	$(FLOOR)/bin/python -m pip install --quiet --upgrade pip
	$(FLOOR)/bin/python -m pip install --quiet -c .ci/floor-constraints.txt \
		-e '.[metrics,operator,testing,celery]' pytest pytest-timeout pytest-xdist hypothesis
	touch $(FLOOR_STAMP)

test-floor: $(FLOOR_STAMP)
	$(FLOOR)/bin/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile \
		--k8s-server=embedded $(FLOOR_TESTS)

unit: $(STAMP)
	$(PYTEST) -q tests/unit tests/chart

integration: $(STAMP)
	$(PYTEST) -q tests/integration

demo: $(STAMP)
	$(BIN)/python -m k8slease demo

# Every benchmark, each writing benchmarks/results/*.json with its commit, machine and load,
# then the generated sections of docs/benchmarks.md and README.md rewritten from those files.
bench: $(STAMP)
	$(BIN)/python -m benchmarks --server both
	$(BIN)/python -m benchmarks.bench_operator --groups 2000 --server embedded
	$(BIN)/python -m benchmarks.bench_operator --groups 200 --server real
	$(MAKE) bench-docs

# Only the generated sections, from the committed results (no benchmark runs).
bench-docs: $(STAMP)
	$(BIN)/python -m benchmarks.publish

chaos: $(STAMP)
	$(PYTEST) -q -m chaos tests/chaos

# The simulation soak, then the hostile-content properties at 25 times their examples.
FUZZ_TESTS := tests/unit/lease/test_codecs_total.py tests/unit/operator/test_status_fits_schema.py \
	tests/unit/election/test_hostile_fuzz.py
soak: $(STAMP)
	cd tests/sim && ../../$(BIN)/python soak.py
	K8SLEASE_FUZZ_SCALE=25 $(PYTEST) -q -n $(TEST_WORKERS) -p no:randomly --timeout 3600 $(FUZZ_TESTS)

# The end-to-end suite on kind (where kind and Docker work) or on k8slease's own single-node
# cluster (root; built from upstream by `make cluster`); skipped with the reason elsewhere (an
# error under CI where Go and root exist). No pytest cache: CI runs it beside `make test`.
e2e: $(STAMP) $(if $(GO),cluster)
	$(PYTEST) -q -p no:randomly -p no:cacheprovider -n 0 --timeout=1800 -m kind tests/e2e

# The single-node cluster's binaries and images (kubelet, containerd, CoreDNS, helm, the
# project's image) into ~/.cache/k8slease/cluster, once per machine. Exit status 2 means the
# cluster cannot run here (not root, no namespaces): nothing to build, and not an error.
# cluster-binaries (Go and C: CPU-bound) and cluster-image (debootstrap and pip inside buildah:
# network- and disk-bound) are its two parts, which .ci/run starts beside different work.
cluster: $(STAMP)
	$(BIN)/python -m k8slease cluster --build-only || test $$? -eq 2

cluster-binaries: $(STAMP)
	$(BIN)/python -m k8slease cluster --build-only binaries || test $$? -eq 2

cluster-image: $(STAMP)
	$(BIN)/python -m k8slease cluster --build-only image || test $$? -eq 2

manifests: $(STAMP)
	$(BIN)/python charts/render_manifests.py --write manifests/

# Peers: other implementations that tests and benchmarks run next to k8slease (needs Go).
PEERS      := build/peers
CLIENTGO   := tests/peers/clientgo
peers: $(PEERS)/clientgo-elector

$(PEERS)/clientgo-elector: $(wildcard $(CLIENTGO)/*.go) $(CLIENTGO)/go.mod $(CLIENTGO)/go.sum
	@command -v go >/dev/null || { echo "make peers: the Go toolchain (go) is not on PATH" >&2; exit 1; }
	mkdir -p $(PEERS)
	cd $(CLIENTGO) && go build -mod=readonly -trimpath -ldflags='-s -w' -o $(CURDIR)/$@ .

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

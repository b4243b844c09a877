"""Each benchmark entry point docs/benchmarks.md names answers ``--help`` with its usage and runs
nothing: ``python -m benchmarks.bench_apiserver --help`` used to ignore its arguments, run the
benchmark and rewrite the published ``benchmarks/results/apiserver.json`` (found by the docs'
``help`` check, tests/integration/install/test_doc_blocks.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# the benchmarks import psutil (the dev extra): the floor tests' venv has only the runtime extras
pytest.importorskip("psutil", reason="the benchmarks need the dev extra (psutil)")

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results"


@pytest.mark.parametrize(
    "module",
    ["benchmarks", "benchmarks.locks", "benchmarks.bench_operator", "benchmarks.bench_apiserver"],
)
def test_help_prints_usage_and_runs_nothing(module: str) -> None:
    before = {p.name: p.read_bytes() for p in RESULTS.glob("*.json")}
    done = subprocess.run(
        [sys.executable, "-m", module, "--help"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage:"), done.stdout[:500]
    assert {p.name: p.read_bytes() for p in RESULTS.glob("*.json")} == before


def test_bench_apiserver_refuses_an_unknown_option() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_apiserver", "--quick"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and "unrecognized arguments: --quick" in done.stderr, done

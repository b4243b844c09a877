"""``make bench`` measures failover, API load and locks on the real control plane too (a tiny run
of k8slease alone: the smoke test on the embedded server covers the other implementations)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
TINY = [
    "--skip-others", "--graceful-trials", "1", "--crash-trials", "0", "--load-window", "3",
    "--load-warmup", "1", "--candidates", "2", "--jobs", "5", "--lock-ticks", "1",
    "--lock-replicas", "2", "--import-runs", "1", "--implementations", "k8slease",
]  # fmt: skip


@pytest.mark.slow
def test_bench_runs_failover_and_load_on_the_real_server(
    k8s_real_apiserver: Any, tmp_path: Path
) -> None:
    """(The fixture only decides whether the real tier runs; the bench starts its own.)"""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--server", "real",
         "--out", str(tmp_path), *TINY],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "real kube-apiserver (ControlPlane):" in done.stdout
    real = json.loads((tmp_path / "latest.json").read_text())["figures"]["real"]
    assert "error" not in real, real
    assert real["failover"]["k8slease"]["graceful"]["n"] == 1
    load = real["api_load"]["k8slease"]
    assert load["leader_alone"].get("update", 0) > 0, "the audit log counted the renewals"
    assert load["groups"]["2"]["open_watches"] is None
    locks = real["locks"]["k8slease"]["by_replicas"]["2"]
    assert locks["server"] == "real" and locks["duplicates"] == 0 and locks["missed"] == 0
    assert locks["requests_per_job_tick_by_code"].get("update 200", 0) > 0, "audit log counted"


@pytest.mark.slow
def test_bench_operator_runs_on_the_real_server(k8s_real_apiserver: Any, tmp_path: Path) -> None:
    """The operator benchmark on kube-apiserver: requests counted from its audit log."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_operator", "--groups", "3", "--server", "real",
         "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    document = json.loads((tmp_path / "operator_real_3.json").read_text())
    figures = document["figures"]
    assert figures["server"] == "real" and figures["converged"]
    assert figures["failovers_seen"] == 3
    assert figures["status_patches_startup"] >= 3, "the audit log counted the status writes"
    assert figures["lease_writes_by_operator"] == 0
    assert figures["operator_api_calls_total"] > 0

"""The benchmark harness runs end to end on tiny parameters (figures are not checked)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
TINY = [
    "--skip-others", "--graceful-trials", "1", "--crash-trials", "0", "--load-window", "2",
    "--load-warmup", "0.5", "--candidates", "2", "--jobs", "5", "--lock-ticks", "1",
    "--lock-replicas", "2,3",
    "--import-runs", "1",
]  # fmt: skip


@pytest.mark.slow
def test_bench_quick_harness_writes_table_json_and_png(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--out", str(tmp_path), *TINY],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "graceful failover (SIGTERM)" in done.stdout
    document = json.loads((tmp_path / "latest.json").read_text())
    assert document["benchmark"] == "electors"
    recorded = document["provenance"]
    assert len(recorded["commit"]) == 40 and recorded["machine"]["cores"] >= 1
    for moment in ("before", "after"):
        assert len(recorded["load"][moment]["loadavg"]) == 3
        assert recorded["load"][moment]["other_processes"]["busy"] >= 0
    results = document["figures"]
    for part in ("failover", "api_load", "locks", "footprint"):
        assert "error" not in results[part], results[part]
    assert results["failover"]["k8slease"]["graceful"]["n"] == 1
    if shutil.which("go"):
        assert results["failover"]["clientgo"]["graceful"]["n"] == 1
        assert "client-go (LeaseLock)" in done.stdout
    else:
        assert "Go" in results["meta"]["left_out"]["clientgo"]
    by_replicas = results["locks"]["k8slease"]["by_replicas"]
    assert sorted(by_replicas) == ["2", "3"]
    assert all(run["duplicates"] == 0 for run in by_replicas.values())
    assert all(run["requests_per_job_tick_by_code"].get("update 200", 0) > 0
               for run in by_replicas.values()), "the server counted the claims"  # fmt: skip
    assert (tmp_path / "failover.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.slow
def test_bench_operator_records_its_figures_with_provenance(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_operator", "--groups", "3",
         "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    document = json.loads((tmp_path / "operator_embedded_3.json").read_text())
    assert document["benchmark"] == "operator"
    assert document["provenance"]["command"].endswith("--groups 3 --server embedded")
    figures = document["figures"]
    assert figures["converged"] and figures["failovers_seen"] == 3
    assert figures["lease_writes_by_operator"] == 0

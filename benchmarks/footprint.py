"""Import time of each implementation, measured in fresh interpreters (median of a few runs).

The resident memory of idle replicas is taken during the failover run (see ``failover``).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

from benchmarks.replicas import ROOT, python_env

IMPORTS = {
    "k8slease": "import k8slease",
    # ``kubernetes/__init__`` imports the whole API client, so this is also what a replica with
    # ``LeaseLock`` needs.
    "official": "import kubernetes.leaderelection.leaderelection",
}


def _run(code: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=python_env(), cwd=ROOT)
    return time.perf_counter() - started


def import_times(runs: int = 5) -> dict[str, float]:
    """Median seconds of ``python -c IMPORT`` minus that of ``python -c pass``, per import."""
    baseline = statistics.median(_run("pass") for _ in range(runs))
    result = {"interpreter_start_s": round(baseline, 4)}
    for label, code in IMPORTS.items():
        _run(code)  # warm the file cache and the bytecode
        result[label] = round(statistics.median(_run(code) for _ in range(runs)) - baseline, 4)
    return result

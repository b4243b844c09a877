"""Where a benchmark's figures come from: the code, the machine and its load, in the results file.

Every benchmark of this package writes its figures with :func:`write`, as
``benchmarks/results/<name>.json``::

    {"benchmark": "operator", "provenance": {...}, "figures": {...}}

The provenance records the commit the figures measure (and whether the measured files differed
from it), the date, the machine (cores, memory, Python) and its load: the load average and the
processes outside the benchmark that were busy, just before and just after the run. The machine
these benchmarks run on is often shared, so the load says how far to trust the latencies.

:data:`MEASURES` names, per benchmark, the files whose code it measures (git pathspecs). The
published page is generated from the results (``benchmarks.publish``), and a test fails when
one of those files changed after the recorded commit: the figures would describe older code.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"

#: The harness files every benchmark that starts replicas shares.
_HARNESS = ("benchmarks/common.py", "benchmarks/replicas.py", "benchmarks/targets.py")
_NOT_OPERATOR = (":(exclude)k8slease/operator", ":(exclude)k8slease/cli")
#: What no benchmark starts: the single-node cluster of the e2e suite, the chaos suite's proxy.
_NEVER_RUN = (":(exclude)k8slease/testing/cluster", ":(exclude)k8slease/testing/slowproxy.py")

#: benchmark -> the files (git pathspecs) whose code its figures describe. A change to any of
#: them after the commit a results file records makes that file stale.
MEASURES: dict[str, tuple[str, ...]] = {
    # python -m benchmarks: three electors' failover and API load, per-job locks, footprint
    "electors": (
        "k8slease",
        *_NOT_OPERATOR,
        *_NEVER_RUN,
        *_HARNESS,
        "benchmarks/__main__.py",
        "benchmarks/failover.py",
        "benchmarks/load.py",
        "benchmarks/load_worker.py",
        "benchmarks/locks.py",
        "benchmarks/locks_worker.py",
        "benchmarks/footprint.py",
        "benchmarks/peer_clientgo.py",
        "benchmarks/replica_k8slease.py",
        "benchmarks/replica_official.py",
        "tests/peers/clientgo",
    ),
    # python -m benchmarks.locks: per-job locks alone, at any size
    "locks": (
        "k8slease",
        *_NOT_OPERATOR,
        *_NEVER_RUN,
        *_HARNESS,
        "benchmarks/locks.py",
        "benchmarks/locks_worker.py",
    ),
    # python -m benchmarks.bench_operator: the operator following N groups
    "operator": (
        "k8slease",
        ":(exclude)k8slease/election",
        ":(exclude)k8slease/jobs",
        *_NEVER_RUN,
        "benchmarks/bench_operator.py",
        "benchmarks/targets.py",
    ),
    # python -m benchmarks.bench_apiserver: the embedded API server's throughput and watches
    "apiserver": (
        "k8slease/testing",
        *_NEVER_RUN,
        "k8slease/cli",
        "k8slease/__main__.py",
        "benchmarks/bench_apiserver.py",
    ),
}

#: A process outside the benchmark counts as busy above this share of one core.
BUSY_PERCENT = 10.0


def git(*args: str) -> str:
    """``git ARGS`` in the repository; its stdout, stripped ("" when git fails)."""
    try:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def busy_processes(window: float = 1.0) -> dict[str, Any]:
    """The processes other than this one and its children that used more than
    :data:`BUSY_PERCENT` of a core during ``window`` seconds, and their CPU in all."""
    import psutil  # the dev extra: only a benchmark run needs it, not the staleness checks

    ours = {os.getpid(), *(p.pid for p in psutil.Process().children(recursive=True))}
    first: dict[int, float] = {}
    for process in psutil.process_iter():
        try:
            times = process.cpu_times()
            first[process.pid] = times.user + times.system
        except (psutil.Error, OSError):
            continue
    time.sleep(window)
    busy, total = 0, 0.0
    for process in psutil.process_iter():
        if process.pid in ours or process.pid not in first:
            continue
        try:
            times = process.cpu_times()
        except (psutil.Error, OSError):
            continue
        percent = 100.0 * (times.user + times.system - first[process.pid]) / window
        total += percent
        busy += percent > BUSY_PERCENT
    return {"busy": busy, "cpu_percent": round(total, 1)}


def load_now() -> dict[str, Any]:
    """The load average (1, 5, 15 min) and the busy processes outside the benchmark, now."""
    return {
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "other_processes": busy_processes(),
    }


def machine() -> dict[str, Any]:
    """Cores, memory, CPU model, OS and Python of this machine."""
    import psutil  # the dev extra, as above

    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "cpu": cpu,
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def dirty(paths: Sequence[str]) -> list[str]:
    """The files among ``paths`` that differ from the commit: changed, or new and untracked."""
    changed = git("diff", "--name-only", "HEAD", "--", *paths).splitlines()
    new = git("ls-files", "--others", "--exclude-standard", "--", *paths).splitlines()
    return sorted({*changed, *new})


@dataclass
class Run:
    """One benchmark run being recorded: :func:`start` it before, :meth:`finish` it after."""

    benchmark: str
    started: float
    provenance: dict[str, Any]

    def finish(self) -> dict[str, Any]:
        """The provenance with the load after the run and the run's duration."""
        self.provenance["load"]["after"] = load_now()
        self.provenance["duration_s"] = round(time.monotonic() - self.started, 1)
        return self.provenance


def start(benchmark: str, command: str, **settings: Any) -> Run:
    """Record the code, machine and load before ``benchmark`` runs; ``command`` reruns it (the
    staleness check names it), ``settings`` are its options, kept with the figures."""
    if benchmark not in MEASURES:
        raise ValueError(f"unknown benchmark {benchmark!r}; add it to MEASURES: {list(MEASURES)}")
    provenance: dict[str, Any] = {
        "commit": git("rev-parse", "HEAD"),
        "dirty": dirty(MEASURES[benchmark]),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "load": {"before": load_now()},
        "command": command,
        "settings": settings,
    }
    return Run(benchmark, time.monotonic(), provenance)


def write(path: Path, run: Run, figures: Mapping[str, Any]) -> Path:
    """Write ``figures`` with the provenance of ``run`` (finished now) to ``path``."""
    document = {"benchmark": run.benchmark, "provenance": run.finish(), "figures": dict(figures)}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=1) + "\n")
    return path


def read(path: Path) -> dict[str, Any]:
    """A results file written by :func:`write`; ValueError naming the file when it is not one."""
    document = json.loads(path.read_text())
    if not isinstance(document, dict) or not {"benchmark", "provenance", "figures"} <= set(
        document
    ):
        raise ValueError(
            f"{path}: not a benchmark results file (expected benchmark, provenance, figures)"
        )
    return document

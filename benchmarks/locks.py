"""Per-job lock claims of ONCE_PER_TICK jobs (k8slease only: the official client has no per-job
locks). The claims run in a child process (``locks_worker``) so that they do not share a GIL
with the API server in this process."""

from __future__ import annotations

from collections import Counter
from typing import IO, Any

from benchmarks.replicas import Replica
from k8slease.testing.server import APIServer


def measure(
    server: APIServer,
    *,
    jobs: int = 100,
    replicas: int = 3,
    ticks: int = 3,
    workers: int = 30,
    stderr: IO[Any] | None = None,
    timeout: float = 600.0,
) -> dict[str, Any]:
    """Run the lock worker; returns its figures."""
    args = ["--kubeconfig", str(server.kubeconfig), "--url", server.url]
    args += ["--jobs", str(jobs), "--replicas", str(replicas)]
    args += ["--ticks", str(ticks), "--workers", str(workers), "--group", f"bench-{replicas}"]
    worker = Replica("locks_worker", args, "locks", stderr)
    try:
        if worker.wait_for("result", timeout) is None:
            raise RuntimeError("the lock worker gave no result")
        result = worker.result("result")
        result.pop("t", None)
    finally:
        worker.close()
    # The worker reset the server's counters after its warm-up tick: the log holds the measured
    # ticks (and the watches that ended at its stop), with status codes (409: lost a race).
    codes = Counter(
        f"{r.verb} {r.code}" for r in server.stats.requests() if r.verb not in ("watch", "list")
    )
    job_ticks = result["job_ticks"]
    result["requests_per_job_tick_by_code"] = {
        key: round(n / job_ticks, 3) for key, n in sorted(codes.items())
    }
    return result

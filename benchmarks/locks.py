"""Per-job lock claims of ONCE_PER_TICK jobs (k8slease only: the official client has no per-job
locks). The claims run in a child process (``locks_worker``) so that they do not share a GIL
with the API server in this process."""

from __future__ import annotations

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
    timeout: float = 180.0,
) -> dict[str, Any]:
    """Run the lock worker; returns its figures."""
    args = ["--kubeconfig", str(server.kubeconfig), "--url", server.url]
    args += ["--jobs", str(jobs), "--replicas", str(replicas)]
    args += ["--ticks", str(ticks), "--workers", str(workers)]
    worker = Replica("locks_worker", args, "locks", stderr)
    try:
        if worker.wait_for("result", timeout) is None:
            raise RuntimeError("the lock worker gave no result")
        return worker.result("result")
    finally:
        worker.close()

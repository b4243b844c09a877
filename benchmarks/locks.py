"""Per-job lock claims of ONCE_PER_TICK jobs (k8slease only: the official client has no per-job
locks). The claims run in a child process (``locks_worker``) so that they do not share a GIL
with the API server in this process.

On its own, for other sizes (one embedded API server per replica count)::

    .venv/bin/python -m benchmarks.locks --replicas 10 --jobs 1000 --ticks 2 [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import IO, Any

from benchmarks.common import quiet_logging
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", default="3,10", help="replica counts, comma-separated")
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--ticks", type=int, default=3)
    parser.add_argument("--out", type=Path, help="write the figures there as JSON")
    args = parser.parse_args(argv)
    quiet_logging()
    results: dict[str, Any] = {}
    for n in (int(x) for x in args.replicas.split(",")):
        with APIServer(log_size=2_000_000) as server:
            results[str(n)] = measure(server, jobs=args.jobs, replicas=n, ticks=args.ticks)
    text = json.dumps(results, indent=1)
    if args.out is not None:
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

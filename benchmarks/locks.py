"""Per-job lock claims of ONCE_PER_TICK jobs (k8slease only: the official client has no per-job
locks). The claims run in a child process (``locks_worker``) so that they do not share a GIL
with the API server in this process. The server counts the requests (the embedded one from its
request log, a real kube-apiserver from its audit log): the worker says when the measured ticks
begin and end and waits for the count to be taken.

On its own, for other sizes (one server per replica count)::

    .venv/bin/python -m benchmarks.locks --replicas 10 --jobs 1000 --ticks 2 [--server real]

which writes the figures with their provenance (``benchmarks.provenance``) to
``benchmarks/results/locks_<server>_<jobs>jobs_<replicas>replicas.json`` (``--out`` elsewhere).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import IO, Any

from benchmarks import provenance
from benchmarks.common import NAMESPACE, quiet_logging
from benchmarks.replicas import Replica
from benchmarks.targets import SERVERS, Target, open_target


def measure(
    target: Target,
    *,
    jobs: int = 100,
    replicas: int = 3,
    ticks: int = 3,
    workers: int = 30,
    stderr: IO[Any] | None = None,
    timeout: float = 600.0,
) -> dict[str, Any]:
    """Run the lock worker; returns its figures."""
    args = ["--kubeconfig", str(target.kubeconfig)]
    args += ["--jobs", str(jobs), "--replicas", str(replicas)]
    args += ["--ticks", str(ticks), "--workers", str(workers), "--group", f"bench-{replicas}"]
    worker = Replica("locks_worker", args, "locks", stderr, stdin=True)
    try:
        if worker.wait_for("measuring", timeout) is None:
            raise RuntimeError("the lock worker did not reach its measured ticks")
        target.reset()
        worker.send("go")
        if worker.wait_for("measured", timeout) is None:
            raise RuntimeError("the lock worker did not finish its measured ticks")
        codes = target.lease_writes_and_reads()
        worker.send("go")
        if worker.wait_for("result", timeout) is None:
            raise RuntimeError("the lock worker gave no result")
        result = worker.result("result")
        result.pop("t", None)
    finally:
        worker.close()
    # requests between the two marks, with status codes (409: lost a race); the informers'
    # lists and watches are left out (they do not grow with ticks)
    job_ticks = result["job_ticks"]
    result["server"] = target.name
    result["requests_per_job_tick"] = {
        f"{verb} leases.coordination.k8s.io": round(n / job_ticks, 3)
        for verb, n in sorted(_by_verb(codes).items())
    }
    result["requests_per_job_tick_by_code"] = {
        key: round(n / job_ticks, 3) for key, n in sorted(codes.items())
    }
    return result


def _by_verb(codes: Counter[str]) -> Counter[str]:
    verbs: Counter[str] = Counter()
    for key, n in codes.items():
        verbs[key.split()[0]] += n
    return verbs


def result_path(out: Path, server: str, jobs: int, replicas: list[int]) -> Path:
    """Where the figures of one run go."""
    counts = "_".join(str(n) for n in replicas)
    return out / f"locks_{server}_{jobs}jobs_{counts}replicas.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", default="3,10", help="replica counts, comma-separated")
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--ticks", type=int, default=3)
    parser.add_argument("--server", choices=SERVERS, default="embedded")
    parser.add_argument("--out", type=Path, default=provenance.RESULTS, help="results directory")
    args = parser.parse_args(argv)
    try:
        counts = [int(x) for x in args.replicas.split(",")]
    except ValueError:
        parser.error(f"--replicas: expected comma-separated integers, not {args.replicas!r}")
    quiet_logging()
    command = f"python -m benchmarks.locks --replicas {args.replicas} --jobs {args.jobs}"
    command += f" --ticks {args.ticks} --server {args.server}"
    started = provenance.start(
        "locks", command, server=args.server, jobs=args.jobs, ticks=args.ticks, replicas=counts
    )
    results: dict[str, Any] = {}
    for n in counts:
        with open_target(args.server, NAMESPACE) as target:
            results[str(n)] = measure(target, jobs=args.jobs, replicas=n, ticks=args.ticks)
    print(json.dumps(results, indent=1))
    path = result_path(args.out, args.server, args.jobs, counts)
    print(f"wrote {provenance.write(path, started, results)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A replica for the slow-API scenario (issue 22, tests/chaos/slowcp.py): ``Jobs`` with an
ONCE_PER_TICK job (``tick``) and a LEADER-class job (``lead``), both every ``--every`` seconds,
with the election timings given (``--timing 60/20/40``) and every other option at its default,
as an application would run it.

The journal (``--journal``) gets, on CLOCK_MONOTONIC (shared by the processes of one machine):

* ``start <job> <tick epoch> <token> <mono>`` and ``end <job> <tick epoch> <token> <mono>`` around
  each run (a run lasts ``--run`` seconds);
* ``leading <mono> <0|1>`` whenever ``Jobs.is_leader`` changes (sampled every 20 ms).

The k8slease log goes to ``--log``, each line prefixed by CLOCK_MONOTONIC and the wall clock, so
the scenario can match every lost tick with the warning that reports it. SIGTERM is Jobs' own.
"""

from __future__ import annotations

import argparse
import faulthandler
import logging
import signal
import sys
import threading
import time
from typing import IO

from k8slease.election.timing import ElectionTiming
from k8slease.jobs.context import JobContext
from k8slease.jobs.registry import Jobs
from k8slease.jobs.spec import Mode
from k8slease.kube.apiclient import default_api_client


class _Clocks(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.mono = f"{time.monotonic():.6f}"
        record.wall = f"{time.time():.3f}"
        return True


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--identity", required=True)
    parser.add_argument("--journal", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--timing", default="60/20/40", help="lease/renew interval/deadline")
    parser.add_argument("--every", type=float, default=10.0)
    parser.add_argument("--run", type=float, default=1.0)
    args = parser.parse_args()
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    lease, renew, deadline = (float(x) for x in args.timing.split("/"))

    handler = logging.FileHandler(args.log)
    handler.addFilter(_Clocks())
    handler.setFormatter(logging.Formatter("%(mono)s %(wall)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger("k8slease")
    root.addHandler(handler)
    root.setLevel(logging.INFO)

    journal: IO[str] = open(args.journal, "a", buffering=1)  # noqa: SIM115 (lives as long as we)
    write_lock = threading.Lock()

    def write(line: str) -> None:
        with write_lock:
            journal.write(line + "\n")

    jobs = Jobs(
        "slowcp",
        namespace=args.namespace,
        identity=args.identity,
        api_client=default_api_client(kubeconfig=args.kubeconfig),
        election=ElectionTiming(
            lease_duration=lease, renew_interval=renew, renew_deadline=deadline
        ),
    )

    def job(name: str) -> object:
        def run(ctx: JobContext) -> None:
            assert ctx.tick is not None
            stamp = f"{name} {ctx.tick.timestamp():.0f} {ctx.fencing_token}"
            write(f"start {stamp} {time.monotonic():.6f}")
            ctx.lost.wait(args.run)
            write(f"end {stamp} {time.monotonic():.6f} {'lost' if ctx.lost.is_set() else 'done'}")

        return run

    jobs.interval(seconds=args.every, name="tick")(job("tick"))
    jobs.interval(seconds=args.every, mode=Mode.LEADER, name="lead")(job("lead"))

    def sample() -> None:
        was: bool | None = None
        while True:
            now = jobs.is_leader
            if now != was:
                write(f"leading {time.monotonic():.6f} {int(now)}")
                was = now
            time.sleep(0.02)  # a sampler of another thread's state: nothing to wait on

    jobs.start()
    write(f"up {time.monotonic():.6f}")
    threading.Thread(target=sample, name="leading-sampler", daemon=True).start()
    jobs.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())

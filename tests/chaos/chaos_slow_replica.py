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

import sys
import threading
import time

from k8slease.election.timing import ElectionTiming
from k8slease.jobs.context import JobContext
from k8slease.jobs.spec import Mode
from tests.chaos.replica import journal_writer, log_to, replica_args, replica_jobs


def main() -> int:
    args = replica_args(
        every=10.0,
        run=1.0,
        more=lambda p: p.add_argument(
            "--timing", default="60/20/40", help="lease/renew interval/deadline"
        ),
    )
    lease, renew, deadline = (float(x) for x in args.timing.split("/"))
    log_to(args.log, wall=True)
    write = journal_writer(args.journal)

    jobs = replica_jobs(
        args,
        "slowcp",
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

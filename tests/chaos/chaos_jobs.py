"""A job-holder replica for the chaos suite: ``Jobs`` with a per-tick job and a leader singleton,
journalling every act of running a tick and of leading on CLOCK_MONOTONIC.

* ``tick`` (ONCE_PER_TICK, every ``--every`` s, ``lock_at_most_for`` ``--lock``): a run appends
  ``start <tick> <token> <mono>``, then ``work <tick> <token> <mono>`` every 5 ms while
  ``ctx.lost`` is not set, then ``lost <tick> <token> <mono>`` the first time it reads
  ``ctx.lost`` and ``end <tick> <token> <mono> <done|lost>``. A run lasts ``--run`` seconds.
* ``lead`` (LEADER singleton): ``lead <mono> <token>`` every 5 ms while ``ctx.lost`` is not set.

An act is journalled at the instant ``before`` taken ahead of the check, and skipped if the
process was stopped between the check and the write (as chaos_elector.py does), so the journal
holds only acts this process really did while it believed it held the lock or led.

The k8slease log (the lock and the runner at debug level: their skips, with the tick) goes to
``--log``, each line prefixed by CLOCK_MONOTONIC. SIGTERM is Jobs' own: release, then the
default action.
"""

from __future__ import annotations

import logging
import sys
import time

from k8slease.election.timing import ElectionTiming
from k8slease.jobs.context import JobContext
from k8slease.jobs.spec import Mode
from tests.chaos.replica import journal_writer, log_to, replica_args, replica_jobs


def main() -> int:
    args = replica_args(
        every=2.0, run=1.5, more=lambda p: p.add_argument("--lock", type=float, default=3.0)
    )
    log_to(args.log)
    logging.getLogger("k8slease.locks").setLevel(logging.DEBUG)
    logging.getLogger("k8slease.jobs").setLevel(logging.DEBUG)  # every skip, with its tick
    write = journal_writer(args.journal)

    jobs = replica_jobs(
        args,
        "chaosjobs",
        election=ElectionTiming(  # one request timeout: the election's, the locks', Events'
            lease_duration=2,
            renew_interval=0.4,
            renew_deadline=1.4,
            retry_interval=0.5,
            request_timeout=1.0,
        ),
        restart_delay=0.1,
    )

    @jobs.interval(seconds=args.every, lock_at_most_for=args.lock, grace=args.every, name="tick")
    def tick(ctx: JobContext) -> None:
        assert ctx.tick is not None
        stamp = f"{ctx.tick.timestamp():.0f} {ctx.fencing_token}"
        write(f"start {stamp} {time.monotonic():.6f}")
        until = time.monotonic() + args.run
        outcome = "done"
        while True:
            before = time.monotonic()
            if ctx.lost.is_set():  # also read once the run is over: did it hold to the end?
                write(f"lost {stamp} {time.monotonic():.6f}")
                outcome = "lost"
                break
            if before >= until:
                break
            if time.monotonic() - before < 0.05:
                write(f"work {stamp} {before:.6f}")
            time.sleep(0.005)  # the run is work for a duration: the scenario, not a wait
        write(f"end {stamp} {time.monotonic():.6f} {outcome}")

    @jobs.singleton(mode=Mode.LEADER, name="lead")
    def lead(ctx: JobContext) -> None:
        while not ctx.lost.wait(0.005):
            before = time.monotonic()
            if not ctx.lost.is_set() and time.monotonic() - before < 0.05:
                write(f"lead {before:.6f} {ctx.fencing_token}")

    jobs.start()
    write(f"up {time.monotonic():.6f}")  # scheduling, claiming and electing from now on
    jobs.run()  # already started: blocks until stopped
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A job of the ``schedule`` library run once per tick across replicas, with k8slease's TickLock.

Every replica runs the same ``schedule`` loop; the tick lock lets one of them run each tick (the
current time floored to ``--period``) and records the run on the job's Lease, as ``Jobs`` does::

    pip install k8slease schedule
    python -m k8slease apiserver &            # prints a kubeconfig path (or use a real cluster)
    python examples/schedule_app.py --kubeconfig PATH &
    python examples/schedule_app.py --kubeconfig PATH &

``schedule`` fires each replica every ``--every`` seconds (fire at least once per period; more
often costs one read of the Lease per extra fire, and a replica's first fire in a period is the
one that may run it). For minutes, hours or days, ``schedule.every().minute.at(":00")`` (or
``.hour.at(":00")``, ``.day.at("02:00")``) with the matching ``period`` fires once, right after
the tick. SIGTERM (or Ctrl-C) lets a run in progress finish and release its lock, then exits.
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
import time
from types import FrameType

import schedule

from k8slease import JobContext, TickLock
from k8slease.kube.apiclient import default_api_client


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, then ~/.kube)")
    parser.add_argument("--namespace", default=None, help="namespace (default: POD_NAMESPACE...)")
    parser.add_argument("--identity", default=None, help="holder identity (default: host + random)")
    parser.add_argument("--group", default="reports", help="the group (Lease prefix)")
    parser.add_argument("--period", type=float, default=60.0, help="seconds per tick")
    parser.add_argument("--every", type=float, default=15.0, help="seconds between fires")
    parser.add_argument("--lock-at-most-for", type=float, default=60.0)
    parser.add_argument("--work", type=float, default=0.0, help="seconds each run takes")
    parser.add_argument("--runs", default=None, help="append 'identity tick token' per run here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    ticks = TickLock(
        args.group,
        namespace=args.namespace,
        identity=args.identity,
        api_client=default_api_client(kubeconfig=args.kubeconfig),
    )

    @ticks.once_per_tick("report", period=args.period, lock_at_most_for=args.lock_at_most_for)
    def report(ctx: JobContext) -> None:
        assert ctx.tick is not None
        print(f"{ctx.identity} runs tick {ctx.tick.isoformat()} (token {ctx.fencing_token})")
        if args.runs:  # one short O_APPEND write per run: lines of processes never interleave
            line = f"{ctx.identity} {ctx.tick.isoformat()} {ctx.fencing_token}\n"
            fd = os.open(args.runs, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                os.write(fd, line.encode())
            finally:
                os.close(fd)
        ctx.lost.wait(args.work)  # the work; stop early if the lock could not be kept

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()  # the run in progress (if any) finishes and releases its lock first

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    schedule.every(args.every).seconds.do(report)
    print(f"{ticks.identity} ready", flush=True)
    while not stop.is_set():
        schedule.run_pending()
        time.sleep(min(0.1, args.every / 4))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""An ``asyncio`` loop of your own run once per tick across replicas, with k8slease's TickLock.

Every replica runs the same loop: it sleeps until just after the next multiple of ``--period``
(counted from 2000-01-01 UTC, as the tick lock counts) and calls the decorated coroutine; the tick
lock lets one replica run each tick and records the run on the job's Lease::

    python -m k8slease apiserver &            # prints a kubeconfig path (or use a real cluster)
    python examples/loop_app.py --kubeconfig PATH &
    python examples/loop_app.py --kubeconfig PATH &

SIGTERM (or Ctrl-C) lets a run in progress finish and release its lock, then exits. A coroutine
run is cancelled if its lock cannot be kept (recorded ``lost``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import time

from k8slease import JobContext, TickLock
from k8slease.kube.apiclient import default_api_client


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, then ~/.kube)")
    parser.add_argument("--namespace", default=None, help="namespace (default: POD_NAMESPACE...)")
    parser.add_argument("--identity", default=None, help="holder identity (default: host + random)")
    parser.add_argument("--group", default="sweeps", help="the group (Lease prefix)")
    parser.add_argument("--period", type=float, default=60.0, help="seconds per tick")
    parser.add_argument("--lock-at-most-for", type=float, default=60.0)
    parser.add_argument("--work", type=float, default=0.0, help="seconds each run takes")
    parser.add_argument("--runs", default=None, help="append 'identity tick token' per run here")
    return parser.parse_args(argv)


def until_next_tick(period: float, *, after: float = 0.02) -> float:
    """Seconds from now to ``after`` seconds past the next multiple of ``period`` (epoch-based,
    which 2000-01-01 UTC is a whole number of days from: the same boundaries)."""
    now = time.time()
    return period - now % period + after


async def run(args: argparse.Namespace) -> None:
    ticks = TickLock(
        args.group,
        namespace=args.namespace,
        identity=args.identity,
        api_client=default_api_client(kubeconfig=args.kubeconfig),
    )

    @ticks.once_per_tick("sweep", period=args.period, lock_at_most_for=args.lock_at_most_for)
    async def sweep(ctx: JobContext) -> None:
        assert ctx.tick is not None
        print(f"{ctx.identity} runs tick {ctx.tick.isoformat()} (token {ctx.fencing_token})")
        if args.runs:  # one short O_APPEND write per run: lines of processes never interleave
            line = f"{ctx.identity} {ctx.tick.isoformat()} {ctx.fencing_token}\n"
            fd = os.open(args.runs, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                os.write(fd, line.encode())
            finally:
                os.close(fd)
        await asyncio.sleep(args.work)  # the work

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    print(f"{ticks.identity} ready", flush=True)
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), until_next_tick(args.period))
        except TimeoutError:
            await sweep()  # a run in progress finishes before the loop looks at stop again


def main(argv: list[str] | None = None) -> int:
    asyncio.run(run(parse_args(argv)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

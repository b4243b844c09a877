"""A k8slease ``LeaderElector`` in its own process, speaking the client-go peer's JSON lines.

``python tests/peers/k8slease_peer.py --kubeconfig P --namespace NS --lease L --identity I``
prints one line per event on stdout, like ``tests/peers/clientgo``::

    {"event": "started_leading"|"stopped_leading"|"new_leader", "identity": ..., "leader": ...,
     "time": <unix seconds>, "fencing_token": ...}

and ``renewed`` after every successful renew (the response has arrived).

Durations are in seconds. SIGTERM stops the elector, which releases the Lease, and exits 0.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
import time
from typing import Any

import structlog

from k8slease import LeaderElector, LeadershipContext
from k8slease.kube.apiclient import default_api_client

_out = threading.Lock()


def emit(event: str, identity: str, leader: str, **extra: Any) -> None:
    """One JSON line on stdout, stamped with the wall-clock time of the call."""
    line = {"event": event, "identity": identity, "leader": leader, "time": time.time(), **extra}
    with _out:
        print(json.dumps(line), flush=True)


class RenewReporter:
    """Elector metrics that report every successful renew as a ``renewed`` line."""

    def __init__(self, identity: str) -> None:
        self.identity = identity

    def set_leader(self, lease: str, leading: bool) -> None:
        pass

    def renewed(self, lease: str, seconds: float) -> None:
        emit("renewed", self.identity, self.identity)

    def failed(self, lease: str, op: str, reason: str) -> None:
        pass


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--lease", required=True)
    parser.add_argument("--identity", required=True)
    parser.add_argument("--lease-duration", type=float, default=3.0)
    parser.add_argument("--renew-interval", type=float, default=0.5)
    parser.add_argument("--renew-deadline", type=float, default=2.0)
    parser.add_argument("--retry-interval", type=float, default=1.0)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
                        logger_factory=structlog.PrintLoggerFactory(sys.stderr))  # fmt: skip
    me = args.identity

    def lead(ctx: LeadershipContext) -> None:
        emit("started_leading", me, me, fencing_token=ctx.fencing_token)
        ctx.lost.wait()

    def stopped(ctx: LeadershipContext) -> None:
        emit("stopped_leading", me, "", fencing_token=ctx.fencing_token)

    elector = LeaderElector(
        args.lease,
        namespace=args.namespace,
        identity=me,
        lease_duration=args.lease_duration,
        renew_interval=args.renew_interval,
        renew_deadline=args.renew_deadline,
        retry_interval=args.retry_interval,
        api_client=default_api_client(kubeconfig=args.kubeconfig),
        on_started_leading=lead,
        on_stopped_leading=stopped,
        on_new_leader=lambda holder: emit("new_leader", me, holder),
        handle_signals=True,
        metrics=RenewReporter(me),
    )
    # like the client-go peer, exit 0 on SIGTERM: the elector releases the Lease first and then
    # hands the signal on to the handler that was there before it (this one)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    elector.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())

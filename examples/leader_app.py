"""A minimal app that leads with k8slease and logs while it does.

Run several copies against one cluster (or the embedded API server) and stop or kill them to
watch leadership move::

    python -m k8slease apiserver &            # prints a kubeconfig path (or use a real cluster)
    python examples/leader_app.py --kubeconfig PATH --name demo
    python examples/leader_app.py --kubeconfig PATH --name demo

SIGTERM or Ctrl-C releases the Lease so that another copy takes over at once; a killed copy's
Lease is taken over after ``--lease-duration`` seconds.
"""

from __future__ import annotations

import argparse
import sys

import structlog

from k8slease import LeaderElector, LeadershipContext
from k8slease.kube.apiclient import default_api_client

log = structlog.get_logger("leader_app")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, then ~/.kube)")
    parser.add_argument("--name", default="demo", help="Lease name (default: demo)")
    parser.add_argument("--namespace", default=None, help="namespace (default: POD_NAMESPACE...)")
    parser.add_argument("--identity", default=None, help="holder identity (default: host + random)")
    parser.add_argument("--lease-duration", type=float, default=15.0)
    parser.add_argument("--renew-interval", type=float, default=5.0)
    parser.add_argument("--renew-deadline", type=float, default=10.0)
    parser.add_argument("--retry-interval", type=float, default=2.0)
    parser.add_argument("--work-interval", type=float, default=1.0, help="seconds between logs")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    def lead(ctx: LeadershipContext) -> None:
        # The leader's work: here, a log line every --work-interval seconds until leadership ends.
        log.info("app.leading", identity=ctx.identity, fencing_token=ctx.fencing_token)
        while not ctx.lost.wait(args.work_interval):
            log.info("app.working", identity=ctx.identity, fencing_token=ctx.fencing_token)

    def stopped(ctx: LeadershipContext) -> None:
        log.info("app.not_leading", identity=ctx.identity, fencing_token=ctx.fencing_token)

    elector = LeaderElector(
        args.name,
        namespace=args.namespace,
        identity=args.identity,
        lease_duration=args.lease_duration,
        renew_interval=args.renew_interval,
        renew_deadline=args.renew_deadline,
        retry_interval=args.retry_interval,
        api_client=default_api_client(kubeconfig=args.kubeconfig),
        on_started_leading=lead,
        on_stopped_leading=stopped,
        on_new_leader=lambda holder: log.info("app.leader_is", holder=holder or None),
    )
    # SIGTERM/SIGINT (handle_signals, the default): the Lease is released, then the signal takes
    # its usual course (SIGTERM ends the process, SIGINT raises KeyboardInterrupt)
    elector.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""One k8slease replica for the benchmark: ``python -m benchmarks.replica_k8slease``.

Prints JSON lines: ``ready`` once started, ``leading`` in ``on_started_leading`` and ``stopped``
when it ends. SIGTERM stops it gracefully (the Lease is released).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from benchmarks.common import NAMESPACE, SETTINGS, emit, replica_args
from k8slease import LeaderElector, LeadershipContext
from k8slease.kube.apiclient import default_api_client


def build_elector(
    kubeconfig: str,
    name: str,
    identity: str,
    on_leading: Callable[[], None],
    *,
    handle_signals: bool = False,
) -> LeaderElector:
    """A ``LeaderElector`` with the benchmark's lease settings and its own API client."""

    def lead(ctx: LeadershipContext) -> None:
        on_leading()
        ctx.lost.wait()  # returning would give leadership up

    return LeaderElector(
        name,
        namespace=NAMESPACE,
        identity=identity,
        lease_duration=SETTINGS.lease_duration,
        renew_interval=SETTINGS.renew_interval,
        renew_deadline=SETTINGS.renew_deadline,
        retry_interval=SETTINGS.retry_interval,
        api_client=default_api_client(kubeconfig=kubeconfig),
        on_started_leading=lead,
        handle_signals=handle_signals,
    )


def main(argv: list[str] | None = None) -> int:
    args = replica_args(__doc__.split("\n\n")[0], argv)
    elector = build_elector(
        args.kubeconfig,
        args.name,
        args.identity,
        lambda: emit("leading", identity=args.identity),
        handle_signals=True,
    )
    elector.start()
    emit("ready", identity=args.identity)
    elector.wait()
    emit("stopped", identity=args.identity)
    return 0


if __name__ == "__main__":
    sys.exit(main())

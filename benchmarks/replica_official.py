"""One replica on the official client's elector: ``python -m benchmarks.replica_official``.

``kubernetes.leaderelection`` with a ``LeaseLock``. Prints the same JSON lines as
``replica_k8slease``. The official elector has no stop: SIGTERM ends the process (the default
handler) and the Lease is left to expire, which is what an application built on it does.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

from kubernetes import client, config
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

from benchmarks.common import NAMESPACE, SETTINGS, emit, replica_args


def build_election(
    kubeconfig: str, name: str, identity: str, on_leading: Callable[[], None]
) -> Any:
    """A ``LeaderElection`` with the benchmark's lease settings and its own API client.

    Adapter: ``LeaseLock`` builds its ``CoordinationV1Api`` on the process-wide default client;
    it is replaced by one on a client of its own, so that many electors in one process (the API
    load run) each have their own connection, as separate replicas would.
    """
    lock = LeaseLock(name, NAMESPACE, identity)  # type: ignore[no-untyped-call]
    api_client = config.new_client_from_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]
    lock.api_instance = client.CoordinationV1Api(api_client)

    def lead() -> None:
        on_leading()
        threading.Event().wait()  # the work "runs" until the process ends

    election_config = electionconfig.Config(  # type: ignore[no-untyped-call]
        lock,
        lease_duration=int(SETTINGS.lease_duration),
        renew_deadline=SETTINGS.renew_deadline,
        retry_period=SETTINGS.retry_interval,
        onstarted_leading=lead,
        onstopped_leading=None,
    )
    return leaderelection.LeaderElection(election_config)  # type: ignore[no-untyped-call]


def main(argv: list[str] | None = None) -> int:
    args = replica_args(__doc__.split("\n\n")[0], argv)
    election = build_election(
        args.kubeconfig, args.name, args.identity, lambda: emit("leading", identity=args.identity)
    )
    emit("ready", identity=args.identity)
    election.run()  # returns only when a renew failed for renew_deadline
    emit("stopped", identity=args.identity)
    return 0


if __name__ == "__main__":
    sys.exit(main())

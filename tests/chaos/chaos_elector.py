"""A replica for the chaos suite: leads with k8slease and records every act of leading.

While :attr:`LeaderElector.is_leader` says so it appends ``work <monotonic> <token>`` to its
journal every 5 ms (the clock is CLOCK_MONOTONIC, shared by the processes of one machine), so
the suite can check that no two processes ever acted as leader at the same instant, whatever
was done to them.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time

from k8slease import LeaderElector
from k8slease.kube.apiclient import default_api_client


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--identity", required=True)
    parser.add_argument("--journal", required=True)
    args = parser.parse_args()
    elector = LeaderElector(
        "chaos",
        namespace=args.namespace,
        identity=args.identity,
        lease_duration=2,
        renew_interval=0.4,
        renew_deadline=1.4,
        retry_interval=0.5,
        api_client=default_api_client(kubeconfig=args.kubeconfig),
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    elector.start()
    with open(args.journal, "a", buffering=1) as journal:
        while not stop.wait(0.005):
            before = time.monotonic()
            token = elector.fencing_token
            if elector.is_leader and token is not None and time.monotonic() - before < 0.05:
                # an act of leading at ``before``; skipped if this process was stopped between
                # the check and now (acting late is what fencing tokens are for)
                journal.write(f"work {before:.6f} {token}\n")
        elector.stop()  # steps down first, then releases the Lease
    return 0


if __name__ == "__main__":
    sys.exit(main())

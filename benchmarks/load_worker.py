"""1 leader + N candidates of one implementation as threads of one process (the API load run):
``python -m benchmarks.load_worker --impl k8slease --name L --candidates N --kubeconfig P``.

Each elector has its own API client. Prints ``ready`` once the first elector leads and the
candidates are started, then runs until it is killed.
"""

from __future__ import annotations

import argparse
import sys
import threading

from benchmarks.common import emit, quiet_logging


def start_k8slease(kubeconfig: str, name: str, identity: str, leading: threading.Event) -> None:
    from benchmarks.replica_k8slease import build_elector

    build_elector(kubeconfig, name, identity, leading.set).start()


def start_official(kubeconfig: str, name: str, identity: str, leading: threading.Event) -> None:
    from benchmarks.replica_official import build_election

    election = build_election(kubeconfig, name, identity, leading.set)
    threading.Thread(target=election.run, name=identity, daemon=True).start()


STARTERS = {"k8slease": start_k8slease, "official": start_official}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--impl", choices=sorted(STARTERS), required=True)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--candidates", type=int, required=True)
    args = parser.parse_args(argv)
    quiet_logging()
    start = STARTERS[args.impl]
    leading = threading.Event()
    start(args.kubeconfig, args.name, f"{args.name}-leader", leading)
    if not leading.wait(30):
        emit("failed", why="no leader")
        return 1
    for i in range(args.candidates):
        start(args.kubeconfig, args.name, f"{args.name}-candidate-{i}", threading.Event())
    emit("ready", candidates=args.candidates)
    threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())

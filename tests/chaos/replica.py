"""What the chaos replica processes (chaos_jobs.py, chaos_slow_replica.py) share: their common
arguments, their Jobs group, their log (each line stamped with CLOCK_MONOTONIC, which the
processes of one machine share, and optionally the wall clock) and their journal (one line a
fact, flushed as written)."""

from __future__ import annotations

import argparse
import faulthandler
import logging
import signal
import threading
import time
from collections.abc import Callable
from typing import IO, Any

from k8slease.jobs.registry import Jobs
from k8slease.kube.apiclient import default_api_client


def replica_args(
    *, every: float, run: float, more: Callable[[argparse.ArgumentParser], None] | None = None
) -> argparse.Namespace:
    """``--kubeconfig --namespace --identity --journal --log`` (required), ``--every`` and
    ``--run`` (seconds, these defaults) and what ``more`` adds; SIGUSR1 dumps every thread's
    stack (the suite's look at a stuck replica)."""
    parser = argparse.ArgumentParser()
    for name in ("--kubeconfig", "--namespace", "--identity", "--journal", "--log"):
        parser.add_argument(name, required=True)
    parser.add_argument("--every", type=float, default=every)
    parser.add_argument("--run", type=float, default=run)
    if more is not None:
        more(parser)
    args = parser.parse_args()
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    return args


class _Clocks(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.mono = f"{time.monotonic():.6f}"
        record.wall = f"{time.time():.3f}"
        return True


def log_to(path: str, *, wall: bool = False) -> None:
    """``k8slease.*`` at INFO into ``path``, each line led by the monotonic time (and, with
    ``wall``, the wall-clock time)."""
    handler = logging.FileHandler(path)
    handler.addFilter(_Clocks())
    stamp = "%(mono)s %(wall)s" if wall else "%(mono)s"
    handler.setFormatter(logging.Formatter(f"{stamp} %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger("k8slease")
    root.addHandler(handler)
    root.setLevel(logging.INFO)


def journal_writer(path: str) -> Callable[[str], None]:
    """A thread-safe ``write(line)`` appending to the journal at ``path`` (line-buffered)."""
    journal: IO[str] = open(path, "a", buffering=1)  # noqa: SIM115 (lives as long as the process)
    write_lock = threading.Lock()

    def write(line: str) -> None:
        with write_lock:
            journal.write(line + "\n")

    return write


def replica_jobs(args: argparse.Namespace, group: str, **options: Any) -> Jobs:
    """This replica's ``Jobs`` group ``group``: in ``--namespace`` as ``--identity``, on the API
    server of ``--kubeconfig``; ``options`` are passed to ``Jobs`` unchanged."""
    return Jobs(
        group,
        namespace=args.namespace,
        identity=args.identity,
        api_client=default_api_client(kubeconfig=args.kubeconfig),
        **options,
    )

"""API requests per minute, by verb, of 1 leader + N candidates in steady state.

Every (implementation, N) group runs at once on its own Lease: the Python implementations in one
process each (``load_worker``: threads, one API client per elector), client-go as N + 1 processes
(``peer_clientgo.Group``), against one API server (a ``benchmarks.targets`` target); requests are
told apart by Lease name in its request log (embedded) or audit log (real). N = 0 (a leader
alone) gives the leader's own requests; a candidate's share is ``(group(N) - group(0)) / N``.
Watch streams are counted when they close (k8slease renews them every 60 s), so open watches are
reported too.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import IO, Any, Protocol

from benchmarks import peer_clientgo
from benchmarks.common import IMPLEMENTATIONS
from benchmarks.replicas import Replica
from benchmarks.targets import Target

CANDIDATES = (2, 10, 50)
READY_TIMEOUT = 60.0


def lease_name(impl: str, candidates: int) -> str:
    return f"load-{impl}-n{candidates}"


class Group(Protocol):
    """1 leader + N candidates of one implementation, started together."""

    def wait_for(self, event: str, timeout: float) -> float | None: ...

    def close(self, timeout: float = 10.0) -> None: ...


def start_group(
    impl: str, kubeconfig: Path, candidates: int, stderr: IO[Any] | None = None
) -> Group:
    """Start the group of ``impl`` with ``candidates`` candidates on its own Lease."""
    name = lease_name(impl, candidates)
    if impl == "clientgo":
        return peer_clientgo.Group(kubeconfig, name, candidates, stderr)
    args = ["--impl", impl, "--kubeconfig", str(kubeconfig)]
    args += ["--name", name, "--candidates", str(candidates)]
    return Replica("load_worker", args, name, stderr)


def _per_minute(counts: Counter[str], seconds: float) -> dict[str, float]:
    return {verb: round(n * 60.0 / seconds, 1) for verb, n in sorted(counts.items())}


def measure(
    server: Target,
    *,
    window: float,
    warmup: float,
    candidates: tuple[int, ...] = CANDIDATES,
    implementations: tuple[str, ...] = IMPLEMENTATIONS,
    stderr: IO[Any] | None = None,
) -> dict[str, Any]:
    """Run all groups, count ``window`` seconds of requests after ``warmup``; figures per impl."""
    groups = [(impl, n) for impl in implementations for n in (0, *candidates)]
    workers: dict[tuple[str, int], Group] = {}
    try:
        for impl, n in groups:
            workers[(impl, n)] = start_group(impl, server.kubeconfig, n, stderr)
        for key, worker in workers.items():
            if worker.wait_for("ready", READY_TIMEOUT) is None:
                raise RuntimeError(f"load group {key} did not get ready")
        time.sleep(warmup)
        server.reset()
        started = time.monotonic()
        time.sleep(window)
        elapsed = time.monotonic() - started
        by_name = server.requests()
        watches = {key: server.open_watches(lease_name(*key)) for key in workers}
    finally:
        for worker in workers.values():
            worker.close(timeout=5)
    result: dict[str, Any] = {"window_s": round(elapsed, 1), "warmup_s": warmup}
    for impl in implementations:
        leader = by_name.get(lease_name(impl, 0), Counter())
        per_impl: dict[str, Any] = {"leader_alone": _per_minute(leader, elapsed), "groups": {}}
        for n in candidates:
            total = by_name.get(lease_name(impl, n), Counter())
            extra = Counter({verb: total[verb] - leader[verb] for verb in set(total) | set(leader)})
            per_impl["groups"][str(n)] = {
                "total_per_min": _per_minute(total, elapsed),
                "per_candidate_per_min": {
                    verb: round(v / n, 2) for verb, v in _per_minute(extra, elapsed).items()
                },
                "open_watches": watches[(impl, n)],
            }
        per_impl["open_watches_leader_alone"] = watches[(impl, 0)]
        result[impl] = per_impl
    unnamed = by_name.get("(collection)")
    if unnamed:
        result["collection_requests_per_min"] = _per_minute(unnamed, elapsed)
    return result

"""API requests per minute, by verb, of 1 leader + N candidates in steady state.

Every (implementation, N) group runs in its own process (``load_worker``: threads, one API
client per elector) on its own Lease. N = 0 (a leader alone) gives the leader's own requests; a
candidate's share is ``(group(N) - group(0)) / N``. Watch streams are counted when they close
(k8slease renews them every 60 s), so open watches are reported too.

On a target that names the Lease of each request (the embedded server) all groups run at once
and are told apart by Lease name; on one that does not (the real server's ``/metrics``) they run
one after the other, after a window with no group that measures the server's own Lease traffic,
which is subtracted (see :mod:`benchmarks.targets`).
"""

from __future__ import annotations

import time
from collections import Counter
from typing import IO, Any

from benchmarks.common import IMPLEMENTATIONS
from benchmarks.replicas import Replica
from benchmarks.targets import Target

CANDIDATES = (2, 10, 50)
READY_TIMEOUT = 60.0
Group = tuple[str, int]


def lease_name(impl: str, candidates: int) -> str:
    return f"load-{impl}-n{candidates}"


def _per_minute(counts: Counter[str], seconds: float) -> dict[str, float]:
    return {verb: round(n * 60.0 / seconds, 1) for verb, n in sorted(counts.items())}


def _start(target: Target, groups: list[Group], stderr: IO[Any] | None) -> dict[Group, Replica]:
    workers: dict[Group, Replica] = {}
    for impl, n in groups:
        args = ["--impl", impl, "--kubeconfig", str(target.kubeconfig)]
        args += ["--name", lease_name(impl, n), "--candidates", str(n)]
        workers[(impl, n)] = Replica("load_worker", args, lease_name(impl, n), stderr)
    for key, worker in workers.items():
        if worker.wait_for("ready", READY_TIMEOUT) is None:
            raise RuntimeError(f"load group {key} did not get ready")
    return workers


def _window(target: Target, warmup: float, window: float) -> float:
    time.sleep(warmup)
    target.reset()
    started = time.monotonic()
    time.sleep(window)
    return time.monotonic() - started


Rates = dict[Group, dict[str, float]]


def _together(
    target: Target, groups: list[Group], window: float, warmup: float, stderr: IO[Any] | None
) -> tuple[Rates, dict[Group, int], float, dict[str, float]]:
    workers: dict[Group, Replica] = {}
    try:
        workers = _start(target, groups, stderr)
        elapsed = _window(target, warmup, window)
        by_name = target.requests()
        watches = {key: target.open_watches(lease_name(*key)) for key in workers}
    finally:
        for worker in workers.values():
            worker.close(timeout=5)
    rates = {key: _per_minute(by_name.get(lease_name(*key), Counter()), elapsed) for key in groups}
    unnamed = by_name.get("(collection)")
    return rates, watches, elapsed, _per_minute(unnamed, elapsed) if unnamed else {}


def _one_by_one(
    target: Target, groups: list[Group], window: float, warmup: float, stderr: IO[Any] | None
) -> tuple[Rates, dict[Group, int], float, dict[str, float]]:
    elapsed = _window(target, 0.0, window)
    baseline = _per_minute(target.requests()["*"], elapsed)
    baseline_watches = target.open_watches("*")
    rates: Rates = {}
    watches: dict[Group, int] = {}
    for key in groups:
        workers: dict[Group, Replica] = {}
        try:
            workers = _start(target, [key], stderr)
            seconds = _window(target, warmup, window)
            measured = _per_minute(target.requests()["*"], seconds)
            watches[key] = target.open_watches("*") - baseline_watches
        finally:
            for worker in workers.values():
                worker.close(timeout=5)
        rates[key] = {
            verb: round(measured.get(verb, 0.0) - baseline.get(verb, 0.0), 1)
            for verb in sorted(set(measured) | set(baseline))
            if round(measured.get(verb, 0.0) - baseline.get(verb, 0.0), 1)
        }
    return rates, watches, elapsed, baseline


def measure(
    target: Target,
    *,
    window: float,
    warmup: float,
    candidates: tuple[int, ...] = CANDIDATES,
    stderr: IO[Any] | None = None,
) -> dict[str, Any]:
    """Count ``window`` seconds of requests per group after ``warmup``; figures per impl."""
    groups = [(impl, n) for impl in IMPLEMENTATIONS for n in (0, *candidates)]
    run = _together if target.by_lease_name else _one_by_one
    rates, watches, elapsed, other = run(target, groups, window, warmup, stderr)
    result: dict[str, Any] = {"window_s": round(elapsed, 1), "warmup_s": warmup}
    if not target.by_lease_name:
        result["groups_measured"] = "one after the other, the server's own Lease traffic removed"
    for impl in IMPLEMENTATIONS:
        leader = rates[(impl, 0)]
        per_impl: dict[str, Any] = {"leader_alone": leader, "groups": {}}
        for n in candidates:
            total = rates[(impl, n)]
            extra = {verb: total.get(verb, 0.0) - leader.get(verb, 0.0)
                     for verb in set(total) | set(leader)}  # fmt: skip
            per_impl["groups"][str(n)] = {
                "total_per_min": total,
                "per_candidate_per_min": {
                    verb: round(v / n, 2) for verb, v in sorted(extra.items())
                },
                "open_watches": watches[(impl, n)],
            }
        per_impl["open_watches_leader_alone"] = watches[(impl, 0)]
        result[impl] = per_impl
    if other:
        key = "collection_requests_per_min" if target.by_lease_name else "server_own_per_min"
        result[key] = other
    return result

"""Benchmark: the operator following 200 groups on the embedded API server.

    .venv/bin/python -m benchmarks.bench_operator [--groups N]

Runs ``python -m k8slease operator`` (default pacing) as a subprocess against an in-process
embedded API server holding one leader Lease per group, then measures:

* convergence: time until every group's ScheduledJobGroup (auto-created) shows its leader;
* renewal load: every Lease renewed every 2 s for 10 s; status writes made meanwhile (renewal-only
  changes are deferred to ``renew_write_interval``, so this should be about zero);
* failover latency: the holder of every group changes (in waves of 20 every 100 ms); latency
  from the Lease write to the moment a watch on ScheduledJobGroups shows the new leader;
* API calls made by the operator (everything the server saw except the benchmark's own calls)
  and the operator's resident memory.

``run()`` returns the figures as a dict; ``main()`` prints them as a table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
from kubernetes import client

from k8slease.lease.record import LeaseRecord, lease_with_record, new_lease
from k8slease.lease.transport import LeaseTransport
from k8slease.names import (
    CRD_GROUP,
    CRD_PLURAL,
    CRD_VERSION,
    LABEL_AUTO_CREATE,
    LABEL_GROUP,
    LABEL_ROLE,
    ROLE_LEADER,
)
from k8slease.operator.crd import install_crd
from k8slease.testing.server import APIServer

NS = "bench"
REPO = Path(__file__).resolve().parents[1]


class LeaderWatch:
    """Watches ScheduledJobGroups; records when each (group, leader) pair was first seen."""

    def __init__(self, server: APIServer) -> None:
        self.seen: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._api = server.api_client()
        self._thread = threading.Thread(target=self._run, daemon=True, name="bench-watch")

    def start(self) -> LeaderWatch:
        self._thread.start()
        return self

    def _run(self) -> None:
        api = client.CustomObjectsApi(self._api)
        rv = ""
        while not self._stop.is_set():
            params: dict[str, Any] = {"watch": True, "timeout_seconds": 5}
            if rv:
                params["resource_version"] = rv
            try:
                resp: Any = api.list_namespaced_custom_object(
                    CRD_GROUP, CRD_VERSION, NS, CRD_PLURAL, _preload_content=False, **params
                )
                for line in resp.stream(65536):
                    for raw in line.splitlines():
                        if not raw.strip():
                            continue
                        event = json.loads(raw)
                        obj = event.get("object") or {}
                        rv = obj.get("metadata", {}).get("resourceVersion", rv)
                        leader = (obj.get("status") or {}).get("leader")
                        if leader:
                            key = (obj["metadata"]["name"], leader)
                            with self._lock:
                                self.seen.setdefault(key, time.monotonic())
                    if self._stop.is_set():
                        break
            except Exception:
                rv = ""
                time.sleep(0.1)

    def when(self, group: str, leader: str) -> float | None:
        with self._lock:
            return self.seen.get((group, leader))

    def stop(self) -> None:
        self._stop.set()


def _wait(predicate: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def _percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


def run(groups: int = 200) -> dict[str, Any]:
    """Run the benchmark; returns its figures."""
    figures: dict[str, Any] = {"groups": groups}
    with APIServer(history_size=20000) as server:
        api = server.api_client()
        install_crd(api)
        client.CoreV1Api(api).create_namespace(
            client.V1Namespace(metadata=client.V1ObjectMeta(name=NS))
        )
        transport = LeaseTransport(api, NS)
        names = [f"group-{i:03d}" for i in range(groups)]
        leases: dict[str, dict[str, Any]] = {}
        acquired = datetime.now(UTC)
        for name in names:
            record = LeaseRecord("replica-0", 15, acquired, acquired, 0, 1)
            labels = {LABEL_GROUP: name, LABEL_ROLE: ROLE_LEADER, LABEL_AUTO_CREATE: "true"}
            leases[name] = transport.create(new_lease(name, NS, record, labels=labels))
        watch = LeaderWatch(server).start()
        env = dict(os.environ)
        env.pop("KUBERNETES_SERVICE_HOST", None)
        server.stats.reset()
        ours = 0
        started = time.monotonic()
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "k8slease",
                "operator",
                "--kubeconfig",
                str(server.kubeconfig),
                "--namespace",
                NS,
                "--auto-create-limit",
                str(groups),
            ],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            converged = _wait(
                lambda: all(watch.when(n, "replica-0") is not None for n in names),
                max(40.0, groups * 0.1),  # 2,000 groups take longer than 200
            )
            figures["converge_seconds"] = round(time.monotonic() - started, 2)
            figures["converged"] = converged
            patches = server.stats.count("patch", "scheduledjobgroups/status")
            figures["status_patches_startup"] = patches

            # Renewals: every Lease every 2 s for 10 s.
            before = server.stats.count("patch", "scheduledjobgroups/status")
            t_end = time.monotonic() + 10
            renewals = 0
            while time.monotonic() < t_end:
                wave = time.monotonic()
                now = datetime.now(UTC)
                for name in names:
                    record = LeaseRecord("replica-0", 15, acquired, now, 0, 1)
                    body = lease_with_record(leases[name], record)
                    leases[name] = transport.replace(name, body)
                    renewals += 1
                time.sleep(max(0.0, 2.0 - (time.monotonic() - wave)))
            ours += renewals
            figures["renewals"] = renewals
            figures["status_patches_during_renewals"] = (
                server.stats.count("patch", "scheduledjobgroups/status") - before
            )
            figures["status_patches_per_renewal"] = round(
                figures["status_patches_during_renewals"] / max(1, renewals), 4
            )

            # Failovers: every group, in waves of 20 every 100 ms.
            before = server.stats.count("patch", "scheduledjobgroups/status")
            written: dict[str, float] = {}
            for start in range(0, groups, 20):
                now = datetime.now(UTC)
                for name in names[start : start + 20]:
                    record = LeaseRecord("replica-1", 15, now, now, 1, 2)
                    leases[name] = transport.replace(name, lease_with_record(leases[name], record))
                    written[name] = time.monotonic()
                    ours += 1
                time.sleep(0.1)
            _wait(
                lambda: all(watch.when(n, "replica-1") is not None for n in names),
                max(30.0, groups * 0.05),
            )
            latencies = [
                seen - written[n] for n in names if (seen := watch.when(n, "replica-1")) is not None
            ]
            figures["failovers_seen"] = len(latencies)
            if latencies:
                figures["failover_latency_ms_median"] = round(statistics.median(latencies) * 1000)
                figures["failover_latency_ms_p95"] = round(_percentile(latencies, 95) * 1000)
                figures["failover_latency_ms_max"] = round(max(latencies) * 1000)
            figures["status_patches_for_failovers"] = (
                server.stats.count("patch", "scheduledjobgroups/status") - before
            )
            time.sleep(0.5)
            figures["operator_rss_mb"] = round(
                psutil.Process(proc.pid).memory_info().rss / 2**20, 1
            )
            snapshot = server.stats.snapshot()
            operator_calls = {
                k: v
                for k, v in snapshot.items()
                if not k.startswith(("update leases", "watch scheduledjobgroups", "get "))
            }
            # the benchmark's own watch re-opens every 5 s; the operator opens one per kind
            figures["operator_api_calls"] = operator_calls
            figures["operator_api_calls_total"] = sum(operator_calls.values())
            figures["lease_writes_by_operator"] = (
                sum(
                    server.stats.count(v, "leases") for v in ("create", "update", "patch", "delete")
                )
                - ours
            )
            figures["elapsed_seconds"] = round(time.monotonic() - started, 1)
        finally:
            watch.stop()
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
            api_any: Any = api
            api_any.close()
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=200)
    args = parser.parse_args(argv)
    figures = run(args.groups)
    width = max(len(k) for k in figures)
    for key, value in figures.items():
        print(f"{key:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

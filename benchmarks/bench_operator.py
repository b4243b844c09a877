"""Benchmark: the operator following N groups (200 by default), on either API server.

    .venv/bin/python -m benchmarks.bench_operator [--groups N] [--server embedded|real]

Runs ``python -m k8slease operator`` (default pacing) as a subprocess against the embedded API
server (in this process) or a real kube-apiserver over etcd (``ControlPlane(audit=True)``),
holding one leader Lease per group, then measures:

* convergence: time until every group's ScheduledJobGroup (auto-created) shows its leader;
* renewal load: every Lease renewed every 2 s for 10 s; status writes made meanwhile (renewal-only
  changes are deferred to ``renew_write_interval``, so this should be about zero);
* failover latency: the holder of every group changes (in waves of 20 every 100 ms); latency
  from the Lease write to the moment a watch on ScheduledJobGroups shows the new leader;
* API calls made by the operator (everything the server saw except the benchmark's own calls)
  and the operator's resident memory.

Requests are counted by the server: the embedded one from its request counters, the real one
from its audit log (the benchmark's own client has a user agent of its own there, so the
operator's calls are told apart by user agent). ``run()`` returns the figures as a dict;
``record()`` writes them with their provenance to ``benchmarks/results/operator_<server>_<N>.json``
(``benchmarks.provenance``); ``main()`` does that and prints them.
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
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import psutil
from kubernetes import client

from benchmarks import provenance
from benchmarks.targets import SERVERS
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
from k8slease.testing import ControlPlane
from k8slease.testing.controlplane import audit
from k8slease.testing.server import APIServer

NS = "bench"
REPO = Path(__file__).resolve().parents[1]
#: The user agent of the benchmark's own API client (to tell its requests from the operator's).
AGENT = "k8slease-bench-operator"


class Server(Protocol):
    """What the benchmark needs of an API server (``APIServer`` and ``ControlPlane`` have it)."""

    @property
    def kubeconfig(self) -> Path: ...

    def api_client(self) -> client.ApiClient: ...


class Counts(Protocol):
    """The server's count of requests since :meth:`reset`."""

    def reset(self) -> None: ...

    def status_patches(self) -> int:
        """Patches of ScheduledJobGroup status (only the operator writes them)."""

    def operator_calls(self) -> dict[str, int]:
        """``"verb resource"`` -> count, for the operator's requests."""

    def lease_writes(self) -> int:
        """Lease creates, updates, patches and deletes in the benchmark's namespace, by anyone."""


class EmbeddedCounts:
    def __init__(self, server: APIServer) -> None:
        self.stats = server.stats

    def reset(self) -> None:
        self.stats.reset()

    def status_patches(self) -> int:
        return self.stats.count("patch", "scheduledjobgroups/status")

    def operator_calls(self) -> dict[str, int]:
        # the benchmark's own calls: Lease updates, its watch (re-opened every 5 s), gets
        return {
            k: v
            for k, v in self.stats.snapshot().items()
            if not k.startswith(("update leases", "watch scheduledjobgroups", "get "))
        }

    def lease_writes(self) -> int:
        return sum(self.stats.count(v, "leases") for v in ("create", "update", "patch", "delete"))


class AuditCounts:
    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self.since = 0

    def reset(self) -> None:
        self.since = audit.size(self.plane.audit_log)

    def _events(self) -> list[dict[str, Any]]:
        return audit.events(self.plane.audit_log, self.since)

    def status_patches(self) -> int:
        return audit.count(self._events(), "patch", "scheduledjobgroups/status", namespace=NS)

    def operator_calls(self) -> dict[str, int]:
        calls: dict[str, int] = {}
        for event in self._events():
            agent = str(event.get("userAgent", ""))
            if agent.startswith((AGENT, "kube-apiserver")):  # ours; the server's own
                continue
            ref = event.get("objectRef") or {}
            resource = ref.get("resource", "(none)")
            if ref.get("subresource"):
                resource += f"/{ref['subresource']}"
            key = f"{event.get('verb')} {resource}"
            calls[key] = calls.get(key, 0) + 1
        return dict(sorted(calls.items()))

    def lease_writes(self) -> int:
        return sum(
            audit.count(self._events(), verb, "leases", namespace=NS)
            for verb in ("create", "update", "patch", "delete")
        )


@contextmanager
def open_server(kind: str) -> Iterator[tuple[Server, Counts]]:
    """A started server of ``kind`` (``embedded`` or ``real``) and its request counts."""
    if kind == "embedded":
        with APIServer(history_size=20000) as server:
            yield server, EmbeddedCounts(server)
    elif kind == "real":
        with ControlPlane(audit=True) as plane:
            yield plane, AuditCounts(plane)
    else:
        raise ValueError(f"--server: unknown server {kind!r}; expected one of {SERVERS}")


class LeaderWatch:
    """Watches ScheduledJobGroups; records when each (group, leader) pair was first seen."""

    def __init__(self, server: Server) -> None:
        self.seen: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._api = server.api_client()
        self._api.user_agent = AGENT  # its watch is the benchmark's, not the operator's
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


#: The groups' lease duration: longer than the whole run, so that no Lease expires in it. At
#: 2,000 groups start-up takes about 20 s on the 2-core machine, and a 15 s lease expired before
#: the renewal phase: an expiry and the renewal that ends it are changes that matter, which the
#: operator rightly writes at once, and they were counted as writes caused by renewals.
LEASE_SECONDS = 600


def run(groups: int = 200, server_kind: str = "embedded") -> dict[str, Any]:
    """Run the benchmark on a fresh server of ``server_kind``; returns its figures."""
    figures: dict[str, Any] = {"groups": groups, "server": server_kind}
    with open_server(server_kind) as (server, counts):
        api = server.api_client()
        api.user_agent = AGENT
        install_crd(api)
        client.CoreV1Api(api).create_namespace(
            client.V1Namespace(metadata=client.V1ObjectMeta(name=NS))
        )
        transport = LeaseTransport(api, NS)
        names = [f"group-{i:03d}" for i in range(groups)]
        leases: dict[str, dict[str, Any]] = {}
        acquired = datetime.now(UTC)
        for name in names:
            record = LeaseRecord("replica-0", LEASE_SECONDS, acquired, acquired, 0, 1)
            labels = {LABEL_GROUP: name, LABEL_ROLE: ROLE_LEADER, LABEL_AUTO_CREATE: "true"}
            leases[name] = transport.create(new_lease(name, NS, record, labels=labels))
        watch = LeaderWatch(server).start()
        env = dict(os.environ)
        env.pop("KUBERNETES_SERVICE_HOST", None)
        counts.reset()
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
            patches = counts.status_patches()
            figures["status_patches_startup"] = patches

            # Renewals: every Lease every 2 s for 10 s.
            before = counts.status_patches()
            t_end = time.monotonic() + 10
            renewals = 0
            while time.monotonic() < t_end:
                wave = time.monotonic()
                now = datetime.now(UTC)
                for name in names:
                    record = LeaseRecord("replica-0", LEASE_SECONDS, acquired, now, 0, 1)
                    body = lease_with_record(leases[name], record)
                    leases[name] = transport.replace(name, body)
                    renewals += 1
                time.sleep(max(0.0, 2.0 - (time.monotonic() - wave)))
            ours += renewals
            figures["renewals"] = renewals
            figures["status_patches_during_renewals"] = counts.status_patches() - before
            figures["status_patches_per_renewal"] = round(
                figures["status_patches_during_renewals"] / max(1, renewals), 4
            )

            # Failovers: every group, in waves of 20 every 100 ms.
            before = counts.status_patches()
            written: dict[str, float] = {}
            for start in range(0, groups, 20):
                now = datetime.now(UTC)
                for name in names[start : start + 20]:
                    record = LeaseRecord("replica-1", LEASE_SECONDS, now, now, 1, 2)
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
            figures["status_patches_for_failovers"] = counts.status_patches() - before
            time.sleep(0.5)
            figures["operator_rss_mb"] = round(
                psutil.Process(proc.pid).memory_info().rss / 2**20, 1
            )
            operator_calls = counts.operator_calls()
            figures["operator_api_calls"] = operator_calls
            figures["operator_api_calls_total"] = sum(operator_calls.values())
            figures["lease_writes_by_operator"] = counts.lease_writes() - ours
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


def result_path(out: Path, server_kind: str, groups: int) -> Path:
    """Where the figures of one run go: ``operator_<server>_<groups>.json``."""
    return out / f"operator_{server_kind}_{groups}.json"


def record(
    out: Path = provenance.RESULTS, *, groups: int = 200, server_kind: str = "embedded"
) -> tuple[Path, dict[str, Any]]:
    """Run the benchmark and write its figures with their provenance; the file and figures."""
    command = f"python -m benchmarks.bench_operator --groups {groups} --server {server_kind}"
    started = provenance.start("operator", command, groups=groups, server=server_kind)
    figures = run(groups, server_kind)
    path = provenance.write(result_path(out, server_kind, groups), started, figures)
    return path, figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--server", choices=SERVERS, default="embedded")
    parser.add_argument("--out", type=Path, default=provenance.RESULTS, help="results directory")
    args = parser.parse_args(argv)
    if args.groups < 1:
        parser.error(f"--groups must be at least 1, not {args.groups}")
    path, figures = record(args.out, groups=args.groups, server_kind=args.server)
    width = max(len(k) for k in figures)
    for key, value in figures.items():
        print(f"{key:<{width}}  {value}")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

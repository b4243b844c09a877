"""The API servers the benchmarks run on: the embedded ``APIServer`` or a real ``ControlPlane``.

``--server embedded|real|both`` picks them. Both give the replicas a kubeconfig; they differ in
how the API load is counted:

- embedded: the server's own request log, which names the Lease of every request, so all load
  groups run at once and are told apart by Lease name;
- real: kube-apiserver's ``/metrics`` (``apiserver_request_total`` and
  ``apiserver_longrunning_requests`` for Leases), which has no object names, so the load groups
  run one after the other and the server's own Lease traffic (its identity Lease, renewed every
  10 s) is measured first with no replica running and subtracted.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

from k8slease.testing import APIServer, ControlPlane
from k8slease.testing.controlplane import metrics

SERVERS = ("embedded", "real")
LEASES = {"group": "coordination.k8s.io", "resource": "leases"}


class Target(Protocol):
    """What the failover and load benchmarks need of a server."""

    name: str
    #: Whether :meth:`requests` can tell requests apart by Lease name.
    by_lease_name: bool

    @property
    def kubeconfig(self) -> Path: ...

    def reset(self) -> None:
        """Start counting requests from now."""

    def requests(self) -> dict[str, Counter[str]]:
        """Lease requests since :meth:`reset`: Lease name (``"*"`` when the target cannot tell)
        -> verb -> count. Watches count when they end."""

    def open_watches(self, name: str) -> int:
        """Lease watches open now that would see the Lease ``name`` (``"*"``: all)."""


class EmbeddedTarget:
    name = "embedded"
    by_lease_name = True

    def __init__(self, server: APIServer, namespace: str) -> None:
        self.server = server
        self.namespace = namespace

    @property
    def kubeconfig(self) -> Path:
        return self.server.kubeconfig

    def reset(self) -> None:
        self.server.stats.reset()

    def requests(self) -> dict[str, Counter[str]]:
        by_name: dict[str, Counter[str]] = {}
        for request in self.server.stats.requests():
            if request.resource == "leases.coordination.k8s.io":
                by_name.setdefault(request.name or "(collection)", Counter())[request.verb] += 1
        return by_name

    def open_watches(self, name: str) -> int:
        rt = self.server.registry.find("coordination.k8s.io", "v1", "leases")
        assert rt is not None
        lease = self.server.store.get(rt.key, self.namespace, name)
        if lease is None:
            return 0
        return sum(1 for watcher in self.server.store.watchers(rt.key) if watcher.accepts(lease))


def _lease_counts(text: str) -> Counter[str]:
    counts: Counter[str] = Counter()
    for labels, value in metrics.samples(text, "apiserver_request_total"):
        if all(labels.get(k) == v for k, v in LEASES.items()) and not labels.get("subresource"):
            counts[labels.get("verb", "?").lower()] += int(value)
    return counts


class RealTarget:
    name = "real"
    by_lease_name = False

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self._since: Counter[str] = Counter()

    @property
    def kubeconfig(self) -> Path:
        return self.plane.kubeconfig

    def reset(self) -> None:
        self._since = _lease_counts(self.plane.metrics())

    def requests(self) -> dict[str, Counter[str]]:
        now = _lease_counts(self.plane.metrics())
        now.subtract(self._since)
        return {"*": Counter({verb: n for verb, n in now.items() if n})}

    def open_watches(self, name: str) -> int:
        return int(
            metrics.total(
                self.plane.metrics(), "apiserver_longrunning_requests", verb="WATCH", **LEASES
            )
        )


@contextmanager
def open_target(name: str, namespace: str) -> Iterator[Target]:
    """A started server of kind ``name`` (``embedded`` or ``real``); stopped afterwards.

    ``real`` raises ``k8slease.testing.controlplane.BuildError`` when the binaries are neither
    cached nor buildable (no Go), and ``ControlPlaneError`` when the server does not start.
    """
    if name == "embedded":
        with APIServer(log_size=500_000) as server:
            yield EmbeddedTarget(server, namespace)
    elif name == "real":
        started = time.monotonic()
        with ControlPlane() as plane:
            print(f"   real control plane ready in {time.monotonic() - started:.1f} s", flush=True)
            yield RealTarget(plane)
    else:
        raise ValueError(f"--server: unknown server {name!r}; expected one of {SERVERS}")

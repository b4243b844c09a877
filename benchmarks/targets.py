"""The API servers the benchmarks run on: the embedded ``APIServer`` or a real ``ControlPlane``.

``--server embedded|real|both`` picks them. Both give the replicas a kubeconfig and count the
Lease requests of one namespace by Lease name (watches and lists, which name no Lease, count
as ``(collection)``): the embedded server from its own request log, the real one from its audit
log (``ControlPlane(audit=True)``). Open watches per Lease are known only to the embedded
server (the audit log records a watch when it ends).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

from k8slease.testing import APIServer, ControlPlane
from k8slease.testing.controlplane import audit

SERVERS = ("embedded", "real")
LEASES = ("coordination.k8s.io", "leases")


class Target(Protocol):
    """What the failover and load benchmarks need of a server."""

    name: str

    @property
    def kubeconfig(self) -> Path: ...

    def reset(self) -> None:
        """Start counting requests from now."""

    def requests(self) -> dict[str, Counter[str]]:
        """Lease requests in the namespace since :meth:`reset`: Lease name (``(collection)``
        for lists and watches) -> verb -> count. Watches count when they end."""

    def open_watches(self, name: str) -> int | None:
        """Lease watches open now that would see the Lease ``name``; None if unknown."""

    def lease_writes_and_reads(self) -> Counter[str]:
        """Lease requests in the namespace since :meth:`reset` other than lists and watches
        (the informers' traffic), as ``"verb code"`` -> count (``update 409``: a lost race)."""


class EmbeddedTarget:
    name = "embedded"

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

    def lease_writes_and_reads(self) -> Counter[str]:
        return Counter(
            f"{r.verb} {r.code}"
            for r in self.server.stats.requests()
            if r.resource == "leases.coordination.k8s.io"
            and r.namespace == self.namespace
            and r.verb not in ("watch", "list")
        )

    def open_watches(self, name: str) -> int | None:
        rt = self.server.registry.find("coordination.k8s.io", "v1", "leases")
        assert rt is not None
        lease = self.server.store.get(rt.key, self.namespace, name)
        if lease is None:
            return 0
        return sum(1 for watcher in self.server.store.watchers(rt.key) if watcher.accepts(lease))


class RealTarget:
    name = "real"

    def __init__(self, plane: ControlPlane, namespace: str) -> None:
        self.plane = plane
        self.namespace = namespace
        self._since = 0

    @property
    def kubeconfig(self) -> Path:
        return self.plane.kubeconfig

    def reset(self) -> None:
        self._since = audit.size(self.plane.audit_log)

    def requests(self) -> dict[str, Counter[str]]:
        by_name: dict[str, Counter[str]] = {}
        for event in audit.events(self.plane.audit_log, self._since):
            ref = event.get("objectRef") or {}
            if (ref.get("apiGroup"), ref.get("resource")) != LEASES or ref.get("subresource"):
                continue
            if ref.get("namespace") != self.namespace:
                continue
            name = ref.get("name") or "(collection)"
            by_name.setdefault(name, Counter())[str(event.get("verb"))] += 1
        return by_name

    def lease_writes_and_reads(self) -> Counter[str]:
        found: Counter[str] = Counter()
        for event in audit.events(self.plane.audit_log, self._since):
            ref = event.get("objectRef") or {}
            if (ref.get("apiGroup"), ref.get("resource")) != LEASES or ref.get("subresource"):
                continue
            if ref.get("namespace") != self.namespace or event.get("verb") in ("watch", "list"):
                continue
            code = (event.get("responseStatus") or {}).get("code")
            found[f"{event.get('verb')} {code}"] += 1
        return found

    def open_watches(self, name: str) -> int | None:
        return None


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
        with ControlPlane(audit=True) as plane:
            print(f"   real control plane ready in {time.monotonic() - started:.1f} s", flush=True)
            yield RealTarget(plane, namespace)
    else:
        raise ValueError(f"--server: unknown server {name!r}; expected one of {SERVERS}")

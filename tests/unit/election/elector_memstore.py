"""An in-memory Lease store with conditional writes and a watch, for runner unit tests and models.

It keeps one Lease (by name), a resourceVersion counter and the history of versions, so a watch can
deliver events in order (and a test can make it lag). Faults are injected per verb.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from typing import Any

from k8slease import LeaderElector
from k8slease.election.seams import Seams
from k8slease.errors import AlreadyExists, Conflict, NotFound, TransportError, Unavailable
from k8slease.lease.meta import resource_version
from k8slease.lease.transport import WatchEvent
from k8slease.metrics import NoopMetrics


class MemoryLeaseStore:
    """One namespace's Leases with etcd-like resourceVersions; thread-safe."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.leases: dict[str, dict[str, Any]] = {}
        self.rv = 0
        #: (type, lease) for every change, oldest first
        self.history: list[tuple[str, dict[str, Any]]] = []
        self.writes: list[tuple[str, dict[str, Any]]] = []

    def _bump(self, kind: str, lease: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        stored = copy.deepcopy(lease)
        stored.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
        if kind == "DELETED":
            self.leases.pop(stored["metadata"]["name"], None)
        else:
            self.leases[stored["metadata"]["name"]] = stored
        self.history.append((kind, stored))
        self.cond.notify_all()
        return copy.deepcopy(stored)

    def get(self, name: str) -> dict[str, Any]:
        with self.cond:
            if name not in self.leases:
                raise NotFound(f"get: {name} not found", status=404)
            return copy.deepcopy(self.leases[name])

    def create(self, body: Mapping[str, Any]) -> dict[str, Any]:
        with self.cond:
            name = body["metadata"]["name"]
            if name in self.leases:
                raise AlreadyExists(f"create: {name} exists", status=409, reason="AlreadyExists")
            lease = copy.deepcopy(dict(body))
            lease["metadata"].pop("resourceVersion", None)
            written = self._bump("ADDED", lease)
            self.writes.append(("create", written))
            return written

    def replace(self, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        with self.cond:
            if name not in self.leases:
                raise NotFound(f"update: {name} not found", status=404)
            current = self.leases[name]
            if resource_version(body) != resource_version(current):
                raise Conflict(f"update: {name} conflict", status=409, reason="Conflict")
            written = self._bump("MODIFIED", copy.deepcopy(dict(body)))
            self.writes.append(("update", written))
            return written

    def edit(self, name: str, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """A hand edit (like kubectl edit): ``change`` mutates a copy, which is stored."""
        with self.cond:
            lease = copy.deepcopy(self.leases[name])
            change(lease)
            return self._bump("MODIFIED", lease)

    def delete(self, name: str) -> None:
        with self.cond:
            if name in self.leases:
                self._bump("DELETED", self.leases[name])

    def wait_for(self, predicate: Callable[[], bool], timeout: float) -> bool:
        with self.cond:
            return self.cond.wait_for(predicate, timeout)


class MemoryTransport:
    """A ``LeaseAPI`` over a :class:`MemoryLeaseStore`, with injectable faults and a watch."""

    def __init__(self, store: MemoryLeaseStore, namespace: str = "default") -> None:
        self.store = store
        self.namespace = namespace
        self.faults: dict[str, list[TransportError]] = {}
        self.fail_always: dict[str, TransportError] = {}
        self.watch_enabled = True
        self.calls: list[str] = []
        self._closed = threading.Event()

    def _maybe_fail(self, verb: str) -> None:
        self.calls.append(verb)
        if verb in self.fail_always:
            raise self.fail_always[verb]
        queue = self.faults.get(verb)
        if queue:
            raise queue.pop(0)

    def get(self, name: str) -> dict[str, Any]:
        self._maybe_fail("get")
        return self.store.get(name)

    def create(self, body: Mapping[str, Any]) -> dict[str, Any]:
        self._maybe_fail("create")
        return self.store.create(body)

    def replace(self, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        self._maybe_fail("update")
        return self.store.replace(name, body)

    def _has_news(self, index: int) -> bool:
        return len(self.store.history) > index or self._closed.is_set() or not self.watch_enabled

    def close_watches(self) -> None:
        self._closed.set()
        with self.store.cond:
            self.store.cond.notify_all()

    def watch(
        self,
        *,
        name: str | None = None,
        label_selector: str | None = None,
        resource_version: str | None = None,
        timeout_seconds: int = 300,
    ) -> Iterator[WatchEvent]:
        self._maybe_fail("watch")
        if not self.watch_enabled:
            raise Unavailable("watch: disabled")
        with self.store.cond:
            if resource_version:
                index = next(
                    (
                        i + 1
                        for i, (_, lease) in enumerate(self.store.history)
                        if lease["metadata"]["resourceVersion"] == resource_version
                    ),
                    len(self.store.history),
                )
                pending: list[tuple[str, dict[str, Any]]] = []
            else:
                index = len(self.store.history)
                pending = [("ADDED", copy.deepcopy(lease)) for lease in self.store.leases.values()]
        for kind, lease in pending:
            if name is None or lease["metadata"]["name"] == name:
                yield WatchEvent(kind, lease)
        while not self._closed.is_set():
            with self.store.cond:
                self.store.cond.wait_for(partial(self._has_news, index), timeout=0.5)
                if not self.watch_enabled:
                    raise Unavailable("watch: stream broke")
                batch = self.store.history[index:]
                index = len(self.store.history)
            for kind, lease in batch:
                if name is None or lease["metadata"]["name"] == name:
                    yield WatchEvent(kind, copy.deepcopy(lease))
        raise Unavailable("watch: closed")


def memory_options(
    store: MemoryLeaseStore, *, defaults: Mapping[str, Any], **kwargs: Any
) -> dict[str, Any]:
    """The options of an elector (or an ``AsyncLeaderElector``) on ``store`` (or on
    ``transport=``), with ``NoopMetrics`` unless ``metrics=`` is given: ``defaults``, then
    ``kwargs``; ``clock=`` and ``transport=`` go into its ``Seams``."""
    options: dict[str, Any] = {"metrics": NoopMetrics(), **defaults, **kwargs}
    options["seams"] = Seams(
        clock=options.pop("clock", None),
        transport=options.pop("transport", None) or MemoryTransport(store),
    )
    return options


def make_elector(
    store: MemoryLeaseStore,
    made: list[LeaderElector],
    identity: str,
    *,
    defaults: Mapping[str, Any],
    **kwargs: Any,
) -> LeaderElector:
    """A LeaderElector of the Lease "demo" on ``store`` with :func:`memory_options`, appended to
    ``made`` (the ``electors`` fixture), which stops it after the test."""
    elector = LeaderElector(
        "demo", identity=identity, **memory_options(store, defaults=defaults, **kwargs)
    )
    made.append(elector)
    return elector

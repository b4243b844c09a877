"""Object storage, the global resourceVersion counter and the watch history window.

One integer counter moves on every write (and only on writes), as etcd's revision does.
The last ``history_size`` events are retained so a watch can resume from a resourceVersion;
older ones answer ``410 Expired``. All writes happen on the server's event-loop thread, and a
lock keeps reads from other threads (stats, tests peeking) consistent.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

JSON = dict[str, Any]


@dataclass(frozen=True)
class Event:
    """One committed change: ``ADDED``/``MODIFIED``/``DELETED`` of ``obj`` at ``rv``."""

    rv: int
    type: str
    resource: str
    obj: JSON
    #: The object before a MODIFIED change (for watches with a selector).
    old: JSON | None = None

    def seen_by(self, accepts: Callable[[JSON], bool]) -> Event | None:
        """This change as a watch with filter ``accepts`` sees it, as kube-apiserver's watch
        cache shows it: an object that starts to match is ADDED, one that stops matching is
        DELETED (with its previous content at the new resourceVersion), None if neither
        version matches."""
        now = accepts(self.obj)
        if self.type != "MODIFIED" or self.old is None:
            return self if now else None
        before = accepts(self.old)
        if now:
            return self if before else replace(self, type="ADDED")
        if not before:
            return None
        gone = dict(self.old)
        gone["metadata"] = {**self.old["metadata"], "resourceVersion": str(self.rv)}
        return replace(self, type="DELETED", obj=gone)


@dataclass(eq=False)
class Watcher:
    """An open watch: a queue fed by commits that match its resource and filter."""

    resource: str
    accepts: Callable[[JSON], bool]
    queue: asyncio.Queue[Event | None] = field(default_factory=asyncio.Queue)
    dropped: bool = False
    #: silenced: delivers nothing more (a half-open connection) until it is dropped
    stalled: bool = False

    def close(self, drop: bool = False) -> None:
        """End the watch: cleanly, or abruptly (``drop``) to simulate a broken connection."""
        self.dropped = self.dropped or drop
        self.queue.put_nowait(None)


class ExpiredError(Exception):
    """The requested resourceVersion is older than the retained history window."""


class Store:
    """All objects, keyed by storage resource key then ``(namespace, name)``."""

    def __init__(self, history_size: int = 1000, first_rv: int = 1000) -> None:
        self._lock = threading.RLock()
        self._objects: dict[str, dict[tuple[str, str], JSON]] = {}
        # Like a real cluster, the counter does not start at 1 and what came before it is
        # already compacted: a watch from an ancient resourceVersion answers 410 Expired.
        self._rv = first_rv
        self._history: deque[Event] = deque(maxlen=max(1, history_size))
        self._compacted = first_rv
        self._watchers: set[Watcher] = set()

    @property
    def resource_version(self) -> int:
        """The current (latest committed) resourceVersion."""
        return self._rv

    def get(self, resource: str, namespace: str, name: str) -> JSON | None:
        """The stored object, or None. Stored objects are never mutated: copy before editing."""
        return self._objects.get(resource, {}).get((namespace, name))

    def objects(self, resource: str, namespace: str | None = None) -> list[JSON]:
        """Objects of a resource (in one namespace, or all), sorted by namespace then name."""
        with self._lock:
            items = self._objects.get(resource, {})
            keys = sorted(k for k in items if namespace is None or k[0] == namespace)
            return [items[k] for k in keys]

    def count(self, resource: str) -> int:
        """How many objects of ``resource`` exist."""
        return len(self._objects.get(resource, {}))

    def commit(self, resource: str, event_type: str, obj: JSON) -> JSON:
        """Store (or delete, for ``DELETED``) ``obj`` at the next resourceVersion; notify watches.

        ``obj`` gets its ``metadata.resourceVersion`` here and is returned as stored.
        """
        with self._lock:
            self._rv += 1
            obj["metadata"]["resourceVersion"] = str(self._rv)
            meta = obj["metadata"]
            key = (meta.get("namespace", ""), meta["name"])
            bucket = self._objects.setdefault(resource, {})
            previous = bucket.get(key)
            if event_type == "DELETED":
                bucket.pop(key, None)
            else:
                bucket[key] = obj
            event = Event(self._rv, event_type, resource, obj, previous)
            if len(self._history) == self._history.maxlen:
                self._compacted = self._history[0].rv
            self._history.append(event)
            watchers = [w for w in self._watchers if w.resource == resource]
        for watcher in watchers:
            seen = event.seen_by(watcher.accepts)
            if seen is not None:
                watcher.queue.put_nowait(seen)
        return obj

    def watch(self, watcher: Watcher, since: int | None) -> list[Event]:
        """Register ``watcher``; return the retained events after ``since`` that it accepts.

        ``since=None`` means "from now". Raises :class:`ExpiredError` when events after
        ``since`` have already left the history window.
        """
        with self._lock:
            if since is not None and since < self._compacted:
                raise ExpiredError(f"too old resource version: {since} ({self._compacted + 1})")
            backlog: list[Event] = []
            if since is not None:
                seen = (
                    e.seen_by(watcher.accepts)
                    for e in self._history
                    if e.rv > since and e.resource == watcher.resource
                )
                backlog = [e for e in seen if e is not None]
            self._watchers.add(watcher)
            return backlog

    def unwatch(self, watcher: Watcher) -> None:
        """Forget a watch that ended."""
        with self._lock:
            self._watchers.discard(watcher)

    def watchers(self, resource: str | None = None) -> Iterator[Watcher]:
        """Open watches (of one resource storage key, or all)."""
        with self._lock:
            found = [w for w in self._watchers if resource is None or w.resource == resource]
        yield from found

    @property
    def oldest_retained(self) -> int:
        """The oldest resourceVersion a watch can still resume from."""
        return self._compacted

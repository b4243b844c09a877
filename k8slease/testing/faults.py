"""Fault injection and request counters, driven from Python or over HTTP.

:class:`Faults` holds rules (added latency, error responses, dropped or stalled watch
streams) matched by verb, resource, namespace and name, plus a pause that holds every API
request until resumed. :class:`Stats` counts requests per verb and resource and keeps a
bounded log, so benchmarks and tests can count API calls. Both are thread-safe: tests call
them from the test thread while the server runs on its own.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

JSON = dict[str, Any]
VERBS = frozenset(
    {"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
)


def resource_matches(pattern: str | None, plural: str, group: str, subresource: str) -> bool:
    """Whether a rule's resource (``leases``, ``leases.coordination.k8s.io``,
    ``leases/status``) names this request's resource. ``None`` matches all."""
    if pattern is None:
        return True
    base, _, sub = pattern.partition("/")
    if sub and sub != subresource:
        return False
    return base in (plural, f"{plural}.{group}" if group else plural)


@dataclass
class Fault:
    """One injection rule. ``times`` limits how many requests it affects (None: forever).

    ``status`` answers that HTTP error instead of serving; ``latency`` delays the request by
    that many seconds (``retry_after`` adds a ``Retry-After`` header to the error);
    ``drop_after`` (watches only) breaks the stream that many seconds
    after it opens, without a clean end, as a lost connection would. ``stall_after`` (watches
    only) silences it that many seconds after it opens: the connection stays open and says
    nothing more (no event, no bookmark, no end at its timeout) until it is broken, as a
    half-open connection behind a dead load balancer would. ``duration`` (seconds) ends the
    rule that long after it was added (a slow spell: ``latency=10, duration=300``);
    ``expires_at`` is that moment on the server's monotonic clock.
    """

    verbs: frozenset[str] | None = None
    resource: str | None = None
    namespace: str | None = None
    name: str | None = None
    status: int | None = None
    latency: float = 0.0
    drop_after: float | None = None
    times: int | None = None
    message: str | None = None
    retry_after: int | None = None
    stall_after: float | None = None
    expires_at: float | None = None
    id: int = 0
    hits: int = 0

    def expired(self, now: float) -> bool:
        """Whether the rule's ``duration`` has run out at monotonic ``now``."""
        return self.expires_at is not None and now >= self.expires_at

    def matches(
        self, verb: str, plural: str, group: str, sub: str, namespace: str, name: str
    ) -> bool:
        """Whether this rule applies to the request."""
        return (
            (self.verbs is None or verb in self.verbs)
            and resource_matches(self.resource, plural, group, sub)
            and (self.namespace is None or self.namespace == namespace)
            and (self.name is None or self.name == name)
        )

    def to_json(self) -> JSON:
        """JSON form, as ``GET /_k8slease/faults`` lists it."""
        data = asdict(self)
        data["verbs"] = sorted(self.verbs) if self.verbs is not None else None
        return data


class Faults:
    """The active fault rules and the pause switch of one server.

    ``clock`` (monotonic seconds; default ``time.monotonic``) times the rules' ``duration``.
    """

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._rules: list[Fault] = []
        self._ids = itertools.count(1)
        self._paused = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._resume: asyncio.Event | None = None
        self._drop_hook: Any = None
        self._stall_hook: Any = None

    def bind(self, loop: asyncio.AbstractEventLoop, drop_hook: Any, stall_hook: Any = None) -> None:
        """Attach to the server's event loop (called by the server when it starts)."""
        self._loop = loop
        self._resume = asyncio.Event()
        self._resume.set()
        self._drop_hook = drop_hook
        self._stall_hook = stall_hook

    def add(
        self,
        verbs: Iterable[str] | str | None = None,
        resource: str | None = None,
        *,
        namespace: str | None = None,
        name: str | None = None,
        status: int | None = None,
        latency: float = 0.0,
        drop_after: float | None = None,
        times: int | None = None,
        message: str | None = None,
        retry_after: int | None = None,
        stall_after: float | None = None,
        duration: float | None = None,
    ) -> Fault:
        """Add a rule; returns it (its ``id`` removes it). Example::

        server.faults.add("update", "leases", status=503, times=2)
        server.faults.add(latency=0.2)                 # every request, 200 ms slower
        server.faults.add("watch", "leases", drop_after=0.5)
        server.faults.add("watch", "leases", stall_after=0.5)   # silent, open, from 0.5 s
        server.faults.add(latency=10, duration=300)    # a slow API server for 5 minutes
        """
        if duration is not None and not (isinstance(duration, int | float) and duration > 0):
            raise ValueError(f"duration must be a positive number of seconds, got {duration!r}")
        verb_set = (
            None if verbs is None else frozenset([verbs] if isinstance(verbs, str) else verbs)
        )
        if verb_set is not None and not verb_set <= VERBS:
            raise ValueError(f"unknown verbs {sorted(verb_set - VERBS)}; known: {sorted(VERBS)}")
        rule = Fault(
            verb_set,
            resource,
            namespace,
            name,
            status,
            float(latency),
            drop_after,
            times,
            message,
            retry_after,
            stall_after=stall_after,
            expires_at=None if duration is None else self._clock() + float(duration),
        )
        with self._lock:
            rule.id = next(self._ids)
            self._rules.append(rule)
        return rule

    def remove(self, fault: Fault | int) -> None:
        """Remove one rule (by object or id)."""
        fid = fault if isinstance(fault, int) else fault.id
        with self._lock:
            self._rules = [r for r in self._rules if r.id != fid]

    def clear(self) -> None:
        """Remove every rule and resume if paused."""
        with self._lock:
            self._rules.clear()
        self.resume()

    def rules(self) -> list[Fault]:
        """The active rules (those whose ``duration`` has run out are gone)."""
        now = self._clock()
        with self._lock:
            self._rules = [r for r in self._rules if not r.expired(now)]
            return list(self._rules)

    def take(
        self, verb: str, plural: str, group: str, sub: str, namespace: str, name: str
    ) -> list[Fault]:
        """The rules matching a request, consuming one of their ``times``."""
        found = []
        now = self._clock()
        with self._lock:
            self._rules = [r for r in self._rules if not r.expired(now)]
            for rule in self._rules:
                if rule.matches(verb, plural, group, sub, namespace, name):
                    rule.hits += 1
                    found.append(rule)
                    if rule.times is not None:
                        rule.times -= 1
            self._rules = [r for r in self._rules if r.times is None or r.times > 0]
        return found

    # --- pause -------------------------------------------------------------------------

    @property
    def paused(self) -> bool:
        """Whether API requests are being held."""
        return self._paused

    def pause(self) -> None:
        """Hold every API request (``/_k8slease/*`` excepted) until :meth:`resume`."""
        self._paused = True
        if self._loop is not None and self._resume is not None:
            self._loop.call_soon_threadsafe(self._resume.clear)

    def resume(self) -> None:
        """Release held requests."""
        self._paused = False
        if self._loop is not None and self._resume is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._resume.set)

    @contextmanager
    def paused_requests(self) -> Iterator[None]:
        """``with server.faults.paused_requests(): ...`` holds requests for the block."""
        self.pause()
        try:
            yield
        finally:
            self.resume()

    async def wait_resumed(self) -> None:
        """(Server side) wait while paused."""
        if self._paused and self._resume is not None:
            await self._resume.wait()

    def drop_watches(self, resource: str | None = None) -> int:
        """Break every open watch (of ``resource``, or all) now; returns how many."""
        if self._drop_hook is None:
            return 0
        count: int = self._drop_hook(resource)
        return count

    def stall_watches(self, resource: str | None = None) -> int:
        """Silence every open watch (of ``resource``, or all) now: each stays open and delivers
        nothing more until it is broken (:meth:`drop_watches`); returns how many."""
        if self._stall_hook is None:
            return 0
        count: int = self._stall_hook(resource)
        return count


@dataclass(frozen=True)
class Request:
    """One served API request, as the request log keeps it."""

    verb: str
    resource: str
    namespace: str
    name: str
    code: int
    seconds: float


@dataclass
class Stats:
    """Counters per ``(verb, resource)`` and a bounded log of the last requests."""

    log_size: int = 10000
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    _log: deque[Request] = field(default_factory=deque)
    _served: threading.Condition = field(default_factory=threading.Condition)

    def record(self, request: Request) -> None:
        """(Server side) count one request."""
        with self._lock:
            self._counts[(request.verb, request.resource)] += 1
            self._log.append(request)
            if len(self._log) > self.log_size:
                self._log.popleft()
        with self._served:
            self._served.notify_all()

    def wait_until(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Block until ``predicate()`` is true, checking it again after each request the server
        records (when it ends: a watch counts when it closes); False after ``timeout`` seconds.

        For tests that wait for "the client has made N requests" (or for a fault's ``hits``)
        without sleeping in a loop.
        """
        with self._served:
            return self._served.wait_for(predicate, timeout)

    def count(self, verb: str | None = None, resource: str | None = None) -> int:
        """Requests with this verb and/or resource (``leases`` or ``leases.coordination.k8s.io``
        or ``leases/status``); both None counts all API requests."""
        with self._lock:
            items = list(self._counts.items())
        total = 0
        for (v, res), n in items:
            if verb is not None and v != verb:
                continue
            if resource is not None and not _resource_is(resource, res):
                continue
            total += n
        return total

    def snapshot(self) -> dict[str, int]:
        """``{"<verb> <resource>": count}`` for every pair seen."""
        with self._lock:
            return {f"{v} {r}": n for (v, r), n in sorted(self._counts.items())}

    def requests(self) -> list[Request]:
        """The request log (oldest first)."""
        with self._lock:
            return list(self._log)

    def reset(self) -> None:
        """Forget all counts and the log."""
        with self._lock:
            self._counts.clear()
            self._log.clear()


def _resource_is(pattern: str, recorded: str) -> bool:
    """``recorded`` is ``plural[.group][/sub]``; match by full name or plural."""
    base, _, sub = recorded.partition("/")
    p_base, _, p_sub = pattern.partition("/")
    if p_sub != sub:
        return False
    return p_base == base or p_base == base.split(".", 1)[0]

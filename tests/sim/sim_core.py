"""The simulated world: one true time, an event queue, replica clocks, a Lease store, a network.

Nothing sleeps. True time ``t`` only moves when the next event is taken from the queue. Each
replica's monotonic clock is ``t * (1 + drift) + offset`` and its wall clock ``T0 + t + skew``
(NTP keeps wall clocks in step: a bounded skew, no accumulated drift): offsets are arbitrary,
skews bounded by the scenario, drift is within :data:`MAX_DRIFT` (the stated bound: the safety
margin ``lease_duration - renew_deadline`` must cover it). Every random choice
comes from one seeded ``random.Random``, so a seed replays exactly; the trace records what
happened for a failing seed.
"""

from __future__ import annotations

import contextlib
import copy
import heapq
import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from k8slease.errors import AlreadyExists, Conflict, NotFound, TransportError, Unavailable
from k8slease.lease.budget import MIN_BUDGET

T0 = datetime(2026, 11, 30, tzinfo=UTC)
#: The largest clock rate difference a replica may have (0.5 %; NTP-disciplined clocks are
#: within 0.01 %).
MAX_DRIFT = 0.005


@dataclass
class Clock:
    drift: float
    offset: float
    skew: float

    def mono(self, t: float) -> float:
        return t * (1 + self.drift) + self.offset

    def wall(self, t: float) -> datetime:
        # wall clocks are kept in step by NTP: a bounded skew, no accumulated drift
        return T0 + timedelta(seconds=t + self.skew)

    def true_time_of(self, mono: float) -> float:
        """The true time at which this clock reads ``mono``."""
        return (mono - self.offset) / (1 + self.drift)


class World:
    """The event queue and the trace."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.t = 0.0
        self._queue: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self.trace: list[str] = []
        self.events = 0

    def at(self, when: float, action: Callable[[], None]) -> None:
        heapq.heappush(self._queue, (max(when, self.t), next(self._seq), action))

    def log(self, text: str) -> None:
        self.trace.append(f"{self.t:10.3f} {text}")
        if len(self.trace) > 4000:
            del self.trace[:1000]

    def run_until(self, end: float, after_each: Callable[[], None]) -> None:
        while self._queue and self._queue[0][0] <= end:
            when, _, action = heapq.heappop(self._queue)
            self.t = when
            action()
            self.events += 1
            after_each()
        self.t = end


@dataclass
class Store:
    """Leases by name with resourceVersions, conditional writes and a change feed."""

    world: World
    leases: dict[str, dict[str, Any]] = field(default_factory=dict)
    rv: int = 0
    uids: int = 0
    watchers: list[Callable[[str, dict[str, Any]], None]] = field(default_factory=list)

    def _bump(self, kind: str, lease: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        stored = copy.deepcopy(lease)
        stored.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
        name = stored["metadata"]["name"]
        if kind == "DELETED":
            self.leases.pop(name, None)
        else:
            self.leases[name] = stored
        for watcher in self.watchers:
            watcher(kind, copy.deepcopy(stored))
        return copy.deepcopy(stored)

    def get(self, name: str) -> dict[str, Any]:
        if name not in self.leases:
            raise NotFound(f"get {name}: not found", status=404)
        return copy.deepcopy(self.leases[name])

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        name = body["metadata"]["name"]
        if name in self.leases:
            raise AlreadyExists(f"create {name}: exists", status=409, reason="AlreadyExists")
        lease = copy.deepcopy(body)
        lease["metadata"].pop("resourceVersion", None)
        self.uids += 1
        lease["metadata"]["uid"] = f"uid-{self.uids}"
        return self._bump("ADDED", lease)

    def replace(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """A PUT as kube-apiserver answers it: conditional on ``resourceVersion``, and on
        ``metadata.uid`` when the body carries one (checked before create-on-update, so a PUT of
        a Lease read before it was deleted is a 409, never a new Lease); a PUT of a missing Lease
        without a uid creates it."""
        uid = body["metadata"].get("uid")
        current = self.leases.get(name)
        if current is None:
            if uid:
                raise Conflict(
                    f"update {name}: Precondition failed: UID in precondition: {uid}, "
                    "UID in object meta: ",
                    status=409,
                    reason="Conflict",
                )
            return self.create(body)
        if uid and uid != current["metadata"].get("uid"):
            raise Conflict(f"update {name}: UID precondition", status=409, reason="Conflict")
        if body["metadata"].get("resourceVersion") != current["metadata"].get("resourceVersion"):
            raise Conflict(f"update {name}: conflict", status=409, reason="Conflict")
        return self._bump("MODIFIED", copy.deepcopy(body))

    def edit(self, name: str, change: Callable[[dict[str, Any]], None]) -> bool:
        if name not in self.leases:
            return False
        lease = copy.deepcopy(self.leases[name])
        change(lease)
        self._bump("MODIFIED", lease)
        return True

    def delete(self, name: str) -> bool:
        if name not in self.leases:
            return False
        self._bump("DELETED", self.leases[name])
        return True


@dataclass
class Faults:
    """The faults in force, drawn by the scenario; the network consults them per request."""

    latency: float = 0.05  # the largest one-way delay
    loss: float = 0.0  # chance an answer is lost (the request was applied)
    errors: float = 0.0  # chance a request is answered 5xx without being applied
    #: chance a request reaches the store only after its caller timed out (issue 26: the write
    #: is applied after the caller gave up on it; the next read settles it)
    late: float = 0.0
    partitioned: set[int] = field(default_factory=set)
    paused_until: dict[int, float] = field(default_factory=dict)


@dataclass
class Network:
    """Sends a request from a replica to the store and its answer back, with faults."""

    world: World
    store: Store
    faults: Faults
    timeout: float
    counts: dict[str, int] = field(default_factory=dict)

    def count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def request(
        self,
        replica: int,
        op: Callable[[Store], dict[str, Any] | None],
        answer: Callable[[dict[str, Any] | None, TransportError | None], None],
        *,
        timeout: float | None = None,
        late_ok: bool = False,
    ) -> None:
        """Run ``op`` on the store after a delay; ``answer`` gets the result or an error, at
        most ``timeout`` (default: the network's) after sending (a late or lost answer becomes
        a timeout): the request's budget, as the caller set it. ``late_ok``: the request may
        reach the store after the caller's timeout (``Faults.late``; the job Lease's writes)."""
        world, faults, rng = self.world, self.faults, self.world.rng
        sent = world.t
        deadline = sent + (self.timeout if timeout is None else max(MIN_BUDGET, timeout))

        def timed_out() -> None:
            answer(None, Unavailable("timeout"))

        if replica in faults.partitioned:
            self.count("partitioned")
            world.at(deadline, timed_out)
            return
        if rng.random() < faults.errors:
            self.count("5xx")
            world.at(
                sent + rng.uniform(0, faults.latency), lambda: answer(None, Unavailable("503"))
            )
            return
        if late_ok and faults.late and rng.random() < faults.late:
            self.count("late-apply")
            world.at(deadline, timed_out)

            def apply_late() -> None:
                with contextlib.suppress(TransportError):
                    op(self.store)

            world.at(deadline + rng.uniform(0, 2 * self.timeout), apply_late)
            return
        arrive = sent + rng.uniform(0, faults.latency)

        def apply() -> None:
            result: dict[str, Any] | None = None
            error: TransportError | None = None
            try:
                result = op(self.store)
            except TransportError as exc:
                error = exc
            if rng.random() < faults.loss:
                self.count("lost-answer")
                world.at(deadline, timed_out)
                return
            back = world.t + rng.uniform(0, faults.latency)
            if back > deadline:
                self.count("late-answer")
                world.at(deadline, timed_out)
                return
            world.at(back, lambda: answer(result, error))

        world.at(arrive, apply)

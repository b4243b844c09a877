"""A deterministic model of N replicas' election machines sharing an in-memory Lease store.

Time is one global float; each replica's monotonic clock is that plus its own offset (clocks run at
the same rate, as the safety model assumes) and its wall clock is skewed arbitrarily. Requests are
split into send (the machine's command), apply (the store executes it) and respond (the machine
hears the outcome), so tests and Hypothesis can interleave them any way they like, lose them, and
deliver watch events late.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from k8slease.election.commands import (
    Command,
    Create,
    Event,
    Read,
    StartedLeading,
    StoppedLeading,
    Update,
)
from k8slease.election.machine import ElectionMachine
from k8slease.election.timing import ElectionTiming
from k8slease.errors import NotFound, TransportError, Unavailable
from k8slease.lease.record import LeaseRecord, record_from_lease
from k8slease.lease.view import LeaseView
from tests.unit.election.elector_memstore import MemoryLeaseStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NAME = "demo"


@dataclass
class Pending:
    command: Read | Create | Update
    sent_at: float
    applied: bool = False
    result: dict[str, Any] | None = None
    error: TransportError | None = None


@dataclass
class Replica:
    machine: ElectionMachine
    offset: float
    skew: float
    pending: Pending | None = None
    cursor: int = 0
    events: list[Event] = field(default_factory=list)


class Cluster:
    """Replicas ``r0..rN-1`` contending for one Lease in a :class:`MemoryLeaseStore`."""

    def __init__(
        self,
        n: int,
        *,
        timing: ElectionTiming | None = None,
        offsets: list[float] | None = None,
        skews: list[float] | None = None,
    ) -> None:
        import random

        self.timing = timing or ElectionTiming(
            lease_duration=10, renew_interval=3, renew_deadline=7, retry_interval=2
        )
        self.store = MemoryLeaseStore()
        self.t = 0.0
        self.replicas = [
            Replica(
                machine=ElectionMachine(
                    name=NAME,
                    namespace="default",
                    identity=f"r{i}",
                    timing=self.timing,
                    rng=random.Random(i),
                ),
                offset=(offsets or [0.0] * n)[i],
                skew=(skews or [0.0] * n)[i],
            )
            for i in range(n)
        ]
        self.started_tokens: list[int] = []

    # -- clocks ----------------------------------------------------------------------------------

    def mono(self, i: int) -> float:
        return self.t + self.replicas[i].offset

    def wall(self, i: int) -> datetime:
        return T0 + timedelta(seconds=self.t + self.replicas[i].skew)

    def advance(self, dt: float) -> None:
        assert dt >= 0
        self.t += dt

    # -- request steps ---------------------------------------------------------------------------

    def act(self, i: int) -> Command | None:
        """Ask replica ``i`` for its next command; a request becomes pending. None if busy."""
        replica = self.replicas[i]
        if replica.pending is not None:
            return None
        command = replica.machine.next_command(self.mono(i), self.wall(i))
        if isinstance(command, Read | Create | Update):
            replica.pending = Pending(command, sent_at=self.mono(i))
        self._collect(i)
        return command

    def apply(self, i: int) -> None:
        """The store executes replica ``i``'s pending request (if not yet)."""
        pending = self.replicas[i].pending
        if pending is None or pending.applied:
            return
        pending.applied = True
        command = pending.command
        try:
            if isinstance(command, Read):
                try:
                    pending.result = self.store.get(NAME)
                except NotFound:
                    pending.result = None
            elif isinstance(command, Create):
                pending.result = self.store.create(command.body)
            else:
                pending.result = self.store.replace(NAME, command.body)
        except TransportError as exc:
            pending.error = exc

    def respond(self, i: int, *, lose: bool = False) -> None:
        """Replica ``i`` hears its pending request's outcome (``lose``: a timeout instead)."""
        replica = self.replicas[i]
        pending = replica.pending
        if pending is None:
            return
        if not pending.applied and not lose:
            return
        replica.pending = None
        machine, now = replica.machine, self.mono(i)
        error = Unavailable("timeout") if lose else pending.error
        if isinstance(pending.command, Read):
            if error is None:
                result = pending.result
                machine.read_done(None if result is None else LeaseView.decode(result), now=now)
            else:
                machine.read_failed(error, now=now)
        elif error is None:
            assert pending.result is not None
            written = LeaseView.decode(pending.result)
            machine.write_done(written, sent_at=pending.sent_at, now=now)
        else:
            machine.write_failed(error, sent_at=pending.sent_at, now=now)
        self._collect(i)

    def roundtrip(self, i: int) -> Command | None:
        """act + apply + respond without delay."""
        command = self.act(i)
        self.apply(i)
        self.respond(i)
        return command

    def deliver_watch(self, i: int, count: int = 1) -> int:
        """Deliver up to ``count`` pending watch events to replica ``i``, in order."""
        replica = self.replicas[i]
        delivered = 0
        while delivered < count and replica.cursor < len(self.store.history):
            kind, lease = self.store.history[replica.cursor]
            replica.cursor += 1
            replica.machine.on_watch(
                LeaseView.decode(lease), deleted=kind == "DELETED", now=self.mono(i)
            )
            delivered += 1
        self._collect(i)
        return delivered

    def check(self, i: int) -> None:
        self.replicas[i].machine.check(self.mono(i))
        self._collect(i)

    def stop(self, i: int) -> None:
        self.replicas[i].machine.stop(self.mono(i))
        self._collect(i)

    def abdicate(self, i: int) -> None:
        machine = self.replicas[i].machine
        machine.abdicate(machine.term, self.mono(i), "work ended")
        self._collect(i)

    def step(self, op: str, i: int, dt: float, *, watch_events: int = 1) -> bool:
        """One step of a generated schedule (the property tests'): ``advance`` by ``dt``, or
        ``op`` done by replica ``i`` (a watch delivers up to ``watch_events`` events). False for
        an op this model does not know (the caller's own)."""
        if op == "advance":
            self.advance(dt)
        elif op == "lose":
            self.respond(i, lose=True)
        elif op == "watch":
            self.deliver_watch(i, watch_events)
        elif op in ("watch_off", "watch_on"):
            self.replicas[i].machine.set_watching(op == "watch_on", self.mono(i))
        elif op in ("act", "apply", "respond", "roundtrip", "check", "stop", "abdicate"):
            getattr(self, op)(i)
        else:
            return False
        return True

    # -- observations ----------------------------------------------------------------------------

    def believers(self) -> list[int]:
        return [i for i, r in enumerate(self.replicas) if r.machine.believes_leading(self.mono(i))]

    def leader(self) -> int | None:
        believers = self.believers()
        assert len(believers) <= 1, f"two leaders at t={self.t}: {believers}"
        return believers[0] if believers else None

    def _collect(self, i: int) -> None:
        replica = self.replicas[i]
        for event in replica.machine.drain_events():
            replica.events.append(event)
            if isinstance(event, StartedLeading):
                self.started_tokens.append(event.fencing_token)

    def run_until(self, predicate: Any, *, limit: float = 120.0, step: float = 0.25) -> None:
        """Let every replica act promptly (watch on) until ``predicate()`` or ``limit`` seconds.

        A request left in flight by the schedule before is answered first (applied late, as a
        real server may): left pending, it kept its replica from ever acting again, a freeze
        no transport has (its request timeout answers), which the hostile fuzz found
        (2026-12-03: three creates sent, none applied, no leader in 60 s)."""
        end = self.t + limit
        for i in range(len(self.replicas)):
            self.apply(i)
            self.respond(i)
        while not predicate():
            assert self.t < end, "condition not reached"
            for i in range(len(self.replicas)):
                self.replicas[i].machine.set_watching(True, self.mono(i))
                self.deliver_watch(i, 1000)
                self.check(i)
                for _ in range(4):
                    command = self.act(i)
                    if command is None or not isinstance(command, Read | Create | Update):
                        break
                    self.apply(i)
                    self.respond(i)
                    self.deliver_watch(i, 1000)
                self.leader()
            if predicate():
                return
            self.advance(step)


def alternates(events: list[Event]) -> bool:
    """Started/Stopped strictly alternate, starting with Started, with matching terms."""
    term = None
    for event in events:
        if isinstance(event, StartedLeading):
            if term is not None:
                return False
            term = event.term
        elif isinstance(event, StoppedLeading):
            if term != event.term:
                return False
            term = None
    return True


def lease_record(cluster: Cluster) -> LeaseRecord:
    """The record of the contended Lease as it stands in ``cluster``'s store."""
    return record_from_lease(cluster.store.get(NAME))

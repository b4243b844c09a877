"""A replica's election in the simulation: the real :class:`ElectionMachine`, driven by events.

The driver does what :mod:`k8slease.election.threads` does (one command at a time, watch events,
deadline checks, polling without a watch) on the simulated network, with the replica's own
clocks. A paused replica handles nothing until its pause ends; its clocks keep running.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from k8slease.election.budgets import election_budget
from k8slease.election.commands import Create, Done, Phase, Purpose, Read, Update, Wait
from k8slease.election.machine import ElectionMachine
from k8slease.election.timing import ElectionTiming
from k8slease.errors import NotFound, TransportError
from k8slease.lease.view import LeaseView
from tests.sim.sim_core import Clock, Network, World

LEADER_LEASE = "leader"


class Replica:
    """Pause-aware scheduling shared by the election and job drivers."""

    def __init__(self, index: int, world: World, net: Network, clock: Clock) -> None:
        self.index = index
        self.world = world
        self.net = net
        self.clock = clock
        #: what came due while paused, in the order it came due
        self._deferred: list[Callable[[], None]] = []

    def mono(self) -> float:
        return self.clock.mono(self.world.t)

    def paused(self) -> bool:
        return self.world.t < self.net.faults.paused_until.get(self.index, 0.0)

    def later(self, when: float, action: Callable[[], None]) -> None:
        """Run ``action`` at true time ``when``, or, if this replica is paused then, after its
        pause, in the order things came due (a process resumed after SIGSTOP handles what
        waited in the order it arrived, even when its pause is cut short)."""

        def fire() -> None:
            if self._deferred or self.paused():
                self._deferred.append(action)
                if len(self._deferred) == 1:
                    self.world.at(self._pause_end(), self._resume_one)
                return
            action()

        self.world.at(when, fire)

    def _pause_end(self) -> float:
        return max(self.world.t, self.net.faults.paused_until.get(self.index, 0.0))

    def resume(self) -> None:
        """The pause was cut short: handle what waited from now on."""
        if self._deferred:
            self.world.at(self.world.t, self._resume_one)

    def _resume_one(self) -> None:
        """One deferred action per event, so that the checks run between them."""
        if not self._deferred:
            return
        if self.paused():
            self.world.at(self._pause_end(), self._resume_one)
            return
        action = self._deferred.pop(0)
        action()
        if self._deferred:
            self.world.at(self.world.t, self._resume_one)


class ElectionReplica(Replica):
    def __init__(
        self, index: int, world: World, net: Network, clock: Clock, timing: ElectionTiming
    ) -> None:
        super().__init__(index, world, net, clock)
        self.machine = ElectionMachine(
            name=LEADER_LEASE,
            namespace="sim",
            identity=f"r{index}",
            timing=timing,
            rng=random.Random(world.rng.random()),
        )
        self.machine.set_watching(True, self.mono())
        #: the watch stream (a new one after each break) and when its last event arrives:
        #: events of one stream arrive in order, as a real watch's do
        self._stream = 1
        self._last_delivery = 0.0
        self._busy = False
        self._wake = 0
        #: for the checks: when (event number) this replica first saw each write (by
        #: resourceVersion), and its last granting write (resourceVersion, whether a create, the
        #: event that sent it)
        self.seen_at: dict[int, int] = {}
        self.grant: tuple[int, bool, int] | None = None
        #: called when this replica's elector handles the end of a term (the real elector's
        #: ``on_stopped_leading``: ``Jobs`` pauses the LEADER entries, settles their claims)
        self.on_term_end: list[Callable[[], None]] = []
        #: called when a term begins (``on_started_leading``: ``Jobs`` resumes and catches up)
        self.on_term_start: list[Callable[[], None]] = []
        self._was_leader = False

    def _saw(self, lease: dict[str, Any] | None) -> None:
        if lease is not None:
            self.seen_at.setdefault(int(lease["metadata"]["resourceVersion"]), self.world.events)

    def believes(self) -> bool:
        return self.machine.believes_leading(self.mono())

    def start(self) -> None:
        self.later(self.world.t, self.step)

    def step(self) -> None:
        machine = self.machine
        machine.check(self.mono())
        leader = machine.phase is Phase.LEADER
        if self._was_leader != leader:
            for hook in self.on_term_end if self._was_leader else self.on_term_start:
                hook()
        self._was_leader = leader
        if self._busy:
            return
        command = machine.next_command(self.mono(), self.clock.wall(self.world.t))
        if isinstance(command, Wait):
            if command.until is not None:
                self._wake += 1
                token = self._wake
                # a microsecond past: float rounding must not wake it a hair before ``until``
                # (then it would wait again at the same instant, for ever)
                when = max(self.clock.true_time_of(command.until), self.world.t) + 1e-6
                self.later(when, lambda: self._woken(token))
            return
        if isinstance(command, Done):
            return
        self._busy = True
        sent = self.mono()
        self.world.log(f"r{self.index} sends {type(command).__name__} {command.purpose.value}")
        at = self.world.events
        # the request's budget, as the runner sets it (clock drift makes it a hair off in true
        # time, as a real process's timer would be)
        budget = election_budget(
            command.purpose,
            timing=self.machine.timing,
            now=sent,
            leading_until=self.machine.leading_until,
        )
        if isinstance(command, Read):
            self.net.request(self.index, _read, self._read_answer, timeout=budget)
        elif isinstance(command, Create):
            body = command.body
            self.net.request(
                self.index,
                lambda s: s.create(body),
                lambda r, e: self._write_answer(r, e, sent, (True, at)),
                timeout=budget,
                late_ok=True,
            )
        elif isinstance(command, Update):
            body = command.body
            take = (False, at) if command.purpose is Purpose.TAKE else None
            self.net.request(
                self.index,
                lambda s: s.replace(LEADER_LEASE, body),
                lambda r, e: self._write_answer(r, e, sent, take),
                timeout=budget,
                late_ok=True,
            )

    def _woken(self, token: int) -> None:
        if token == self._wake:
            self.step()

    def _read_answer(self, result: dict[str, Any] | None, error: TransportError | None) -> None:
        def handle() -> None:
            self.world.log(f"r{self.index} read answer {_brief(result, error)}")
            self._saw(result)
            self._busy = False
            if error is None or isinstance(error, NotFound):
                view = None if result is None else LeaseView.decode(result)
                self.machine.read_done(view, now=self.mono())
            else:
                self.machine.read_failed(error, now=self.mono())
            self.step()

        self.later(self.world.t, handle)

    def _write_answer(
        self,
        result: dict[str, Any] | None,
        error: TransportError | None,
        sent: float,
        grant: tuple[bool, int] | None = None,
    ) -> None:
        def handle() -> None:
            self.world.log(f"r{self.index} write answer {_brief(result, error)}")
            self._saw(result)
            if result is not None and grant is not None:
                self.grant = (int(result["metadata"]["resourceVersion"]), *grant)
            self._busy = False
            if error is None:
                assert result is not None
                self.machine.write_done(LeaseView.decode(result), sent_at=sent, now=self.mono())
            else:
                self.machine.write_failed(error, sent_at=sent, now=self.mono())
            self.step()

        self.later(self.world.t, handle)

    def on_change(self, kind: str, lease: dict[str, Any]) -> None:
        """A change of the leader Lease reaches this replica's watch (if it has one): events
        arrive in order, each after a random delay; an event of a stream that broke since is
        lost (the restart's list covers it)."""
        if self.index in self.net.faults.partitioned or not self.machine.watching:
            return
        stream = self._stream
        deliver = max(
            self._last_delivery, self.world.t + self.world.rng.uniform(0, self.net.faults.latency)
        )
        self._last_delivery = deliver

        def handle() -> None:
            if self.index in self.net.faults.partitioned or stream != self._stream:
                return
            self.machine.on_watch(
                LeaseView.decode(lease), deleted=kind == "DELETED", now=self.mono()
            )
            self._saw(lease)
            self.world.log(f"r{self.index} watch {kind} {_brief(lease, None)}")
            self.step()

        self.later(deliver, handle)

    def set_watching(self, watching: bool, current: dict[str, Any] | None) -> None:
        """The watch broke (partition) or was re-established (then the current state is
        delivered as a watch restart's list would, before any event of the new stream)."""
        self._stream += 1
        self._last_delivery = max(self._last_delivery, self.world.t)

        def handle() -> None:
            self.machine.set_watching(watching, self.mono())
            if watching and current is not None:
                self.machine.on_watch(LeaseView.decode(current), deleted=False, now=self.mono())
                self._saw(current)
            self.step()

        self.later(self.world.t, handle)


def _brief(lease: dict[str, Any] | None, error: TransportError | None) -> str:
    if error is not None:
        return f"error {error}"
    if lease is None:
        return "absent"
    spec = lease.get("spec")
    token = lease["metadata"].get("annotations", {}).get("k8slease.io/fencing-token")
    rv = lease["metadata"].get("resourceVersion")
    return f"rv={rv} token={token} spec={spec}"


def _read(store: Any) -> dict[str, Any] | None:
    try:
        lease: dict[str, Any] = store.get(LEADER_LEASE)
    except NotFound:
        return None
    return lease

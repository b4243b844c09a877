"""A job replica's view of its job Lease in the simulation, kept by its informer.

The base of :class:`~tests.sim.sim_jobs.JobReplica`: the requests it sends to the store (each
answer is its next step, when it arrives), and what it sees of its job Lease, in the real
:class:`~k8slease.lease.observe.Observations` on which the real lock judges and from which the
real :class:`~k8slease.jobs.lockcache.ClaimCache` collects the members of a tick's claim order.
Each sighting is also noted for the checks (when this replica first saw each write, and each
hand edit).

The informer: one list, then a watch whose events arrive in order, each after a random delay.
A partition breaks the watch; the informer lists again (``INFORMER_RETRY`` seconds, jittered,
after a failed list), and only a successful list makes it synced again. As the real informer, a
list that does not contain the Lease does not tell the observer it is gone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

from k8slease.errors import NotFound, TransportError
from k8slease.jobs.lockcache import DEFAULT_CLAIM_SPREAD, DEFAULT_CLAIM_STEP, ClaimCache
from k8slease.lease.observe import Observations
from k8slease.lease.view import LeaseView
from k8slease.names import job_lease_name
from tests.sim.sim_core import Clock, Network, Store, World
from tests.sim.sim_election import Replica
from tests.sim.sim_ledger import JOB, Ledger

#: The informer's pause before listing again after a failed list (jittered 0.8-1.2).
INFORMER_RETRY = 5.0


class SimClock:
    """A replica's clocks as :class:`k8slease.clock.Clock` (nothing here ever waits)."""

    def __init__(self, replica: Replica) -> None:
        self._replica = replica

    def monotonic(self) -> float:
        return self._replica.mono()

    def now(self) -> datetime:
        return self._replica.clock.wall(self._replica.world.t)

    def wait(self, cond: threading.Condition, timeout: float | None) -> None:
        raise AssertionError("the simulation never blocks")


class InformedReplica(Replica):
    """A job replica's requests to the store, and its view of its job Lease."""

    def __init__(
        self, index: int, world: World, net: Network, clock: Clock, ledger: Ledger, job: str
    ) -> None:
        super().__init__(index, world, net, clock)
        self.job = job
        self.lease = job_lease_name("g", job)
        self.tag = "" if job == JOB else f" [{job}]"  # in the trace
        self.me = f"r{index}"
        self.ledger = ledger
        self.observations = Observations(SimClock(self))
        self.synced = False
        self.cache = ClaimCache(
            self.observations,
            lambda: self.synced,
            step=DEFAULT_CLAIM_STEP,
            spread=DEFAULT_CLAIM_SPREAD,
        )
        self.seen_at: dict[int, int] = {}  # resourceVersion -> event number first seen
        #: hand edit or deletion (its resourceVersion) -> when this replica first saw it (the
        #: Lease absent after a deletion counts as seeing that deletion): it waits it out from
        #: then (rules 4, 5), so the checks' window for quiet skips starts there too
        self.saw_hand_edit: dict[int, float] = {}
        # the informer: the stream its watch events belong to (0: none), events held back
        # until the list that opened the stream is processed, the last delivery time
        self._stream = 0
        self._streams = 0
        self._held_back: list[tuple[str, dict[str, Any]]] = []
        self._last_delivery = 0.0

    def _ask(
        self,
        op: Callable[[Store], dict[str, Any] | None],
        answer: Callable[[dict[str, Any] | None, TransportError | None], None],
        *,
        timeout: float | None = None,
        late_ok: bool = False,
    ) -> None:
        """``op`` on the store over the network; ``answer(result, error)`` is this replica's
        next step, at the time the answer arrives."""
        self.net.request(
            self.index,
            op,
            lambda r, e: self.later(self.world.t, lambda: answer(r, e)),
            timeout=timeout,
            late_ok=late_ok,
        )

    def _read_op(self, store: Any) -> dict[str, Any] | None:
        try:
            lease: dict[str, Any] = store.get(self.lease)
        except NotFound:
            return None
        return lease

    # -- sightings ---------------------------------------------------------------------------

    def see(self, lease: dict[str, Any] | None, *, event_version: str | None = None) -> None:
        """A sighting: an answer, or (``event_version`` given) a watch event, which the
        observer drops when it is older than what it shows (as the real informer's are)."""
        view = None if lease is None else LeaseView.decode(lease)
        if event_version is None:
            self.observations.see(self.lease, view)
        elif not self.observations.see_event(self.lease, view, version=event_version):
            return
        if lease is not None:  # for the checks: when this replica first saw each write
            rv = int(lease["metadata"]["resourceVersion"])
            self.seen_at.setdefault(rv, self.world.events)
            if rv in self.ledger.hand_edit_rvs:
                self.saw_hand_edit.setdefault(rv, self.world.t)
        elif self.ledger.deletions:
            self.saw_hand_edit.setdefault(self.ledger.deletions[-1], self.world.t)
        self._seen()

    def _seen(self) -> None:
        """What follows a sighting: nothing here (a claim waiting its turn judges again:
        ``sim_jobs``)."""

    def _viewed(self) -> LeaseView | None:
        observation = self.observations.current(self.lease).observation
        return None if observation is None else observation.view

    # -- the informer ------------------------------------------------------------------------

    def on_change(self, kind: str, lease: dict[str, Any]) -> None:
        """A change of the job Lease, sent down this replica's watch stream (if it has one):
        events arrive in order, each after a random delay."""
        if self._stream == 0 or self.index in self.net.faults.partitioned:
            return
        stream = self._stream
        deliver = max(
            self._last_delivery, self.world.t + self.world.rng.uniform(0, self.net.faults.latency)
        )
        self._last_delivery = deliver
        self.later(deliver, lambda: self._event(stream, kind, lease))

    def _event(self, stream: int, kind: str, lease: dict[str, Any]) -> None:
        if stream != self._stream:
            return  # the watch broke: this event is lost, the next list covers it
        if not self.synced:
            self._held_back.append((kind, lease))
            return
        self._see_event(kind, lease)

    def _see_event(self, kind: str, lease: dict[str, Any]) -> None:
        version = lease["metadata"]["resourceVersion"]
        self.see(None if kind == "DELETED" else lease, event_version=version)

    def break_watch(self) -> None:
        """The watch broke (a partition): not synced until a list succeeds."""
        self._stream = 0
        self.synced = False
        self._held_back.clear()
        if not self._listing:
            self.later(self.world.t, self._list)

    _listing = False

    def _list(self) -> None:
        self._listing = True
        self._streams += 1
        stream = self._streams

        def op(store: Any) -> dict[str, Any] | None:
            self._stream = stream  # the watch starts at the list's resourceVersion
            return self._read_op(store)

        def answer(lease: dict[str, Any] | None, error: TransportError | None) -> None:
            self._listing = False
            if error is not None or self._stream != stream:
                if self._stream == stream:
                    self._stream = 0
                self._held_back.clear()
                self._listing = True
                retry = INFORMER_RETRY * self.world.rng.uniform(0.8, 1.2)
                self.later(self.world.t + retry, self._list)
                return
            if lease is not None:  # a list without the Lease says nothing of it
                self.see(lease)
            self.synced = True
            held, self._held_back = self._held_back, []
            for kind, event in held:
                self._see_event(kind, event)

        self._ask(op, answer)

"""When did this replica first see the Lease as it is now? Measured on its own monotonic clock.

Expiry is never judged by comparing wall-clock times written by other pods. A candidate instead
remembers when it first saw the current record and may take over once it has seen that record
unchanged for the record's ``leaseDurationSeconds``. The time of an observation is read *after*
the answer arrived, so it is never earlier than the write that produced the record: rule 2 of
the safety model (:mod:`k8slease.lease.safety`), and rule 4 for a Lease seen deleted.

"Unchanged" compares the Lease's whole ``spec`` and its fencing-token annotation, as client-go
compares the raw record: a renew always changes ``renewTime``, so it restarts the timer, while a
relabelling of the Lease does not. Stale data (a lagging watch event) can only restart the timer,
which delays a takeover but never hastens one; a watch event older (by resourceVersion) than
what is shown already, such as a claim's event arriving after the answer to its release, is not
taken as the Lease's state at all (:meth:`Observations.see_event`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from k8slease.clock import Clock
from k8slease.lease.meta import annotations_of, version_number
from k8slease.lease.record import LeaseRecord
from k8slease.lease.rules import takeover_at
from k8slease.lease.view import LeaseView
from k8slease.names import ANN_FENCING_TOKEN

#: The problem that marks a released Lease that disappeared: held by someone unknown.
DELETED_AFTER_SEEN = "deleted after it was seen released"
#: How many distinct claimed ticks an observer remembers (see ``LeaseObserver.claimed_ticks``).
CLAIMED_TICKS_KEPT = 16


@dataclass(frozen=True, slots=True)
class Observation:
    """The Lease as last seen and since when it has been seen unchanged.

    ``view`` is ``None`` when the Lease did not exist. ``first_seen_at`` is the monotonic time
    this content was first seen. ``held_before_absence`` is the last record seen before the
    Lease disappeared (someone deleted it), marked malformed when it was a release (someone may
    have taken it unseen before the deletion): either way it is held by someone until waited
    out. ``None`` when the Lease was never seen.
    """

    view: LeaseView | None
    first_seen_at: float
    held_before_absence: LeaseRecord | None = None
    #: once the Lease reappeared after it was seen deleted while held: that held record and
    #: when the absence was first seen (kept through later changes): its holder may still
    #: believe until it is waited out, whoever the new Lease names (rule 4)
    deleted: tuple[LeaseRecord, float] | None = None

    @property
    def exists(self) -> bool:
        """True when the Lease existed at this observation."""
        return self.view is not None

    @property
    def lease(self) -> dict[str, Any] | None:
        return None if self.view is None else self.view.body

    @property
    def record(self) -> LeaseRecord | None:
        return None if self.view is None else self.view.record

    @property
    def resource_version(self) -> str:
        return "" if self.view is None else self.view.resource_version

    def takeover_at(
        self, *, identity: str, fallback_duration: float, last_held: LeaseRecord | None
    ) -> float:
        """The monotonic time from which ``identity`` may take the Lease as seen here
        (:func:`~k8slease.lease.rules.takeover_at`, given this observation's memory of a
        deletion and ``last_held``, the last held record seen)."""
        return takeover_at(
            self.record,
            self.first_seen_at,
            identity=identity,
            fallback_duration=fallback_duration,
            held_before_absence=self.held_before_absence,
            last_held=last_held,
            deleted=self.deleted,
        )


def content_key(lease: Mapping[str, Any] | None) -> str:
    """What must stay equal for a Lease to count as unchanged: its spec and fencing token (as
    written, so that an edit of a malformed token counts as a change too)."""
    if lease is None:
        return "<absent>"
    token = annotations_of(lease).get(ANN_FENCING_TOKEN)
    try:
        return json.dumps([lease.get("spec"), token], sort_keys=True, default=repr)
    except (TypeError, ValueError, RecursionError):
        # JSON nested deeper than the interpreter's recursion limit: still a stable key
        return f"<unserialisable spec> {token!r:.200}"


class LeaseObserver:
    """Tracks one Lease's observations; not thread-safe (its owner serialises calls).

    It also remembers the highest fencing token and the newest claimed job tick ever seen, so
    that a grant on a Lease whose annotations were edited away, or that was deleted, still issues
    a token above every one this replica saw and never claims a tick seen claimed.
    """

    def __init__(self) -> None:
        self._current: Observation | None = None
        self._key: str | None = None
        self._last_held: LeaseRecord | None = None
        #: how many sightings (reads, watch events, write answers) this observer was given
        self.sightings = 0
        #: when a record some holder may have written was first seen: a holder, fencing token
        #: and ``renewTime`` not seen together before (a malformed record naming a holder: any
        #: change). Hand edits that name no holder (no spec included), or keep all three, do
        #: not move it: they extend nobody's belief.
        self.holder_write_seen_at: float | None = None
        self._holder_write: tuple[object, ...] | None = None
        self.highest_token = 0
        #: the current observation's resourceVersion as a number (``None``: not comparable)
        self._version: int | None = None
        #: The newest job tick ever seen claimed on this Lease (kept when it is deleted).
        self.highest_claimed_tick: datetime | None = None
        #: The last distinct claimed ticks seen, oldest first (kept when it is deleted): when the
        #: highest is a suspect far-future claim, the newest plausible one still counts.
        self.claimed_ticks: list[datetime] = []

    @property
    def last_held(self) -> LeaseRecord | None:
        """The well-formed held record of the newest term seen, with the latest ``renewTime``
        seen in that term (a release must renew after it). Not simply the last one seen: an
        answer can arrive after a watch event that is newer than it (a read served before a
        renewal, answered after the watch delivered the renewal), and a release judged against
        that older record would let hand edits that leave the newer ``renewTime`` pass for a
        release (simulation seed 7265)."""
        return self._last_held

    @property
    def current(self) -> Observation | None:
        """The latest observation, or ``None`` before the first one."""
        return self._current

    def is_current(self, lease: LeaseView | None) -> bool:
        """Whether ``lease`` (``None``: absent) is what the latest observation shows."""
        return (
            self._current is not None
            and content_key(None if lease is None else lease.body) == self._key
        )

    def overtaken(self, lease: LeaseView | None, *, sightings: int) -> bool:
        """Whether a read's answer ``lease``, sent when this observer had ``sightings``, was
        overtaken: something seen since (a watch event, another answer) shows otherwise.

        Such an answer may be the older of the two (served before the change, heard after it).
        Taken as the latest it would restart the wait on a Lease already released, or make one
        just created look deleted; a read sent now is at least as new as what was seen.
        """
        return sightings != self.sightings and not self.is_current(lease)

    def late(self, version: str) -> bool:
        """Whether a watch event at resourceVersion ``version`` is older than what this
        observer shows now: a delivery that lagged behind this replica's own write's answer
        (or a read's). Only comparable versions order anything (:func:`version_number`)."""
        number = version_number(version)
        return number is not None and self._version is not None and number < self._version

    def remember(self, view: LeaseView) -> None:
        """Keep what must never be forgotten of ``view``, even when it is not the newest
        sighting: its fencing token and claimed tick (maxima) and its held record's term."""
        if view.record.held and not view.record.malformed:
            self._last_held = _later_held(self._last_held, view.record)
        self.highest_token = max(self.highest_token, view.fencing_token)
        claimed = view.job.claimed_tick
        if claimed is not None and (
            self.highest_claimed_tick is None or claimed > self.highest_claimed_tick
        ):
            self.highest_claimed_tick = claimed
        if claimed is not None and claimed not in self.claimed_ticks:
            self.claimed_ticks.append(claimed)
            del self.claimed_ticks[:-CLAIMED_TICKS_KEPT]

    def observe(
        self, lease: LeaseView | None, at: float, *, version: str | None = None
    ) -> Observation:
        """Record that ``lease`` (``None``: absent) was seen at monotonic time ``at``.

        ``at`` must be read after the answer carrying ``lease`` arrived. ``version`` is the
        sighting's resourceVersion when it is not ``lease``'s own (a deletion event's). Returns
        the current observation, whose ``first_seen_at`` moves only when the content changed.
        """
        view = lease
        self.sightings += 1
        key = content_key(None if view is None else view.body)
        self._version = version_number(
            (view.resource_version if view is not None else "") if version is None else version
        )
        if view is not None:
            self.remember(view)
        previous = self._current
        if previous is not None and key == self._key:
            self._current = Observation(
                view=view,
                first_seen_at=previous.first_seen_at,
                held_before_absence=previous.held_before_absence,
                deleted=previous.deleted,
            )
            return self._current
        held_before: LeaseRecord | None = None
        if view is None and previous is not None:
            seen = previous.record
            if seen is None:
                held_before = previous.held_before_absence
            elif seen.held or seen.malformed:
                held_before = seen
            else:
                # seen released, now gone: someone may have taken it (unseen, the watch lags)
                # before it was deleted, so it counts as held by someone unknown
                held_before = replace(seen, problems=(*seen.problems, DELETED_AFTER_SEEN))
        deleted: tuple[LeaseRecord, float] | None = None
        if view is not None and previous is not None:
            if previous.view is None and previous.held_before_absence is not None:
                deleted = (previous.held_before_absence, previous.first_seen_at)
            else:
                deleted = previous.deleted
        if view is not None and view.record.held:
            record = view.record
            mark = (
                (key,)
                if record.malformed
                else (record.holder, record.fencing_token, record.renew_time)
            )
            if mark != self._holder_write:
                self._holder_write, self.holder_write_seen_at = mark, at
        self._key = key
        self._current = Observation(
            view=view,
            first_seen_at=at,
            held_before_absence=held_before,
            deleted=deleted,
        )
        return self._current


@dataclass(frozen=True, slots=True)
class Seen:
    """One snapshot of a Lease's observer (see :meth:`Observations.current`).

    ``observation`` is ``None`` when the Lease was never seen; its ``view`` is ``None`` while
    the Lease is seen absent, and then its ``held_before_absence`` is what must be waited out.
    """

    observation: Observation | None
    unchanged_for: float
    highest_token: int
    highest_claimed_tick: datetime | None
    #: the last distinct claimed ticks seen, oldest first (``LeaseObserver.claimed_ticks``)
    claimed_ticks: tuple[datetime, ...] = ()


class Observations:
    """Observers for several Leases by name, reading a :class:`~k8slease.clock.Clock`; thread-safe.

    :meth:`see` answers the question the lock code asks: for how many seconds has this replica
    seen ``lease`` unchanged? ``0.0`` on first sight or right after a change.
    """

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        #: notified whenever a Lease is seen or forgotten (see :meth:`wait_for_change`)
        self._changed = threading.Condition(self._lock)
        self._observers: dict[str, LeaseObserver] = {}
        self._generation = 0
        self._listeners: list[Callable[[Observation], None]] = []

    def add_listener(self, listener: Callable[[Observation], None]) -> None:
        """Call ``listener`` (under this object's lock: keep it short, no I/O) with every new
        observation of a Lease whose content changed."""
        with self._lock:
            self._listeners.append(listener)

    def see(self, name: str, lease: LeaseView | None) -> float:
        """Record ``lease`` (``None``: absent) as seen now; return for how long it is unchanged."""
        with self._lock:
            return self._see(name, lease)

    def sightings(self, name: str) -> int:
        """How many sightings of ``name`` were recorded (take it before sending a read)."""
        with self._lock:
            observer = self._observers.get(name)
            return 0 if observer is None else observer.sightings

    def see_answer(self, name: str, lease: LeaseView | None, *, sightings: int) -> bool:
        """Record a read's answer ``lease``, sent when ``name`` had ``sightings``, unless it was
        overtaken (:meth:`LeaseObserver.overtaken`); returns whether it was recorded."""
        with self._lock:
            observer = self._observers.get(name)
            if observer is not None and observer.overtaken(lease, sightings=sightings):
                return False
            self._see(name, lease)
            return True

    def see_event(self, name: str, lease: LeaseView | None, *, version: str) -> bool:
        """Record a watch event at resourceVersion ``version`` showing ``lease`` (``None``: a
        deletion), unless it is late (:meth:`LeaseObserver.late`); returns whether it was.

        A watch stream is in order, but it runs beside this replica's own writes: the event of
        a claim can arrive after the answer to the release that followed it. Taken as the
        latest, it would show the lock held again by a run that is over and the next tick
        would be skipped ("held by" the replica itself). A late event still counts towards the
        highest fencing token and claimed tick."""
        with self._lock:
            observer = self._observers.get(name)
            if observer is not None and observer.late(version):
                if lease is not None:
                    observer.remember(lease)
                return False
            self._see(name, lease, version=version)
            return True

    def _see(self, name: str, lease: LeaseView | None, *, version: str | None = None) -> float:
        """:meth:`see`, under the lock."""
        observer = self._observers.setdefault(name, LeaseObserver())
        now = self._clock.monotonic()
        observation = observer.observe(lease, now, version=version)
        if observation.first_seen_at == now and observation.view is not None:
            for listener in self._listeners:
                listener(observation)
        self._generation += 1
        self._changed.notify_all()
        return max(0.0, now - observation.first_seen_at)

    def current(self, name: str) -> Seen:
        """What this replica has seen of ``name``, as one snapshot: the last observation, for
        how long it has been unchanged up to now, and the highest fencing token and claimed tick
        ever seen on it (both kept across a deletion)."""
        with self._lock:
            observer = self._observers.get(name)
            if observer is None:
                return Seen(None, 0.0, 0, None)
            current = observer.current
            unchanged = (
                0.0
                if current is None
                else max(0.0, self._clock.monotonic() - current.first_seen_at)
            )
            return Seen(
                current,
                unchanged,
                observer.highest_token,
                observer.highest_claimed_tick,
                tuple(observer.claimed_ticks),
            )

    @property
    def generation(self) -> int:
        """A number that grows with every :meth:`see` and :meth:`forget`."""
        with self._lock:
            return self._generation

    def observed(self) -> list[Observation]:
        """The current observation of every Lease seen to exist."""
        with self._lock:
            current = [o.current for o in self._observers.values()]
        return [o for o in current if o is not None and o.view is not None]

    def wait_for_change(self, since: int, timeout: float) -> int:
        """Block until something is seen after generation ``since`` or ``timeout`` seconds of the
        clock passed (may return early); returns the generation now."""
        with self._lock:
            if self._generation == since and timeout > 0:
                self._clock.wait(self._changed, timeout)
            return self._generation

    def observer(self, name: str) -> LeaseObserver:
        """The observer of Lease ``name`` (created on first use)."""
        with self._lock:
            return self._observers.setdefault(name, LeaseObserver())

    def forget(self, name: str) -> None:
        """Drop what was seen of ``name`` (for example after deleting it)."""
        with self._lock:
            self._observers.pop(name, None)
            self._generation += 1
            self._changed.notify_all()


def _later_held(kept: LeaseRecord | None, seen: LeaseRecord) -> LeaseRecord:
    """Of two held records, the one a release must renew after: the newer term (the higher
    fencing token), and within a term the later ``renewTime`` (a record without one never
    replaces one that has it; ties go to the newer sighting).

    Terms are compared by token, not by ``renewTime``: two holders' wall clocks may disagree,
    and a former holder whose clock ran ahead must not make the present holder's release look
    older than a record of a term that is over (candidates would wait a whole lease on every
    graceful handover)."""
    if kept is None or seen.fencing_token > kept.fencing_token:
        return seen
    if seen.fencing_token < kept.fencing_token:
        return kept
    if kept.renew_time is None:
        return seen
    if seen.renew_time is None or seen.renew_time < kept.renew_time:
        return kept
    return seen

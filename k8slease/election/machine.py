"""The elector's state machine: the pure election decisions strung together, without I/O.

:class:`ElectionMachine` says what to do next (:meth:`~ElectionMachine.next_command`: read, create,
update or wait) and is told what happened (the ``*_done``/``*_failed`` methods, watch events,
deadline checks, stop). It never performs a request and never reads a clock; every time is passed
in. The runner (:mod:`k8slease.election.threads`) executes its commands against the API server,
the property tests against an in-memory Lease store with arbitrary interleavings, so the safety
argument in :mod:`k8slease.lease.rules` is tested on the very code that runs.

Phases: ``CANDIDATE``, ``LEADER`` (renewing), ``RELEASING`` (giving the Lease back), ``STOPPED``.
Transitions are events (:mod:`k8slease.election.commands`) for callbacks, logs and metrics; a
``StoppedLeading`` is emitted the moment belief ends, before any further command, and only after
a matching ``StartedLeading``. One command is outstanding at a time.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from k8slease.election.commands import (
    Command,
    Create,
    Done,
    Event,
    NewLeader,
    Phase,
    Purpose,
    Read,
    Released,
    StartedLeading,
    StoppedLeading,
    Update,
    Wait,
)
from k8slease.election.decide import (
    CandidateAction,
    LeaderAction,
    decide_candidate,
    decide_leader,
    edited_reason,
    leader_deadline,
)
from k8slease.election.releasing import Releasing
from k8slease.election.state import LeadState, MachineOptions, PendingRequest, ReleaseState
from k8slease.election.timing import ElectionTiming
from k8slease.errors import AlreadyExists, Conflict, NotFound, TransportError
from k8slease.lease.observe import LeaseObserver, Observation
from k8slease.lease.record import LeaseRecord, lease_with_record, new_lease
from k8slease.lease.rules import grant_record, renewal_record
from k8slease.lease.view import LeaseView
from k8slease.names import LABEL_GROUP, LABEL_ROLE, ROLE_LEADER


class ElectionMachine(Releasing):
    """One replica's election for one Lease, as a pure state machine; not thread-safe.

    ``name``/``namespace`` name the Lease, ``identity`` is this replica's holder string,
    ``timing`` the validated durations. ``group`` goes into the ``k8slease.io/group`` label of a
    Lease it creates (default: the Lease name). ``rng`` jitters polling and retries.
    """

    def __init__(
        self,
        *,
        name: str,
        namespace: str,
        identity: str,
        timing: ElectionTiming,
        group: str | None = None,
        release_on_stop: bool = True,
        labels: Mapping[str, str] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        if not identity:
            raise ValueError("identity must not be empty")
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.timing = timing
        self.group = group or name
        self._options = MachineOptions(
            release_on_stop=release_on_stop,
            labels={LABEL_GROUP: self.group, LABEL_ROLE: ROLE_LEADER, **dict(labels or {})},
        )
        self._rng = rng or random.Random()
        self.observer = LeaseObserver()
        self.phase = Phase.CANDIDATE
        self.term = 0
        self.watching = False
        #: since when a watch has delivered every change without a break (``None``: none now)
        self.watched_since: float | None = None
        self.stopping = False
        self._lead: LeadState | None = None
        self._release: ReleaseState | None = None
        self._after_release = Phase.CANDIDATE
        self._pending: PendingRequest | None = None
        self._need_read = True
        self._not_before = float("-inf")
        self._poll_at: float | None = None
        self._reported_holder = ""
        self._events: list[Event] = []

    # -- queries -------------------------------------------------------------------------------

    def believes_leading(self, now: float) -> bool:
        """Whether this replica may act as leader at monotonic time ``now``."""
        until = self.leading_until
        return until is not None and now < until

    @property
    def leading_until(self) -> float | None:
        """When leadership ends without a further renew (monotonic); ``None`` when not leading."""
        if self.phase is not Phase.LEADER or self._lead is None:
            return None
        return leader_deadline(self._lead.last_ok_sent, self.timing.renew_deadline)

    @property
    def fencing_token(self) -> int | None:
        """The fencing token of the current grant while leading, else ``None``."""
        if self.phase is not Phase.LEADER or self._lead is None:
            return None
        return self._lead.record.fencing_token

    @property
    def last_success_sent_at(self) -> float | None:
        """When the last successful grant or renew was sent (monotonic), while leading."""
        return self._lead.last_ok_sent if self._lead is not None else None

    @property
    def observation(self) -> Observation | None:
        """The latest observation of the Lease."""
        return self.observer.current

    @property
    def leader(self) -> str:
        """The holder as last observed (empty when nobody holds it or nothing was seen)."""
        current = self.observer.current
        if current is None or current.record is None:
            return ""
        return current.record.holder

    @property
    def pending(self) -> Read | Create | Update | None:
        """The command whose outcome has not been reported yet."""
        return self._pending.command if self._pending is not None else None

    def drain_events(self) -> list[Event]:
        """The events since the last call, oldest first."""
        events, self._events = self._events, []
        return events

    # -- inputs --------------------------------------------------------------------------------

    def next_command(self, now: float, wall: datetime) -> Command:
        """What to do at monotonic ``now``; ``wall`` is written into renewTime/acquireTime."""
        if self._pending is not None:
            raise RuntimeError(f"{self._pending.command!r} is still outstanding")
        if self.phase is Phase.LEADER:
            self.check(now)
        if self.phase is Phase.LEADER:
            return self._leader_command(now, wall)
        if self.phase is Phase.RELEASING:
            command = self._release_command(now, wall)
            if command is not None:
                return command
        if self.phase is Phase.STOPPED:
            return Done()
        return self._candidate_command(now, wall)

    def check(self, now: float) -> bool:
        """Step down if the renew deadline has passed; returns whether it did."""
        until = self.leading_until
        if until is not None and now >= until:
            self._step_down("renew deadline passed", now, release=False, after=Phase.CANDIDATE)
            if self.stopping:
                self.phase = Phase.STOPPED
            return True
        return False

    def stop(self, now: float) -> None:
        """Begin stopping: a leader steps down at once and (by default) releases the Lease."""
        self.stopping = True
        if self.phase is Phase.LEADER:
            if self._options.release_on_stop:
                self._step_down("stopping", now, release=True, after=Phase.STOPPED)
            else:
                self._step_down("stopping", now, release=False, after=Phase.STOPPED)
                self.phase = Phase.STOPPED
        elif self.phase is Phase.RELEASING:
            self._after_release = Phase.STOPPED
        elif self.phase is Phase.CANDIDATE and self._pending is None:
            self.phase = Phase.STOPPED

    def abdicate(self, term: int, now: float, reason: str) -> bool:
        """Give up leadership of ``term`` (its work ended) and release; returns whether it did."""
        if self.phase is not Phase.LEADER or self._lead is None or self._lead.term != term:
            return False
        self._step_down(reason, now, release=True, after=Phase.CANDIDATE)
        return True

    def set_watching(self, watching: bool, now: float) -> None:
        """Whether a watch currently delivers changes; without one, candidates poll."""
        if watching == self.watching:
            return
        self.watching = watching
        self.watched_since = now if watching else None
        if not watching:
            self._poll_at = now + self._jitter(self.timing.retry_interval)

    def on_watch(self, view: LeaseView, *, deleted: bool, now: float) -> None:
        """A watch event arrived at ``now``: ``view`` is the object (its last state if deleted)."""
        self._observe(None if deleted else view, now)
        if self.phase is not Phase.LEADER or self._lead is None:
            return
        lead = self._lead
        seen = view.record
        if deleted:
            self._step_down("lease deleted", now, release=False, after=Phase.CANDIDATE)
        elif seen in lead.written:
            lead.synced = True
        elif seen.fencing_token < lead.record.fencing_token and not lead.synced:
            return  # an event from before our grant, delivered late
        else:
            self._step_down(edited_reason(seen), now, release=False, after=Phase.CANDIDATE)

    def read_done(self, view: LeaseView | None, *, now: float) -> None:
        """The outstanding :class:`Read` answered ``view`` (``None``: NotFound) at ``now``.

        A candidate's read that a watch event overtook is set aside and sent again at once
        (:meth:`~k8slease.lease.observe.LeaseObserver.overtaken`): taken as the latest, its
        possibly older answer made candidates wait a whole lease after a graceful release.
        """
        pending = self._take_pending(Read)
        purpose = pending.command.purpose
        if purpose is Purpose.OBSERVE and self.observer.overtaken(
            view, sightings=pending.sightings
        ):
            self._need_read = True
            self._stop_if_stopping_candidate()
            return
        self._observe(view, now)
        if purpose is Purpose.OBSERVE:
            self._need_read = False
            if not self.watching:
                self._poll_at = now + self._jitter(self.timing.retry_interval)
            self._stop_if_stopping_candidate()
        elif purpose is Purpose.REREAD:
            if (lead := self._lead_of(pending.term)) is not None:
                self._reread_done(lead, view, now)
        elif purpose is Purpose.RELEASE_READ:
            self._release_read(view, now)

    def read_failed(self, error: TransportError, *, now: float) -> None:
        """The outstanding :class:`Read` failed with ``error`` (anything but NotFound)."""
        pending = self._take_pending(Read)
        purpose = pending.command.purpose
        if purpose is Purpose.OBSERVE:
            self._need_read = True
            self._not_before = now + self._jitter(self.timing.retry_interval)
            self._stop_if_stopping_candidate()
        elif purpose is Purpose.REREAD:
            if (lead := self._lead_of(pending.term)) is not None:
                lead.next_attempt_at = now + self._renew_retry()
        elif purpose is Purpose.RELEASE_READ:
            self._release_failed(now)

    def write_done(self, view: LeaseView, *, sent_at: float, now: float) -> None:
        """The outstanding :class:`Create`/:class:`Update`, sent at ``sent_at``, succeeded:
        ``view`` is what the server stored."""
        pending = self._take_pending(Create, Update)
        self._observe(view, now)
        purpose = pending.command.purpose
        written = pending.record
        assert written is not None
        if purpose in (Purpose.CREATE, Purpose.TAKE):
            self._granted(dict(view.body), written, sent_at=sent_at, now=now)
        elif purpose is Purpose.RENEW:
            # (a lead that stepped down meanwhile has nothing to renew; the observer has it)
            if (lead := self._lead_of(pending.term)) is not None:
                lead.renewed(view, written, sent_at=sent_at, interval=self.timing.renew_interval)
        elif purpose is Purpose.RELEASE:
            self._events.append(Released(fencing_token=written.fencing_token))
            self._finish_release(now)

    def write_failed(self, error: TransportError, *, sent_at: float, now: float) -> None:
        """The outstanding :class:`Create`/:class:`Update` failed with ``error``.

        A Conflict or AlreadyExists means someone else wrote first: never a crash, just a re-read.
        A timeout may hide a write that was applied; that is safe, since belief only starts on a
        success and a lost success only makes later conditional writes fail.
        """
        pending = self._take_pending(Create, Update)
        purpose = pending.command.purpose
        if purpose in (Purpose.CREATE, Purpose.TAKE):
            self._need_read = True
            # Someone else wrote first, or the Lease vanished between our read and our take:
            # re-read at once. Anything else, a 404 on create (no such namespace) included,
            # waits retry_interval (jittered) before the next attempt.
            lost_race = isinstance(error, AlreadyExists | Conflict)
            vanished = isinstance(error, NotFound) and purpose is Purpose.TAKE
            if not (lost_race or vanished):
                self._not_before = now + self._jitter(self.timing.retry_interval)
            self._stop_if_stopping_candidate()
        elif purpose is Purpose.RENEW:
            if (lead := self._lead_of(pending.term)) is not None:
                self._renew_failed(lead, error, now)
        elif purpose is Purpose.RELEASE:
            self._release_write_failed(error, now)

    # -- internals -----------------------------------------------------------------------------

    def _reread_done(self, lead: LeadState, view: LeaseView | None, now: float) -> None:
        """The re-read after a renew's Conflict answered ``view``: still the record this term
        wrote (renew again, once at once, then after a retry interval), or someone else's."""
        record = None if view is None else view.record
        if view is not None and record is not None and record in lead.written:
            lead.lease = dict(view.body)
            lead.needs_reread = False
            lead.next_attempt_at = now if not lead.retried else now + self._renew_retry()
            lead.retried = True
        else:
            reason = "lease deleted" if record is None else edited_reason(record)
            self._step_down(reason, now, release=False, after=Phase.CANDIDATE)

    def _renew_failed(self, lead: LeadState, error: TransportError, now: float) -> None:
        """A renew of ``lead`` failed: the Lease is gone (step down), someone wrote first
        (re-read), or the request failed (retry after a retry interval)."""
        if isinstance(error, NotFound):
            self._observe(None, now)
            self._step_down("lease deleted", now, release=False, after=Phase.CANDIDATE)
        elif isinstance(error, Conflict):
            lead.needs_reread = True
            lead.next_attempt_at = now if not lead.retried else now + self._renew_retry()
        else:
            lead.next_attempt_at = now + self._renew_retry()

    def _leader_command(self, now: float, wall: datetime) -> Command:
        lead = self._lead
        assert lead is not None
        decision = decide_leader(
            last_success_sent_at=lead.last_ok_sent,
            next_attempt_at=lead.next_attempt_at,
            renew_deadline=self.timing.renew_deadline,
            now=now,
        )
        if decision.action is LeaderAction.WAIT:
            return Wait(decision.until)
        if lead.needs_reread:
            return self._issue(Read(Purpose.REREAD))
        record = renewal_record(
            lead.record, duration_seconds=self.timing.lease_duration_seconds, now=wall
        )
        body = lease_with_record(lead.lease, record)
        lead.wrote(record)
        return self._issue(Update(body, Purpose.RENEW), record)

    def _candidate_command(self, now: float, wall: datetime) -> Command:
        if self.stopping:
            self.phase = Phase.STOPPED
            return Done()
        if now < self._not_before:
            return Wait(self._not_before)
        current = self.observer.current
        if self._need_read or current is None:
            return self._issue(Read(Purpose.OBSERVE))
        decision = decide_candidate(
            current,
            identity=self.identity,
            fallback_duration=self.timing.lease_duration,
            now=now,
            poll_at=None if self.watching else self._poll_at,
            last_held=self.observer.last_held,
        )
        if decision.action is CandidateAction.READ:
            return self._issue(Read(Purpose.OBSERVE))
        if decision.action is CandidateAction.WAIT:
            return Wait(decision.until)
        record = grant_record(
            current.record,
            identity=self.identity,
            duration_seconds=self.timing.lease_duration_seconds,
            now=wall,
            highest_token_seen=self.observer.highest_token,
        )
        if decision.action is CandidateAction.CREATE:
            body = new_lease(self.name, self.namespace, record, labels=self._options.labels)
            return self._issue(Create(body), record)
        assert current.lease is not None
        return self._issue(Update(lease_with_record(current.lease, record), Purpose.TAKE), record)

    def _granted(
        self, lease: dict[str, Any], record: LeaseRecord, *, sent_at: float, now: float
    ) -> None:
        self._need_read = False
        if self.stopping:
            # Granted while stopping: never start leading, give it straight back.
            self.term += 1
            self._begin_release(self.term, record, lease, sent_at + self.timing.lease_duration)
            self._after_release = Phase.STOPPED
            return
        if now >= leader_deadline(sent_at, self.timing.renew_deadline):
            return  # the answer came too late to act on; the record shows us, retake later
        self.term += 1
        self._lead = LeadState(
            term=self.term,
            record=record,
            lease=lease,
            last_ok_sent=sent_at,
            next_attempt_at=sent_at + self.timing.renew_interval,
        )
        self._lead.wrote(record)
        self.phase = Phase.LEADER
        self._events.append(
            StartedLeading(term=self.term, fencing_token=record.fencing_token, record=record)
        )

    def _step_down(self, reason: str, now: float, *, release: bool, after: Phase) -> None:
        lead = self._lead
        assert lead is not None and self.phase is Phase.LEADER
        self._events.append(
            StoppedLeading(
                term=lead.term,
                fencing_token=lead.record.fencing_token,
                reason=reason,
                leading_until=leader_deadline(lead.last_ok_sent, self.timing.renew_deadline),
            )
        )
        self._lead = None
        self._need_read = False
        self._not_before = float("-inf")
        if release:
            # written on the term's last body unless a Conflict put that in doubt
            known = None if lead.needs_reread else lead.lease
            give_up_at = lead.last_ok_sent + self.timing.lease_duration
            self._begin_release(lead.term, lead.record, known, give_up_at)
            self._after_release = after
        else:
            self.phase = after

    def _issue(self, command: Read | Create | Update, record: LeaseRecord | None = None) -> Command:
        term = self._lead.term if self._lead is not None else self.term
        self._pending = PendingRequest(
            command=command, term=term, record=record, sightings=self.observer.sightings
        )
        return command

    def _lead_of(self, term: int) -> LeadState | None:
        """The lead of ``term`` if this replica still leads in it (else it stepped down since)."""
        lead = self._lead
        if self.phase is not Phase.LEADER or lead is None or lead.term != term:
            return None
        return lead

    def _stop_if_stopping_candidate(self) -> None:
        if self.stopping and self.phase is Phase.CANDIDATE:
            self.phase = Phase.STOPPED

    def _take_pending(self, *kinds: type[Read] | type[Create] | type[Update]) -> PendingRequest:
        pending = self._pending
        if pending is None or not isinstance(pending.command, kinds):
            raise RuntimeError(f"no outstanding {'/'.join(k.__name__ for k in kinds)} to report")
        self._pending = None
        return pending

    def _observe(self, view: LeaseView | None, now: float) -> None:
        """Observe ``view`` (``None``: absent) and report a new holder."""
        self.observer.observe(view, now)
        holder = "" if view is None else view.record.holder
        if holder != self._reported_holder:
            self._reported_holder = holder
            token = 0 if view is None else view.fencing_token
            self._events.append(NewLeader(holder=holder, fencing_token=token))

    def _jitter(self, base: float) -> float:
        return base * (1.0 + 0.5 * self._rng.random())

    def _renew_retry(self) -> float:
        return self.timing.renew_retry_interval

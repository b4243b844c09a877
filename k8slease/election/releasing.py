"""The release steps of :class:`~k8slease.election.machine.ElectionMachine`: giving the Lease back.

A release is a write conditional on the ``resourceVersion`` of the body this term last wrote
(as client-go's ``release()``): one request when nothing else wrote since, which is what a
graceful stop on a busy or slow server needs. When the term's last write is in doubt (a Conflict
asked for a re-read), and for every later attempt, it reads first (is the Lease still ours, by
holder and fencing token?) and writes on what the read returned. An attempt that fails is tried
again, read first, until the term's lease would run out
(:class:`~k8slease.election.state.ReleaseState`): one lost answer, one connection broken
mid-answer or one write that crossed ours must not leave the Lease naming a stopped process for
a whole lease duration. A 409 is read again at once, any other failure after
``renew_retry_interval``; a Lease deleted meanwhile needs no release.

No request of a release is sent while the term's work still runs (the elector's thread holds it
back, :meth:`Releasing.release_postponed`): a released Lease lets another replica start.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from k8slease.election.commands import Command, Phase, Purpose, Read, Update, Wait
from k8slease.election.state import ReleaseState
from k8slease.election.timing import ElectionTiming
from k8slease.errors import Conflict, NotFound, TransportError
from k8slease.lease.record import LeaseRecord, lease_with_record
from k8slease.lease.rules import is_ours, release_record
from k8slease.lease.view import LeaseView


class Releasing:
    """Release steps; mixed into the machine, whose state they read and change."""

    identity: str
    timing: ElectionTiming
    phase: Phase
    _release: ReleaseState | None
    _after_release: Phase
    _need_read: bool
    _not_before: float

    def _issue(self, command: Read | Update, record: LeaseRecord | None = None) -> Command:
        raise NotImplementedError

    def _jitter(self, base: float) -> float:
        raise NotImplementedError

    def _take_pending(self, *kinds: type[Read] | type[Update]) -> object:
        raise NotImplementedError

    def _begin_release(
        self, term: int, record: LeaseRecord, lease: dict[str, Any] | None, give_up_at: float
    ) -> None:
        """Start giving back the Lease of ``term``: at once, on ``lease`` (the body the term last
        wrote), or, when ``None``, after a fresh read."""
        release = ReleaseState(term=term, record=record, give_up_at=give_up_at)
        if lease is not None:
            release.fresh, release.read_done = dict(lease), True
        self._release = release
        self.phase = Phase.RELEASING

    def release_postponed(self, now: float) -> None:
        """The release's outstanding request was not sent: the term's work still runs. It is
        sent, as it was, after ``renew_retry_interval``, until the release gives up."""
        self._take_pending(Read, Update)
        release = self._release
        retry = self.timing.renew_retry_interval
        if release is None or not release.postpone(now, retry_in=retry):
            self._finish_release(now)

    def _release_command(self, now: float, wall: datetime) -> Command | None:
        """The next step of the release under way (None: it is over, carry on)."""
        release = self._release
        if release is None:
            self._finish_release(now)
            return None
        if now < release.not_before:
            return Wait(release.not_before)
        if not release.read_done:
            return self._issue(Read(Purpose.RELEASE_READ))
        if release.fresh is not None:
            record = release_record(release.record, now=wall)
            body = lease_with_record(release.fresh, record)
            return self._issue(Update(body, Purpose.RELEASE), record)
        self._finish_release(now)
        return None

    def _release_read(self, view: LeaseView | None, now: float) -> None:
        """The release's fresh read answered ``view`` (``None``: gone): write the release if the
        Lease is still ours."""
        release = self._release
        if release is None:
            return
        release.read_done = True
        if view is not None and is_ours(
            view.record, identity=self.identity, fencing_token=release.record.fencing_token
        ):
            release.fresh = dict(view.body)
        else:
            self._finish_release(now)

    def _release_write_failed(self, error: TransportError, now: float) -> None:
        if isinstance(error, NotFound):
            self._finish_release(now)  # deleted: nothing left to give back
        else:
            self._release_failed(now, retry_in=0.0 if isinstance(error, Conflict) else None)

    def _release_failed(self, now: float, *, retry_in: float | None = None) -> None:
        """A read or write of the release failed: try again while there is time, else give up."""
        release = self._release
        retry = self.timing.renew_retry_interval if retry_in is None else retry_in
        if release is None or not release.failed(now, retry_in=retry):
            self._finish_release(now)

    def _finish_release(self, now: float) -> None:
        self._release = None
        self.phase = self._after_release
        if self.phase is Phase.CANDIDATE:
            # Our work ended on its own: step aside for a moment so another replica gets a turn.
            self._need_read = True
            self._not_before = now + self._jitter(self.timing.retry_interval)

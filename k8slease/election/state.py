"""The records an :class:`~k8slease.election.machine.ElectionMachine` keeps between steps."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from k8slease.election.commands import Create, Read, Update
from k8slease.lease.record import LeaseRecord
from k8slease.lease.view import LeaseView


@dataclass(slots=True)
class LeadState:
    """A term this replica holds: the record and body it wrote last, its renew schedule."""

    term: int
    record: LeaseRecord
    lease: dict[str, Any]
    last_ok_sent: float
    next_attempt_at: float
    needs_reread: bool = False
    retried: bool = False
    #: The records this term wrote or is writing, newest last (bounded): a record seen that is
    #: not among them is an edit this replica did not make.
    written: list[LeaseRecord] = field(default_factory=list)
    #: Whether the watch has delivered one of our own writes of this term yet; before that, an
    #: event with an older fencing token is a late event from before our grant.
    synced: bool = False

    def renewed(
        self, view: LeaseView, record: LeaseRecord, *, sent_at: float, interval: float
    ) -> None:
        """A renew writing ``record``, sent at ``sent_at``, was stored as ``view``: the next is
        due ``interval`` after that send, with no re-read or retry outstanding."""
        self.lease = dict(view.body)
        self.record = record
        self.last_ok_sent = max(self.last_ok_sent, sent_at)
        self.next_attempt_at = sent_at + interval
        self.needs_reread = False
        self.retried = False

    def wrote(self, record: LeaseRecord) -> None:
        """Remember ``record`` as written by this term (the last :data:`WRITTEN_KEPT`)."""
        self.written.append(record)
        del self.written[:-WRITTEN_KEPT]


#: How many of its own records a term remembers to recognise late watch events of its writes.
WRITTEN_KEPT = 16


@dataclass(slots=True)
class ReleaseState:
    """A release under way: the term it ends, the body its write is conditional on, its retries.

    A release is a conditional write: its first attempt on the body the term last wrote (``fresh``
    set, ``read_done`` true: one request, as client-go's), later ones on a fresh read. An attempt
    that fails (a timeout, a 5xx, a connection broken mid-answer, a 409 from a write that crossed
    ours) is tried again, read first, until ``give_up_at``: one lease duration after the term's
    last successful renew was sent, when candidates that saw that renew may take over anyway (the
    write is conditional, so a late one cannot undo a takeover: it meets a 409). The first
    attempt is always made.
    """

    term: int
    record: LeaseRecord
    give_up_at: float
    fresh: dict[str, Any] | None = None
    read_done: bool = False
    not_before: float = float("-inf")
    attempts: int = 1

    def failed(self, now: float, *, retry_in: float) -> bool:
        """An attempt failed at ``now``: start another in ``retry_in`` (read first) while
        there is time before ``give_up_at``; returns whether it will."""
        if now + retry_in >= self.give_up_at:
            return False
        self.fresh, self.read_done = None, False
        self.not_before = now + retry_in
        self.attempts += 1
        return True

    def postpone(self, now: float, *, retry_in: float) -> bool:
        """The next request was held back at ``now`` (the term's work still runs): send it in
        ``retry_in``, as it was, while there is time before ``give_up_at``; returns whether."""
        if now + retry_in >= self.give_up_at:
            return False
        self.not_before = now + retry_in
        return True


@dataclass(slots=True)
class PendingRequest:
    """The request the runner is making for the machine, and the term it belongs to."""

    command: Read | Create | Update
    term: int
    record: LeaseRecord | None = None
    #: the observer's sightings when the request went out (``LeaseObserver.overtaken``)
    sightings: int = 0


@dataclass(slots=True)
class MachineOptions:
    """How the machine writes: release on stop, labels of a Lease it creates."""

    release_on_stop: bool = True
    labels: dict[str, str] = field(default_factory=dict)

"""Ticks lost in an outage, reported once per outage with their count (issue 22).

Three kinds of outage lose ticks without anyone running them:

* the API server cannot be asked: a job that does not fail open skips its tick
  (``api-unreachable``); or it refuses the claim (403, 422: ``api-refused``, ``fail_open`` or
  not);
* no replica leads: a LEADER-class job's tick fires on no replica at all (only the leader fires
  them; the others keep them paused). Each replica therefore also watches the LEADER jobs'
  triggers and, at each tick, judges from what it has seen of the group Lease whether anyone
  leads (:func:`nobody_leads`); a tick at which nobody does is lost (``no-leader``);
* the leader finds a LEADER job's lock held by another replica, a former leader (a run past
  its term, a claim answered after it): that replica's entry is paused, so the tick runs
  nowhere (``held-by-former-leader``, said by the leader's runner; the ends of a term are
  ``leadership-ended``).

:class:`LostTicks` warns when the first tick of an outage is lost and, when the outage ends (a
tick is claimed, or someone leads again) or the replica stops, warns once more with how many
ticks were lost, the first and the last. Every replica that sees the outage reports it: a
leaderless spell is reported by each replica, each with the ticks it saw fire.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime

from k8slease.clock import Clock
from k8slease.election.machine import ElectionMachine
from k8slease.lease.record import LeaseRecord
from k8slease.logs import Logger
from k8slease.metrics import JobMetrics


class LostTicks:
    """The lost ticks of one job on this replica during the current outage; thread-safe."""

    def __init__(self, *, group: str, job: str, log: Logger) -> None:
        self.group = group
        self.job = job
        self._log = log
        self._lock = threading.Lock()
        self._why: str | None = None
        self._count = 0
        self._first: datetime | None = None
        self._last: datetime | None = None

    @property
    def count(self) -> int:
        """Ticks lost in the current outage (0 when there is none)."""
        with self._lock:
            return self._count

    def lost(self, tick: datetime, why: str) -> None:
        """``tick`` ran nowhere because of ``why``; the first of an outage is warned about."""
        with self._lock:
            first = self._count == 0
            if first:
                self._why, self._first = why, tick
            self._count += 1
            self._last = tick
        if first:
            self._log.warning(
                "job.ticks_being_lost",
                job=self.job,
                tick=tick.isoformat(),
                why=why,
                hint="ticks are lost until this ends; their count is reported then",
            )

    def ended(self) -> int:
        """The outage ended (or this replica stops): warn with the count; returns it."""
        with self._lock:
            count, why, first, last = self._count, self._why, self._first, self._last
            self._count, self._why, self._first, self._last = 0, None, None, None
        if count:
            assert first is not None and last is not None
            self._log.warning(
                "job.ticks_lost",
                job=self.job,
                lost=count,
                why=why,
                first=first.isoformat(),
                last=last.isoformat(),
            )
        return count


def nobody_leads(machine: ElectionMachine, *, now: float) -> bool:
    """Whether, as far as this replica has seen, nobody leads the group at monotonic ``now``.

    Not this replica, and one of:

    * the Lease as last seen is free (released, or unchanged for its duration: a candidate
      could take it now);
    * it has been seen unchanged for ``renew_deadline`` plus half the margin up to
      ``lease_duration`` (for clock rates): a leader believes only until ``renew_deadline``
      after its last successful write was sent, and that write was applied before this replica
      saw the record it made (or a later one), so nobody leads on it, though candidates may
      not take it yet (a leader that crashed; a hand edit that removed the holder);
    * the same time has passed since this replica first saw the last record a holder may have
      written (``LeaseObserver.holder_write_seen_at``), and its watch has delivered every
      change since: hand edits after it that name no holder or keep its holder, token and
      ``renewTime`` (a shortened duration, a dropped spec) extend nobody's belief (soak seed
      8006: a create applied late, its sender cut off, then two such edits);
    * it names no holder (a hand edit: no holder, no spec, malformed, deleted) and the last
      holder this replica saw before that was this replica: it stepped down on seeing the edit,
      and anyone who led since would have written the Lease (watch events come in order);
    * it names this replica, which does not lead on it (a create or take applied after it gave
      up on it, or a term of its own that ended): nobody leads on it, and anyone who took it
      since would have written it. The candidates
      wait out such a Lease when it came back after another's held Lease was deleted (rule 4),
      and nobody else can tell: the deleted Lease's holder sees a Lease naming this replica.
      That holder may still believe it leads until its renew deadline if it has not seen the
      deletion, so a tick then may be reported lost though it ran there: a false alarm is
      possible, a silent loss is not.

    ``False`` before the Lease was first seen (this replica cannot tell yet). A tick the
    holder of an edited Lease could still have run (until it sees the edit) is not reported by
    the others before the second case: they cannot tell.
    """
    if machine.believes_leading(now):
        return False
    seen = machine.observation
    if seen is None:
        return False
    timing = machine.timing
    belief = (timing.renew_deadline + timing.lease_duration) / 2
    if now >= seen.first_seen_at + belief:
        return True
    written, watched = machine.observer.holder_write_seen_at, machine.watched_since
    if written is not None and watched is not None and watched <= written <= now - belief:
        return True
    if _stepped_down_from_edit(machine, seen.record, seen.held_before_absence):
        return True
    if _names_us(machine, seen.record):
        return True
    free_at = seen.takeover_at(
        identity=machine.identity,
        fallback_duration=machine.timing.lease_duration,
        last_held=machine.observer.last_held,
    )
    return now >= free_at


def _stepped_down_from_edit(
    machine: ElectionMachine, record: LeaseRecord | None, before: LeaseRecord | None
) -> bool:
    """Whether the Lease, as last seen, names no holder (edited by hand: no holder, no spec,
    malformed, or deleted) and the last holder seen before that edit was this replica: it
    stepped down on seeing the edit, and anyone else leading would have written the Lease
    since (watch events arrive in order)."""
    if record is None:  # deleted: what was seen before the deletion decides
        if before is None:
            return False
        if before.held and not before.malformed:
            return before.holder == machine.identity
    elif record.held and not record.malformed:
        return False
    last = machine.observer.last_held
    return last is not None and last.holder == machine.identity


def _names_us(machine: ElectionMachine, record: LeaseRecord | None) -> bool:
    """Whether the Lease, as last seen, is held in this replica's name (that it does not lead
    on it is the caller's check)."""
    return (
        record is not None
        and record.held
        and not record.malformed
        and record.holder == machine.identity
    )


def leaderless_watch(
    losses: LostTicks,
    *,
    machine: Callable[[], ElectionMachine | None],
    clock: Clock,
    metrics: JobMetrics,
) -> Callable[[], None]:
    """The function a replica's scheduler calls at each tick of a LEADER-class job, on every
    replica: a tick at which nobody leads (as far as this replica has seen) is lost; the first
    tick at which someone leads again ends the outage. ``machine`` gives the group's election
    machine (``None`` before the election started)."""

    def at_tick() -> None:
        found = machine()
        if found is None:
            return
        if nobody_leads(found, now=clock.monotonic()):
            metrics.skipped(losses.group, losses.job, "no-leader")
            losses.lost(clock.now().replace(microsecond=0), "no-leader")
        else:
            losses.ended()

    return at_tick

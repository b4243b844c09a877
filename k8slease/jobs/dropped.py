"""Ticks the scheduler dropped before k8slease saw them, reported instead of lost without a word.

APScheduler runs at most one instance of a job (``max_instances=1``): while a claim waits out a
slow or paused API server, the next tick is dropped with only APScheduler's own log line, and a
tick past its ``misfire_grace_time`` is dropped as missed. :class:`DroppedTicks` listens for both
and reports each outage once per job: one warning, one Warning Event (reason ``TicksDropped``)
on the job's Lease, and the ``dropped`` skip counter for every tick; each later drop of the outage
is still named, at INFO (``job.ticks_dropped_again``). The outage ends when the job runs again: a
second warning then gives how many ticks it dropped (``job.ticks_dropped_ended``).
A tick that fired while this replica's previous run still held the job's lock (the other replicas
skip it as held, at DEBUG) is dropped too: the bound job function returns :class:`NotRun` for it,
and the EXECUTED event carries that to this listener, which reports it like the others
(``why=running``).
Whether the tick ran elsewhere is the operator's call (``RunMissing``).

A LEADER job's *leaderless watch* (``watches``: its entry on every replica, see
:mod:`~k8slease.jobs.lostticks`) missed past its grace means this replica, stalled across the
tick, could not judge whether anyone led then; if it was the one replica that knew nobody did
(it had stepped down on seeing a hand edit), the tick was lost and nobody else could say so. So
that miss is warned about too (``job.leaderless_watch_missed``, once per outage, then
``job.leaderless_watch_missed_ended`` with the count; the skip counter's reason
``watch-missed``), without an Event: it says this replica could not tell, not that the tick was
lost.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from apscheduler.events import (
    EVENT_JOB_ERROR,
    EVENT_JOB_EXECUTED,
    EVENT_JOB_MAX_INSTANCES,
    EVENT_JOB_MISSED,
    JobEvent,
)

from k8slease.kube.events import EventRecorder
from k8slease.logs import get_logger
from k8slease.names import job_lease_name

log = get_logger("k8slease.jobs")

#: The APScheduler events :class:`DroppedTicks` listens to.
MASK = EVENT_JOB_MAX_INSTANCES | EVENT_JOB_MISSED | EVENT_JOB_EXECUTED | EVENT_JOB_ERROR


@dataclass(frozen=True, slots=True)
class NotRun:
    """What a bound job function returns for a tick that fired but did not run here because this
    replica's previous run still held the job's lock (``why``): the scheduler hands it to
    :class:`DroppedTicks` as the EXECUTED event's ``retval``, so the tick is reported as dropped
    instead of ending the outage as a run would."""

    tick: datetime
    why: str = "running"


class SkipCounter(Protocol):
    def skipped(self, group: str, job: str, reason: str) -> None: ...


class DroppedTicks:
    """Reports ticks the scheduler dropped, once per outage per job.

    ``names`` maps APScheduler job ids to job names; ``events`` posts the Event (``None``: log
    only); ``metrics`` counts each dropped tick as a skip with reason ``dropped``.
    """

    def __init__(
        self,
        *,
        group: str,
        names: Mapping[str, str],
        events: EventRecorder | None = None,
        metrics: SkipCounter | None = None,
        watches: Mapping[str, str] | None = None,
    ) -> None:
        self.group = group
        self._names = dict(names)
        #: leaderless watch ids -> their LEADER job's name
        self._watches = dict(watches or {})
        self._events = events
        self._metrics = metrics
        self._lock = threading.Lock()
        self._outage: dict[str, int] = {}
        self._log = log.bind(group=group)

    def dropped(self, name: str) -> int:
        """Ticks of job ``name`` dropped in the current outage (0: none)."""
        with self._lock:
            return self._outage.get(name, 0)

    def __call__(self, event: JobEvent) -> None:
        """The scheduler listener (add it with :data:`MASK`)."""
        watched = self._watches.get(event.job_id)
        if watched is not None:
            self._watch(watched, event)
            return
        name = self._names.get(event.job_id)
        if name is None:
            return
        not_run = getattr(event, "retval", None)
        if isinstance(not_run, NotRun):
            self._report(name, [not_run.tick], not_run.why, counted=True)
        elif event.code in (EVENT_JOB_EXECUTED, EVENT_JOB_ERROR):
            self._ended(name, name, "job.ticks_dropped_ended", "dropped")
        else:
            why = "max-instances" if event.code == EVENT_JOB_MAX_INSTANCES else "misfired"
            self._report(name, _ticks_of(event), why)

    def stopped_while_running(self, due: Mapping[str, list[datetime]]) -> None:
        """Report the ticks that came due while a stop waited for the job's run to finish.

        A stopping scheduler fires nothing more, so a run that lasts past the job's next tick
        drops that tick without the ``max-instances`` event a running scheduler would give, and
        the other replicas skip it as held by this one (at DEBUG): without this report nobody
        would say that the tick did not run here. ``due`` maps job names to those ticks.
        """
        for name, ticks in due.items():
            if ticks:
                self._report(name, ticks, "stopping")

    def _count(self, key: str, name: str, ticks: list[datetime], reason: str | None) -> bool:
        """Add ``ticks`` to outage ``key`` and to the skip counter (``reason``; ``None``: the
        runner counted them); whether they began the outage (then, and only then, it is warned
        about)."""
        with self._lock:
            before = self._outage.get(key, 0)
            self._outage[key] = before + len(ticks)
        if self._metrics is not None and reason is not None:
            for _ in ticks:
                self._metrics.skipped(self.group, name, reason)
        return not before

    def _ended(self, key: str, name: str, event: str, field: str) -> None:
        """End outage ``key`` (its job ran again): a warning with its count, if it had one."""
        with self._lock:
            ended = self._outage.pop(key, 0)
        if ended:
            self._log.warning(event, job=name, **{field: ended})

    def _report(self, name: str, ticks: list[datetime], why: str, *, counted: bool = False) -> None:
        """Report ``ticks`` dropped (``why``), once per outage; ``counted``: the runner already
        counted them as ``dropped`` skips (a :class:`NotRun`), so each tick counts once."""
        first = ticks[0].isoformat() if ticks else "?"
        if not self._count(name, name, ticks, None if counted else "dropped"):
            # warned once per outage; each later drop is still named, at INFO
            self._log.info(
                "job.ticks_dropped_again", job=name, tick=first, why=why, ticks=len(ticks)
            )
            return
        self._log.warning("job.ticks_dropped", job=name, tick=first, why=why, ticks=len(ticks))
        if self._events is not None:
            lease = job_lease_name(self.group, name)
            self._events.post(
                {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": lease},
                },
                reason="TicksDropped",
                message=f"job {name}: the scheduler dropped tick {first} on this replica ({why}:"
                f" {_CAUSE.get(why, _WAITING)}); reported once per outage",
                type_="Warning",
            )

    def _watch(self, name: str, event: JobEvent) -> None:
        """A leaderless watch's run, or its miss: warned once per outage, then with a count."""
        key = f"{name}:leaderless"
        if event.code in (EVENT_JOB_EXECUTED, EVENT_JOB_ERROR):
            self._ended(key, name, "job.leaderless_watch_missed_ended", "missed")
            return
        if event.code != EVENT_JOB_MISSED:
            return
        ticks = _ticks_of(event)
        if self._count(key, name, ticks, "watch-missed"):
            self._log.warning(
                "job.leaderless_watch_missed",
                job=name,
                tick=ticks[0].isoformat() if ticks else "?",
                hint="this replica was stalled across the tick and could not judge whether "
                "anyone led: if nobody did, the tick was lost",
            )


_WAITING = "the previous tick was still waiting or running"
#: why a tick was dropped, as the Event's message says it
_CAUSE = {
    "stopping": f"{_WAITING}, and this replica was stopping",
    "running": "this replica's previous run still held the job's lock",
}


def due_between(
    trigger: Any, first: datetime | None, until: datetime, limit: int = 100
) -> list[datetime]:
    """``trigger``'s fire times from ``first`` (the job's next run time) up to ``until``."""
    ticks: list[datetime] = []
    tick = first
    while tick is not None and tick <= until and len(ticks) < limit:
        ticks.append(tick)
        tick = trigger.get_next_fire_time(tick, tick + timedelta(microseconds=1))
    return ticks


def _ticks_of(event: JobEvent) -> list[datetime]:
    times = getattr(event, "scheduled_run_times", None)
    if times is None:
        one = getattr(event, "scheduled_run_time", None)
        times = [] if one is None else [one]
    return list(times)

"""Misfire policies: what to do about ticks that nobody ran while every replica was down.

The newest completed tick is persisted on the job's lock Lease. When a replica starts (or becomes
leader), it lists the ticks the schedule produced after that one; this module decides which of
them to run. Pure: the caller passes the trigger's fire times and the current time.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from enum import Enum

from k8slease.kube.microtime import shift


class MisfirePolicy(Enum):
    """What to do with missed ticks that are still within the job's grace time."""

    #: Drop them; only future ticks run.
    SKIP = "skip"
    #: Run once, for the newest missed tick (the default).
    COALESCE = "coalesce"
    #: Run every missed tick, oldest first.
    RUN_ALL = "run-all"


#: Upper bound on how many missed ticks are enumerated, so a per-second job down for a week
#: cannot stall start-up.
MAX_ENUMERATED = 1000


def missed_ticks(
    next_fire_time: Callable[[datetime | None, datetime], datetime | None],
    *,
    last_tick: datetime | None,
    now: datetime,
    grace: float,
    policy: MisfirePolicy,
) -> list[datetime]:
    """The missed ticks to run now, oldest first.

    ``next_fire_time(previous, after)`` is APScheduler's ``trigger.get_next_fire_time``; it is
    called with ``previous=None`` so that it answers the first fire time at or after ``after``
    (interval triggers must be anchored to a fixed ``start_date`` for all replicas to agree).
    Ticks strictly after ``last_tick`` and at or before ``now`` are missed; only those within
    ``grace`` seconds of ``now`` may run. With no ``last_tick`` (a job that never ran) nothing is
    missed.
    """
    if last_tick is None or policy is MisfirePolicy.SKIP:
        return []
    window_start = now - timedelta(seconds=grace)
    missed: list[datetime] = []
    cursor = max(shift(last_tick, 1e-6), window_start)
    for _ in range(MAX_ENUMERATED):
        try:
            fire = next_fire_time(None, cursor)
        except (OverflowError, ValueError):
            break  # a tick a hand edit put at the end of the calendar: nothing follows it
        if fire is None or fire > now:
            break
        if fire > last_tick:
            missed.append(fire)
        cursor = shift(fire, 1e-6)
    if policy is MisfirePolicy.COALESCE:
        return missed[-1:]
    return missed

"""How long a job lock's requests may take: as long as their result can still be used safely.

A lock's requests used to be bounded by ``Jobs(request_timeout=10)`` each, so an API server
slower than that failed every claim and every extension, though the grant it was writing would
have been good for minutes. Now (issue 22):

* a **claim** (its read, its conditional write, the re-read after a lost race) may take as long
  as a grant it brings would still be used: the grant is kept for two thirds of
  ``lock_at_most_for`` after its write was sent (:class:`~k8slease.jobs.lock.Grant`), and the
  tick runs only within its ``grace`` after the tick time. So a claim that succeeds late still
  runs the tick when the tick is still within its grace;
* an **extension** (and the release, which writes the run record) may take the time left of the
  grant's keep-alive budget, two thirds of ``lock_at_most_for`` after the last good write was
  sent: past that, the grant counts as lost and another replica may soon take the lock.

Every request's connect phase stays bounded by ``request_timeout``
(:func:`~k8slease.lease.budget.request_budget`).
"""

from __future__ import annotations

import math
from datetime import datetime

#: The share of ``lock_at_most_for`` a grant is kept after its last good write was sent.
KEEP_SHARE = 2 / 3


def keep_budget(lock_at_most_for: float) -> float:
    """Seconds a grant is kept after its last successful write was sent."""
    return lock_at_most_for * KEEP_SHARE


def claim_budget(
    lock_at_most_for: float,
    *,
    tick: datetime,
    grace: float | None,
    now: datetime,
    floor: float,
) -> float:
    """Seconds each request of a claim of ``tick``, begun at wall time ``now``, may take.

    The grant's own keep budget, and no longer than the tick stays within ``grace`` seconds
    (``None``: no grace bound, as for a lock used outside ``Jobs``; a tick already past its grace
    when the claim begins was fired on purpose, by hand or by catch-up, and is not cut short).
    Never below ``floor`` (``request_timeout``, the bound every request had before).
    """
    budget = keep_budget(lock_at_most_for)
    if grace is not None:
        left = grace - (now - tick).total_seconds()
        if left > 0:
            budget = min(budget, left)
    return max(floor, budget)


def remaining(last_ok_sent: float, lock_at_most_for: float, *, now: float, floor: float) -> float:
    """Seconds left, at monotonic ``now``, before a grant whose last good write was sent at
    ``last_ok_sent`` counts as lost: what an extension or a release may take (never below
    ``floor``, ``request_timeout``: a lost grant's run record is still worth writing)."""
    return max(floor, last_ok_sent + keep_budget(lock_at_most_for) - now)


def shortest_tick_period(latency: float, run_time: float) -> float:
    """The tick period above which a locked job runs every tick, each request taking
    ``latency`` seconds and a run ``run_time``: ``2 * latency + run_time``.

    A tick costs its holder two conditional writes in a row: the claim, then the release with
    the run record (the release is conditional on the claim's answer, so they cannot overlap).
    Until that release lands the other replicas see the lock held and skip, and the holder's
    scheduler, which runs one instance of a job at a time, drops a tick that fires while the
    previous one is still claiming, running or releasing (``job.ticks_dropped``, a WARNING).
    """
    return 2 * latency + run_time


def ticks_between_runs(
    period: float, latency: float, run_time: float, *, claim_wait: float = 0.0
) -> tuple[int, int]:
    """How many ticks apart a locked job's runs are, fewest and most (``(1, 1)``: every tick),
    when each request takes ``latency`` and the period is ``period``.

    A tick runs when a replica judges its claim after the previous run's release has landed,
    ``shortest_tick_period`` after that run's tick. A replica judges at the tick plus its wait
    in the tick's claim order (0 for the first, up to ``claim_wait``:
    ``min(replicas - 1, claim_spread) * claim_step``), so the next run comes at the first tick
    that fires no earlier than ``claim_wait`` before the release lands (fewest) and at the
    latest at the first tick that fires after it (most).
    """
    busy = shortest_tick_period(latency, run_time)
    if busy < period:
        return (1, 1)
    return (max(1, math.ceil((busy - claim_wait) / period)), math.floor(busy / period) + 1)

"""Catch-up: the ticks a job missed while every replica was down, replayed once on start.

Each ONCE_PER_TICK job (and each LEADER job when leadership begins) reads its Lease's claimed and
completed ticks; :func:`~k8slease.jobs.misfire.missed_ticks` applies the job's misfire policy;
the chosen ticks run through the job's runner, in order, as one one-shot scheduler job.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any

from apscheduler.schedulers.base import BaseScheduler
from apscheduler.triggers.date import DateTrigger

from k8slease.errors import TransportError
from k8slease.jobs.misfire import MisfirePolicy, missed_ticks
from k8slease.jobs.runner import TickRunner
from k8slease.logs import get_logger

log = get_logger("k8slease.jobs")


def schedule_catch_up(
    scheduler: BaseScheduler, runners: Sequence[TickRunner], *, now: datetime, executor: str
) -> None:
    """Submit missed ticks (per each job's misfire policy) as one-shot scheduler jobs."""
    for runner in runners:
        spec = runner.spec
        if spec.trigger is None or runner.lock is None or spec.misfire is MisfirePolicy.SKIP:
            continue
        bound = log.bind(group=runner.group, identity=runner.identity, job=spec.name)
        try:
            state = runner.lock.read_state()
        except TransportError as exc:
            bound.warning("jobs.catch_up_unavailable", error=str(exc))
            continue
        if state is None:
            continue
        last = state.claimed_tick or state.completed_tick
        ticks = missed_ticks(
            spec.trigger.get_next_fire_time,
            last_tick=last,
            now=now,
            grace=spec.grace,
            policy=spec.misfire,
        )
        if not ticks:
            continue
        bound.info("jobs.catch_up", ticks=[t.isoformat() for t in ticks], policy=spec.misfire.value)
        replay = (
            partial(_replay_async, runner.catch_up_async, ticks)
            if spec.is_coroutine
            else partial(_replay, runner.catch_up, ticks)
        )
        scheduler.add_job(
            replay,
            # the scheduler's own time: the one-shot job runs at once
            trigger=DateTrigger(run_date=datetime.now(UTC), timezone=UTC),
            name=f"{spec.name}:catch-up",
            executor=executor,
            misfire_grace_time=None,
        )


def _replay(run: Callable[[list[datetime]], Any], ticks: list[datetime], **_: Any) -> Any:
    """Run missed ``ticks`` (in order) through the job's runner; the catch-up job's own run time,
    passed as ``k8slease_tick``, is not a tick of the job and is ignored."""
    return run(ticks)


async def _replay_async(
    run: Callable[[list[datetime]], Awaitable[Any]], ticks: list[datetime], **_: Any
) -> Any:
    """The coroutine form of :func:`_replay`, so an ``AsyncIOScheduler`` awaits the catch-up."""
    return await run(ticks)

"""Catch-up: the ticks a job missed while every replica was down, replayed once on start.

Each ONCE_PER_TICK job (and each LEADER job when leadership begins) reads its Lease's claimed and
completed ticks; :func:`~k8slease.jobs.misfire.missed_ticks` applies the job's misfire policy;
the chosen ticks run through the job's runner, in order, as one one-shot scheduler job. A LEADER
job whose state cannot be read claims the newest tick within its grace all the same (the lock
judges whether it was claimed), so that a tick due between two terms is run or reported.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any

from apscheduler.schedulers.base import BaseScheduler
from apscheduler.triggers.date import DateTrigger

from k8slease.errors import TransportError
from k8slease.jobs.misfire import MisfirePolicy, missed_ticks
from k8slease.jobs.runner import TickRunner
from k8slease.jobs.spec import Mode
from k8slease.kube.microtime import shift


def schedule_catch_up(
    scheduler: BaseScheduler,
    runners: Sequence[TickRunner],
    *,
    now: datetime,
    executor: str,
    on_loop: bool,
) -> None:
    """Submit missed ticks (per each job's misfire policy) as one-shot scheduler jobs.

    ``on_loop``: the executor runs coroutine functions on an event loop (an ``AsyncIOScheduler``);
    with a thread executor a coroutine job's catch-up runs in a loop of its own, as its ticks do.
    """
    for runner in runners:
        spec = runner.spec
        if spec.trigger is None or runner.lock is None or spec.misfire is MisfirePolicy.SKIP:
            continue
        bound = runner.owner.log(spec.name)
        policy = spec.misfire
        last: datetime | None
        try:
            state = runner.lock.read_state()
        except TransportError as exc:
            bound.warning("jobs.catch_up_unavailable", error=str(exc))
            if spec.mode is not Mode.LEADER or spec.fail_open:
                continue
            # a LEADER tick that came due just before this term began (this replica's entry
            # paused, its take in flight; its leaderless watch ran once it led) runs nowhere
            # else: claim the newest tick within grace all the same. The lock passes over it if
            # it was claimed; not run, it is reported (leadership-ended, api-unreachable:
            # job.ticks_lost). Not with fail_open: that would run it without a lock (soak seeds
            # 8020, 8091)
            last, policy = shift(now, -spec.grace - 1e-6), MisfirePolicy.COALESCE
        else:
            if state is None:
                continue
            last = state.claimed_tick or state.completed_tick
        ticks = missed_ticks(
            spec.trigger.get_next_fire_time,
            last_tick=last,
            now=now,
            grace=spec.grace,
            policy=policy,
        )
        if not ticks:
            continue
        bound.info("jobs.catch_up", ticks=[t.isoformat() for t in ticks], policy=policy.value)
        replay: Callable[..., Any]
        if spec.is_coroutine and on_loop:
            replay = partial(_replay_async, runner.catch_up_async, ticks)
        elif spec.is_coroutine:
            replay = partial(_replay_in_own_loop, runner.catch_up_async, ticks)
        else:
            replay = partial(_replay, runner.catch_up, ticks)
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


def _replay_in_own_loop(
    run: Callable[[list[datetime]], Coroutine[Any, Any, Any]], ticks: list[datetime], **_: Any
) -> Any:
    """:func:`_replay_async` for a thread executor: a coroutine function handed to one is called
    and its coroutine dropped unawaited (the ticks would be lost), so run it to its end here."""
    return asyncio.run(run(ticks))

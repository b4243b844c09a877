"""A tick fired while this replica's previous run still holds the lock (``why=running``) is
reported like every other dropped tick: through :class:`DroppedTicks`, with the TicksDropped
Event, the ``dropped`` counter, once per outage, and the count when the job runs again."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from apscheduler.events import JobExecutionEvent
from apscheduler.executors.base import run_job
from apscheduler.job import Job
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger
from kubernetes import client

from k8slease import TickLock, TickSkipped
from k8slease.jobs.context import JobContext
from k8slease.jobs.dropped import DroppedTicks
from k8slease.jobs.executors import _TickView
from k8slease.jobs.runner import TickRunner
from k8slease.jobs.spec import JobSpec, Mode
from tests.support.fakeclock import FakeClock
from tests.support.jobleases import R0, LosingStore, job_lock
from tests.support.recorders import CountedSkips, PostedEvents

JOB_ID = "k8slease:g:job"


def _executed(fire: Any, tick: Any) -> JobExecutionEvent:
    """Run ``fire`` for ``tick`` the way a k8slease executor does; the EXECUTED event."""
    job = Job(
        BackgroundScheduler(),
        id=JOB_ID,
        func=fire,
        args=(),
        kwargs={},
        trigger=IntervalTrigger(seconds=2),
        executor="default",
        name="job",
        misfire_grace_time=None,  # the fake clock's ticks are not real time
        coalesce=True,
        max_instances=1,
        next_run_time=None,
    )
    (event,) = run_job(_TickView(job, tick), "default", [tick], "apscheduler")
    assert isinstance(event, JobExecutionEvent)
    return event


@pytest.mark.parametrize("coroutine", [False, True], ids=["function", "coroutine"])
def test_a_tick_fired_while_the_previous_run_holds_the_lock_posts_the_event_and_counts(
    caplog: pytest.LogCaptureFixture, coroutine: bool
) -> None:
    clock = FakeClock()
    counted, posted = CountedSkips(), PostedEvents()
    dropped = DroppedTicks(group="g", names={JOB_ID: "job"}, events=posted, metrics=counted)
    runner: TickRunner | None = None
    inner: list[JobExecutionEvent] = []

    def body(ctx: JobContext) -> None:
        assert runner is not None
        for s in (2, 4):  # two ticks fire while this run still holds the lock
            event = _executed(runner.bind(on_loop=False), ctx.tick + timedelta(seconds=s))
            inner.append(event)
            dropped(event)

    async def body_async(ctx: JobContext) -> None:
        await asyncio.to_thread(body, ctx)  # a thread of its own: the fire runs a loop of its own

    spec = JobSpec(
        name="job",
        func=body_async if coroutine else body,
        mode=Mode.ONCE_PER_TICK,
        trigger=IntervalTrigger(seconds=2),
    )
    runner = TickRunner(
        spec,
        R0,
        lock=job_lock(LosingStore(), clock),
        clock=clock,
        metrics=counted,
    )  # one metrics object for the runner and the listener, as in Jobs
    with caplog.at_level(logging.DEBUG, logger="k8slease"):
        first = _executed(runner.bind(on_loop=False), clock.now())
        dropped(first)

    assert first.retval == "succeeded"
    warned = [
        (getattr(r, "k8slease_event", ""), getattr(r, "k8slease_fields", {}))
        for r in caplog.records
        if r.levelno == logging.WARNING
    ]
    assert [e for e, _ in warned] == ["job.ticks_dropped", "job.ticks_dropped_ended"]
    assert warned[0][1]["why"] == "running"
    assert warned[0][1]["tick"] == (clock.now() + timedelta(seconds=2)).isoformat()
    assert warned[1][1]["dropped"] == 2
    again = [
        getattr(r, "k8slease_fields", {})
        for r in caplog.records
        if getattr(r, "k8slease_event", "") == "job.ticks_dropped_again"
    ]  # the second tick of the outage is still named
    assert [(f["tick"], f["why"]) for f in again] == [
        ((clock.now() + timedelta(seconds=4)).isoformat(), "running")
    ]
    assert [(e["reason"], e["type"]) for e in posted.events] == [("TicksDropped", "Warning")]
    assert posted.events[0]["involved"]["metadata"]["name"].endswith("job")
    assert counted.skips == [("g", "job", "dropped")] * 2  # each tick once, not also `locked`


def test_a_tick_lock_claimed_while_this_replica_still_runs_the_previous_one_is_skipped_running(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Outside the scheduler (``TickLock.hold``) the same tick is a ``TickSkipped`` with reason
    ``running`` and the runner's own warning, as before: no listener would report it."""
    clock = FakeClock()
    ticks = TickLock(
        "g", namespace="default", identity="r0", api_client=client.ApiClient(), clock=clock
    )
    # no API server in unit tests: a fake store, no Events
    ticks._wiring = replace(ticks._io(), transport=LosingStore(), events=None)  # type: ignore[arg-type]
    tick = clock.now()
    with (
        caplog.at_level(logging.DEBUG, logger="k8slease"),
        ticks.hold("job", tick=tick, lock_at_most_for=60),
        pytest.raises(TickSkipped) as skipped,
        ticks.hold("job", tick=tick + timedelta(seconds=60), lock_at_most_for=60),
    ):
        raise AssertionError("must not run")  # pragma: no cover
    assert skipped.value.reason == "running"
    warned = [
        getattr(r, "k8slease_fields", {})
        for r in caplog.records
        if getattr(r, "k8slease_event", "") == "job.ticks_dropped"
    ]
    assert [(f["why"], f["tick"]) for f in warned] == [
        ("running", (tick + timedelta(seconds=60)).isoformat())
    ]

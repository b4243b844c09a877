"""Job shapes every form accepts (issue 21): ``async def`` jobs catch up missed ticks under a
thread scheduler too, and jobs that take no argument run (APScheduler habit)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from k8slease import JobContext, Jobs, Mode
from k8slease.errors import ConfigError
from tests.support.factories import JobsFactory, hourly_catch_up
from tests.support.fakeclock import ShiftedClock
from tests.support.recorders import SeenTicks

T0 = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)


def test_coroutine_jobs_catch_up_on_a_thread_scheduler(new_jobs: JobsFactory) -> None:
    """``jobs.run()`` / ``with jobs`` use a thread scheduler: the catch-up of an ``async def`` job
    must be awaited there too (it was dropped: "coroutine ... was never awaited")."""
    ran = threading.Event()
    hourly = SeenTicks(ran)

    def make(identity: str, now: datetime) -> Jobs:
        clock = ShiftedClock(now)
        return hourly_catch_up(
            new_jobs,
            "threadcatchup",
            hourly.job,
            identity=identity,
            clock=clock,
            handle_signals=False,
        )

    with make("before", T0 - timedelta(hours=1)) as before:
        before.fire("hourly", T0 - timedelta(hours=1))
    hourly.ticks.clear()
    ran.clear()
    with make("after", datetime(2026, 11, 30, 5, 30, tzinfo=UTC)):
        assert ran.wait(10), "the missed tick of the async job was caught up"
    assert hourly.ticks == [T0 + timedelta(hours=3)]


@pytest.mark.parametrize("mode", [Mode.EVERY_REPLICA, Mode.ONCE_PER_TICK])
def test_a_job_without_a_parameter_runs(mode: Mode, new_jobs: JobsFactory) -> None:
    jobs = new_jobs("noarg", identity="a", handle_signals=False)
    ran = threading.Event()

    # an interval the scheduler does not reach during the test: a scheduled tick claimed first
    # (a later tick) would rightly make the fired, older one a skip
    @jobs.interval(hours=1, mode=mode)
    def tick() -> None:
        ran.set()

    with jobs:
        assert jobs.fire("tick", datetime(2026, 11, 30, 2, 0, tzinfo=UTC)) == "succeeded"
        assert ran.is_set()


def test_a_singleton_without_a_parameter_runs(new_jobs: JobsFactory) -> None:
    jobs = new_jobs(
        "noargsingleton",
        identity="a",
        handle_signals=False,
    )
    ran = threading.Event()

    @jobs.singleton(mode=Mode.EVERY_REPLICA)
    def forever() -> None:
        ran.set()
        jobs_stopped.wait()

    jobs_stopped = threading.Event()
    with jobs:
        assert ran.wait(10)
        jobs_stopped.set()


def test_a_job_that_needs_two_arguments_is_refused_at_registration() -> None:
    jobs = Jobs("twoargs", namespace="default", identity="a")

    def report(ctx: JobContext, period: str) -> None: ...

    with pytest.raises(ConfigError, match=r"job 'report'.*one argument .*or none"):
        jobs.interval(seconds=1)(report)

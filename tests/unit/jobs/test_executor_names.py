"""Issue 23: APScheduler's own log lines name the job and the group, never an object address."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest
from apscheduler.job import Job
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.date import DateTrigger

from k8slease.jobs.executors import TICK_KWARG, TickThreadPoolExecutor, _TickView

#: a tick within the grace of now: APScheduler skips one that is missed
TICK = datetime.now(UTC).replace(microsecond=0)


def _failing(**kwargs: object) -> None:
    raise RuntimeError("the job failed")


def test_a_job_that_raises_is_logged_by_its_group_and_name(
    caplog: pytest.LogCaptureFixture,
) -> None:
    scheduler = BackgroundScheduler(timezone=UTC)
    executor = TickThreadPoolExecutor(max_workers=1)
    scheduler.add_executor(executor, alias="k8slease")
    job = Job(
        scheduler,
        id="k8slease:billing:nightly",
        func=_failing,
        name="nightly",
        trigger=DateTrigger(TICK),
        executor="k8slease",
        args=(),
        kwargs={},
        misfire_grace_time=3600,
        coalesce=True,
        max_instances=1,
        next_run_time=TICK,
    )
    view = _TickView(job, TICK)
    assert view.kwargs[TICK_KWARG] == TICK
    assert "object at 0x" not in str(view) and "object at 0x" not in repr(view)
    assert str(view) == f"k8slease:billing:nightly tick {TICK}"
    with caplog.at_level(logging.DEBUG):
        executor.start(scheduler, "k8slease")
        try:
            executor.submit_job(job, [TICK])
        finally:
            executor.shutdown(wait=True)
    text = caplog.text
    assert f'Job "k8slease:billing:nightly tick {TICK}" raised an exception' in text, text
    assert "object at 0x" not in text

"""SchedulerRuns: waiting, after ``pause()``, for the job runs a scheduler has in progress (what
``wrap()`` holds the release back for), and saying so when APScheduler's internals are not
there to tell."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from apscheduler.jobstores.memory import MemoryJobStore
from apscheduler.schedulers.background import BackgroundScheduler

from k8slease.jobs.schedruns import SchedulerRuns

#: seconds a wait that must not end yet is watched
STILL = 0.3


class GatedStore(MemoryJobStore):  # type: ignore[misc]
    """A job store whose next look for due jobs, once armed, stops until ``gate`` is set: a
    job-processing pass that is under way (past its paused check) but has not submitted yet."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False
        self.in_pass, self.gate = threading.Event(), threading.Event()

    def get_due_jobs(self, now: datetime) -> list[Any]:
        if self.armed:
            self.armed = False
            self.in_pass.set()
            self.gate.wait(10)
        due: list[Any] = super().get_due_jobs(now)
        return due


@pytest.fixture
def scheduler() -> Iterator[BackgroundScheduler]:
    made = BackgroundScheduler(timezone=UTC)
    yield made
    if made.running:
        made.shutdown(wait=False)


def waiting(runs: SchedulerRuns, give_up: Callable[[], bool] = lambda: False) -> threading.Event:
    """``runs.wait_idle(give_up)`` on a daemon thread; set when it returned."""
    done = threading.Event()

    def wait() -> None:
        runs.wait_idle(give_up=give_up)
        done.set()

    threading.Thread(target=wait, daemon=True).start()
    return done


def test_a_pass_under_way_when_paused_and_the_run_it_submits_are_waited_for(
    scheduler: BackgroundScheduler,
) -> None:
    store = GatedStore()
    scheduler.add_jobstore(store, "gated")
    runs = SchedulerRuns(scheduler)
    running, finish = threading.Event(), threading.Event()

    def job() -> None:
        running.set()
        finish.wait(10)

    scheduler.start(paused=True)
    scheduler.add_job(job, next_run_time=datetime.now(UTC), jobstore="gated")
    store.armed = True
    scheduler.resume()
    assert store.in_pass.wait(5)
    scheduler.pause()  # the pass has read the state already: it still submits the job
    done = waiting(runs)
    assert not done.wait(STILL), "returned while a pass could still submit"
    store.gate.set()
    assert running.wait(5), "the pass under way did not submit the job"
    assert not done.wait(STILL), "returned while the job ran"
    finish.set()
    assert done.wait(5)


def test_an_idle_paused_scheduler_is_not_waited_for(scheduler: BackgroundScheduler) -> None:
    runs = SchedulerRuns(scheduler)
    scheduler.start(paused=True)
    done = waiting(runs)
    assert done.wait(5)


def test_a_newer_term_ends_the_wait(scheduler: BackgroundScheduler) -> None:
    runs = SchedulerRuns(scheduler)
    finish, running = threading.Event(), threading.Event()

    def job() -> None:
        running.set()
        finish.wait(10)

    scheduler.start()
    scheduler.add_job(job, next_run_time=datetime.now(UTC))
    assert running.wait(5)
    scheduler.pause()
    newer = threading.Event()
    done = waiting(runs, give_up=newer.is_set)
    assert not done.wait(STILL)
    newer.set()
    runs.wake()
    assert done.wait(5)
    finish.set()


def test_without_the_scheduler_s_internals_it_warns_and_does_not_wait(
    scheduler: BackgroundScheduler, caplog: pytest.LogCaptureFixture
) -> None:
    del scheduler._executors_lock
    runs = SchedulerRuns(scheduler)
    with caplog.at_level(logging.WARNING, logger="k8slease"):
        runs.wait_idle(give_up=lambda: False)
    [record] = caplog.records
    assert "scheduler.runs_not_awaited" in record.getMessage()
    assert "_executors_lock" in record.getMessage()


def test_without_an_executor_s_internals_it_warns_and_does_not_wait(
    scheduler: BackgroundScheduler, caplog: pytest.LogCaptureFixture
) -> None:
    runs = SchedulerRuns(scheduler)
    scheduler.start(paused=True)
    del scheduler._executors["default"]._instances
    with caplog.at_level(logging.WARNING, logger="k8slease"):
        runs.wait_idle(give_up=lambda: False)
    [record] = caplog.records
    assert "executor._instances" in record.getMessage()

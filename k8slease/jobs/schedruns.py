"""The job runs in progress of an APScheduler 3 scheduler, and waiting for them to end.

:func:`~k8slease.jobs.wrap.wrap` pauses a scheduler when leadership ends, but ``pause()`` stops
no run in progress, and a released Lease lets another replica's scheduler start the same jobs.
So the runs in progress are the term's work: the term's ``on_started_leading`` returns (and the
elector releases) only once they are over (:meth:`SchedulerRuns.wait_idle`).

APScheduler 3 has no public way to wait for the runs in progress short of ``shutdown(wait=True)``,
which ends the scheduler. What this takes from its internals is kept to :func:`_running` and
:meth:`SchedulerRuns._count_passes`, the same in 3.10.4 and 3.11:

* ``scheduler._process_jobs()``, one job-processing pass: it reads the paused state once at its
  start, then submits the due jobs (under ``scheduler._jobstores_lock``). A pass under way when
  the scheduler is paused still submits; every pass is counted while it runs (the method is
  replaced on the instance: every scheduler class calls it as ``self._process_jobs``).
* ``scheduler._executors`` (alias -> executor), under ``scheduler._executors_lock``.
* ``executor._instances`` (job id -> instances running), under ``executor._lock`` (``None``
  until the executor is started): raised in ``submit_job``, lowered in ``_run_job_success`` and
  ``_run_job_error`` before any event is dispatched.

When one of them is missing (another APScheduler), :meth:`SchedulerRuns.wait_idle` says so at
WARNING and returns at once: the release is then not held back for the scheduler's runs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_EXECUTED, EVENT_JOB_MISSED
from apscheduler.schedulers.base import BaseScheduler

from k8slease.logs import get_logger

log = get_logger("k8slease.wrap")

#: Seconds between looks at the running count while waiting. Runs that end dispatch
#: ``EVENT_JOB_EXECUTED``/``EVENT_JOB_ERROR``/``EVENT_JOB_MISSED`` and wake the wait at once; only
#: a run whose executor failed around it (``_run_job_error``: a broken process pool, a
#: cancelled asyncio task) ends without any event, and is seen within this bound instead.
RECHECK = 0.2

_SCHEDULER_PARTS = ("_process_jobs", "_executors", "_executors_lock")
_EXECUTOR_PARTS = ("_instances", "_lock")


def _running(scheduler: BaseScheduler) -> int | None:
    """How many job instances run now on ``scheduler``'s executors; None: it cannot be told
    (an executor without APScheduler 3's ``_instances``/``_lock``)."""
    with scheduler._executors_lock:
        executors = list(scheduler._executors.values())
    total = 0
    for executor in executors:
        if not all(hasattr(executor, part) for part in _EXECUTOR_PARTS):
            return None
        lock: Any = executor._lock
        if lock is None:  # not started: nothing was submitted to it
            continue
        with lock:
            total += sum(executor._instances.values())
    return total


class SchedulerRuns:
    """Watches one scheduler's job-processing passes and job runs, for :meth:`wait_idle`."""

    def __init__(self, scheduler: BaseScheduler) -> None:
        self._scheduler = scheduler
        self._changed = threading.Condition()
        self._passes = 0
        self._wakes = 0  # raised on every change worth a new look, so none is missed
        self.missing = [part for part in _SCHEDULER_PARTS if not hasattr(scheduler, part)]
        if not self.missing:
            self._count_passes()
            scheduler.add_listener(
                self._run_ended, EVENT_JOB_EXECUTED | EVENT_JOB_ERROR | EVENT_JOB_MISSED
            )

    def _count_passes(self) -> None:
        process_jobs: Callable[[], float | None] = self._scheduler._process_jobs

        def counted() -> float | None:
            with self._changed:
                self._passes += 1
            try:
                return process_jobs()
            finally:
                with self._changed:
                    self._passes -= 1
                    self._wakes += 1
                    self._changed.notify_all()

        self._scheduler._process_jobs = counted  # type: ignore[method-assign]

    def _run_ended(self, event: object) -> None:
        self.wake()

    def wake(self) -> None:
        """Have :meth:`wait_idle` look again (its ``give_up`` may have changed)."""
        with self._changed:
            self._wakes += 1
            self._changed.notify_all()

    def wait_idle(self, give_up: Callable[[], bool]) -> None:
        """Return once the paused scheduler submits no more and runs no job, or ``give_up()``.

        Call after pausing: a pass that began before the pause is waited for (it may still
        submit), one that begins after returns at once; then the runs in progress.
        """
        if self.missing:
            self._cannot_tell(", ".join(f"scheduler.{part}" for part in self.missing))
            return
        while True:
            with self._changed:
                if give_up():
                    return
                passes, seen = self._passes, self._wakes
            # The running count is read without holding the condition: a run that ends takes it
            # to wake this wait, possibly from a thread that holds the scheduler's locks (a
            # shutdown(wait=True) joining its pool).
            if passes == 0:
                running = _running(self._scheduler)
                if running is None:
                    self._cannot_tell("executor._instances/_lock")
                    return
                if running == 0:
                    return
            with self._changed:
                if self._wakes == seen:
                    self._changed.wait(RECHECK)

    def _cannot_tell(self, missing: str) -> None:
        log.warning(
            "scheduler.runs_not_awaited",
            missing=missing,
            note="APScheduler internals changed: the release does not wait for running jobs",
        )

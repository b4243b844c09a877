"""Bind an APScheduler scheduler you already have to a ``LeaderElector``.

For apps that keep their own scheduler and want every job on it to run on the leader only:
``wrap(scheduler, elector)`` starts the scheduler paused and resumes it while this replica leads,
pausing it the moment leadership ends (before anyone else can take over). Jobs registered through
:class:`~k8slease.jobs.registry.Jobs` get finer control (per-job classes, locks, run records).

The runs of the scheduler's jobs in progress when it is paused are the term's work: the term's
``on_started_leading`` returns only once they are over
(:class:`~k8slease.jobs.schedruns.SchedulerRuns`), and the elector sends no release before that
(up to the moment others could take over; past it the Lease expires instead). On a graceful stop
another replica's scheduler therefore never starts a job beside a run of this one.
"""

from __future__ import annotations

import contextlib
import inspect
import threading

from apscheduler.schedulers import SchedulerNotRunningError
from apscheduler.schedulers.base import STATE_PAUSED, STATE_STOPPED, BaseScheduler

from k8slease.callbacks import call_with_optional
from k8slease.election.elector import LeaderElector
from k8slease.election.hooks import LeadershipCallback
from k8slease.election.leadership import LeadershipContext
from k8slease.errors import ConfigError
from k8slease.jobs.schedruns import SchedulerRuns
from k8slease.logs import get_logger

log = get_logger("k8slease.wrap")


def wrap(scheduler: BaseScheduler, elector: LeaderElector) -> BaseScheduler:
    """Run ``scheduler`` only while ``elector`` leads; returns the scheduler.

    Call before ``elector.start()``. Callbacks already set on the elector still run: after the
    scheduler is resumed, and after it is paused. A stopped scheduler is started paused now (an
    ``AsyncIOScheduler`` needs a running event loop for that). When leadership ends, the release
    of the Lease waits for the jobs the scheduler is running then (see the module's notes).
    """
    started_before = elector.on_started_leading
    stopped_before = elector.on_stopped_leading
    for callback in (started_before, stopped_before):
        if callback is not None and inspect.iscoroutinefunction(callback):
            raise ConfigError("wrap() chains only plain (non-async) elector callbacks")
    binding = _Binding(scheduler, started_before, stopped_before)
    elector.on_started_leading = binding.on_started
    elector.on_stopped_leading = binding.on_stopped
    if scheduler.state == STATE_STOPPED:
        scheduler.start(paused=True)
    elif scheduler.state != STATE_PAUSED:
        scheduler.pause()
    return scheduler


class _Binding:
    """The elector callbacks of one wrapped scheduler."""

    def __init__(
        self,
        scheduler: BaseScheduler,
        started_before: LeadershipCallback | None,
        stopped_before: LeadershipCallback | None,
    ) -> None:
        self.scheduler = scheduler
        self.started_before = started_before
        self.stopped_before = stopped_before
        self.runs = SchedulerRuns(scheduler)
        self._lock = threading.Lock()
        #: the term the scheduler runs for (the latest started); an ended term's work stops
        #: waiting for the runs once a newer term has resumed the scheduler
        self._term: LeadershipContext | None = None

    def on_started(self, ctx: LeadershipContext) -> None:
        """The term's work (its own thread): resume, and once the term is lost pause and wait
        for the job runs in progress, so that the elector releases only after them."""
        with self._lock:
            self._term = ctx
            if self.scheduler.state == STATE_STOPPED:
                self.scheduler.start()
            else:
                self.scheduler.resume()
        self.runs.wake()
        log.info("scheduler.resumed", lease=ctx.lease_name, fencing_token=ctx.fencing_token)
        try:
            if self.started_before is not None:
                call_with_optional(self.started_before, ctx)
        except Exception:  # the term goes on: its runs must still be waited for at its end
            log.exception("leader.callback_failed", callback="on_started_leading (wrapped)")
        ctx.lost.wait()
        with self._lock:
            if self._term is not ctx:
                return
            self._pause()  # on_stopped may not have run yet: no new run may start meanwhile
        self.runs.wait_idle(give_up=lambda: self._term is not ctx)
        log.info("scheduler.runs_ended", lease=ctx.lease_name, fencing_token=ctx.fencing_token)

    def on_stopped(self, ctx: LeadershipContext) -> None:
        with self._lock:
            self._pause()
        log.info("scheduler.paused", lease=ctx.lease_name)
        if self.stopped_before is not None:
            call_with_optional(self.stopped_before, ctx)

    def _pause(self) -> None:
        # a scheduler the app shut down starts no new run either
        with contextlib.suppress(SchedulerNotRunningError):
            self.scheduler.pause()

"""Bind an APScheduler scheduler you already have to a ``LeaderElector``.

For apps that keep their own scheduler and want every job on it to run on the leader only:
``wrap(scheduler, elector)`` starts the scheduler paused and resumes it while this replica leads,
pausing it the moment leadership ends (before anyone else can take over). Jobs registered through
:class:`~k8slease.jobs.registry.Jobs` get finer control (per-job classes, locks, run records).
"""

from __future__ import annotations

import inspect

from apscheduler.schedulers.base import STATE_PAUSED, STATE_STOPPED, BaseScheduler

from k8slease.callbacks import call_with_optional
from k8slease.election.elector import LeaderElector
from k8slease.election.leadership import LeadershipContext
from k8slease.errors import ConfigError
from k8slease.logs import get_logger

log = get_logger("k8slease.wrap")


def wrap(scheduler: BaseScheduler, elector: LeaderElector) -> BaseScheduler:
    """Run ``scheduler`` only while ``elector`` leads; returns the scheduler.

    Call before ``elector.start()``. Callbacks already set on the elector still run: after the
    scheduler is resumed, and after it is paused. A stopped scheduler is started paused now (an
    ``AsyncIOScheduler`` needs a running event loop for that).
    """
    started_before = elector.on_started_leading
    stopped_before = elector.on_stopped_leading
    for callback in (started_before, stopped_before):
        if callback is not None and inspect.iscoroutinefunction(callback):
            raise ConfigError("wrap() chains only plain (non-async) elector callbacks")

    def on_started(ctx: LeadershipContext) -> None:
        if scheduler.state == STATE_STOPPED:
            scheduler.start()
        else:
            scheduler.resume()
        log.info("scheduler.resumed", lease=ctx.lease_name, fencing_token=ctx.fencing_token)
        if started_before is not None:
            call_with_optional(started_before, ctx)
        ctx.lost.wait()

    def on_stopped(ctx: LeadershipContext) -> None:
        if scheduler.state != STATE_STOPPED:
            scheduler.pause()
        log.info("scheduler.paused", lease=ctx.lease_name)
        if stopped_before is not None:
            call_with_optional(stopped_before, ctx)

    elector.on_started_leading = on_started
    elector.on_stopped_leading = on_stopped
    if scheduler.state == STATE_STOPPED:
        scheduler.start(paused=True)
    elif scheduler.state != STATE_PAUSED:
        scheduler.pause()
    return scheduler

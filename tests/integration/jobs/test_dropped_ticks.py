"""Hole 4 of issue 15 (ticks dropped while a claim waits): with ``max_instances=1`` APScheduler
drops a tick while the previous one still waits on the API server. Each outage is reported once:
one warning, one TicksDropped Event; every dropped tick is counted."""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from apscheduler.schedulers.background import BackgroundScheduler

from k8slease import Jobs
from k8slease.jobs.dropped import MASK, DroppedTicks
from k8slease.testing.server import APIServer
from tests.support.recorders import CountedSkips, PostedEvents


def test_ticks_dropped_while_a_run_waits_are_reported_once_per_outage(
    caplog: pytest.LogCaptureFixture,
) -> None:
    scheduler = BackgroundScheduler(timezone=UTC)
    release = threading.Event()
    posted, counted = PostedEvents(), CountedSkips()
    reporter = DroppedTicks(group="g", names={"g:slow": "slow"}, events=posted, metrics=counted)

    scheduler.add_listener(reporter, MASK)
    scheduler.add_job(
        release.wait,
        "interval",
        seconds=0.05,
        id="g:slow",
        max_instances=1,
        next_run_time=datetime.now(UTC) + timedelta(seconds=0.01),
    )
    with caplog.at_level(logging.DEBUG, logger="k8slease"):
        scheduler.start()
        try:
            assert counted.third.wait(10), "the scheduler never dropped a tick"
            assert posted.first.wait(10)
        finally:
            release.set()
            scheduler.shutdown(wait=True)
    assert posted.reasons == ["TicksDropped"]
    assert set(counted.reasons) == {"dropped"} and len(counted.reasons) >= 3
    warnings = [e for e in caplog_events(caplog) if e["event"] == "job.ticks_dropped"]
    assert len(warnings) == 1 and warnings[0]["why"] == "max-instances"


def test_jobs_attach_the_reporter_to_their_scheduler(k8s_embedded_apiserver: APIServer) -> None:
    jobs = Jobs(group="g", api_client=k8s_embedded_apiserver.api_client(), namespace="default")

    @jobs.interval(seconds=3600, name="hourly")
    def hourly(ctx: Any) -> None: ...

    jobs.start()
    try:
        scheduler = jobs.scheduler
        assert scheduler is not None
        listeners = [cb for cb, _ in scheduler._listeners]
        assert any(isinstance(cb, DroppedTicks) for cb in listeners)
    finally:
        jobs.stop()


def caplog_events(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    """The k8slease events captured, each as its fields with ``event`` set."""
    return [
        {**getattr(r, "k8slease_fields", {}), "event": getattr(r, "k8slease_event", "")}
        for r in caplog.records
    ]


def test_a_tick_due_while_a_stop_waits_for_the_run_is_reported(
    k8s_api_client: Any, k8s_namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A stopping scheduler fires nothing, so a run that lasts past the job's next tick drops
    that tick without APScheduler's max-instances event, and the other replicas skip it as held
    (DEBUG): the stopping replica reports it (seen once in the jobs chaos scenario's rolling
    restart: a tick nobody ran, nobody reported)."""
    jobs = Jobs(group="stopping", api_client=k8s_api_client, namespace=k8s_namespace, identity="r0")
    running, finish = threading.Event(), threading.Event()
    ticks: list[datetime] = []

    @jobs.interval(seconds=1, lock_at_most_for=30, name="tick")
    def tick(ctx: Any) -> None:
        ticks.append(ctx.tick)
        running.set()
        finish.wait(30)

    with caplog.at_level(logging.DEBUG, logger="k8slease"):
        jobs.start()
        assert running.wait(20), "the job never ran"
        stopper = threading.Thread(target=jobs.stop)
        stopper.start()
        # the next tick comes due while the stop waits (wall time: APScheduler's own clock)
        next_tick = ticks[0] + timedelta(seconds=1)
        finish.wait(max(0.0, (next_tick - datetime.now(UTC)).total_seconds()) + 0.3)
        finish.set()
        stopper.join(30)
        assert not stopper.is_alive()
    warnings = [e for e in caplog_events(caplog) if e["event"] == "job.ticks_dropped"]
    assert [w["why"] for w in warnings] == ["stopping"], warnings
    assert datetime.fromisoformat(warnings[0]["tick"]) == next_tick
    assert warnings[0]["ticks"] >= 1
    assert len(ticks) == 1

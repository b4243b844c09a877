"""Ticks the scheduler dropped are reported at WARNING with their count when the outage ends."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest
from apscheduler.events import (
    EVENT_JOB_EXECUTED,
    EVENT_JOB_MAX_INSTANCES,
    EVENT_JOB_MISSED,
    JobExecutionEvent,
    JobSubmissionEvent,
)

from k8slease.jobs.dropped import DroppedTicks

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def test_the_end_of_a_drop_outage_is_a_warning_with_the_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dropped = DroppedTicks(group="g", names={"k8slease:g:tick": "tick"})
    with caplog.at_level(logging.DEBUG, logger="k8slease"):
        for s in (0, 10, 20):
            tick = T0 + timedelta(seconds=s)
            dropped(JobSubmissionEvent(EVENT_JOB_MAX_INSTANCES, "k8slease:g:tick", None, [tick]))
        dropped(JobExecutionEvent(EVENT_JOB_EXECUTED, "k8slease:g:tick", None, T0))
    ended = [
        r for r in caplog.records if getattr(r, "k8slease_event", "") == "job.ticks_dropped_ended"
    ]
    assert len(ended) == 1 and ended[0].levelno == logging.WARNING
    assert getattr(ended[0], "k8slease_fields", {})["dropped"] == 3


class _Counted:
    def __init__(self) -> None:
        self.skips: list[tuple[str, str, str]] = []

    def skipped(self, group: str, job: str, reason: str) -> None:
        self.skips.append((group, job, reason))


def test_a_missed_leaderless_watch_names_the_tick_at_warning_and_counts_when_it_runs_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 26, the simulation's ``watch-missed`` gap: the one replica that knew nobody led
    (it had stepped down on seeing a hand edit) was stalled across a LEADER tick, so APScheduler
    missed its leaderless watch past the watch's grace, and no replica said the tick was lost.
    The miss is now warned about, naming the tick (this replica could not judge it)."""
    counted = _Counted()
    watch = "k8slease:g:nightly:leaderless"
    dropped = DroppedTicks(
        group="g",
        names={"k8slease:g:nightly": "nightly"},
        metrics=counted,
        watches={watch: "nightly"},
    )
    with caplog.at_level(logging.DEBUG, logger="k8slease"):
        for s in (0, 10):
            dropped(JobExecutionEvent(EVENT_JOB_MISSED, watch, None, T0 + timedelta(seconds=s)))
        dropped(JobExecutionEvent(EVENT_JOB_EXECUTED, watch, None, T0 + timedelta(seconds=20)))

    warned = [
        (getattr(r, "k8slease_event", ""), getattr(r, "k8slease_fields", {}))
        for r in caplog.records
        if r.levelno == logging.WARNING
    ]
    assert [e for e, _ in warned] == [
        "job.leaderless_watch_missed",
        "job.leaderless_watch_missed_ended",
    ]
    assert warned[0][1]["tick"] == T0.isoformat() and warned[0][1]["job"] == "nightly"
    assert warned[1][1]["missed"] == 2
    assert counted.skips == [("g", "nightly", "watch-missed")] * 2
    assert dropped.dropped("nightly") == 0  # the job's own outage is a different one


def test_the_leaderless_watch_is_listened_to_for_misses() -> None:
    """``schedule_jobs`` hands the LEADER jobs' leaderless watch ids to the listener."""
    from apscheduler.schedulers.background import BackgroundScheduler
    from apscheduler.triggers.interval import IntervalTrigger

    from k8slease.jobs.runner import TickRunner
    from k8slease.jobs.spec import JobSpec, Mode
    from k8slease.jobs.wiring import leaderless_id, schedule_jobs
    from k8slease.metrics import NoopJobMetrics
    from tests.support.fakeclock import FakeClock
    from tests.support.jobleases import R0

    spec = JobSpec(
        name="nightly", func=lambda ctx: None, mode=Mode.LEADER, trigger=IntervalTrigger(seconds=5)
    )
    runner = TickRunner(spec, R0, lock=None)
    scheduler = BackgroundScheduler(timezone=UTC)
    listener = schedule_jobs(
        scheduler,
        [spec],
        {"nightly": runner},
        group="g",
        machine=lambda: None,
        events=None,  # type: ignore[arg-type]
        clock=FakeClock(),
        metrics=NoopJobMetrics(),
    )
    assert listener._watches == {leaderless_id("g", "nightly"): "nightly"}

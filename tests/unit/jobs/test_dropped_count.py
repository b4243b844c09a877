"""Ticks the scheduler dropped are reported at WARNING with their count when the outage ends."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest
from apscheduler.events import (
    EVENT_JOB_EXECUTED,
    EVENT_JOB_MAX_INSTANCES,
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

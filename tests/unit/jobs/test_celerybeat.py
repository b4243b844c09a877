"""The Celery beat integration's pure parts: the tick of a due entry (every replica must compute
the same one) and the job name of an entry (two entries never share a lock)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

pytest.importorskip("celery", reason="the celery extra is not installed")

from celery.schedules import BaseSchedule, crontab, schedule

from k8slease.errors import ConfigError
from k8slease.jobs.celerybeat import due_tick, entry_job_name
from k8slease.kube.validate import is_dns_label

T = datetime(2026, 11, 29, 2, 7, 10, 123456, tzinfo=UTC)  # a Sunday


def test_an_interval_entry_s_tick_is_now_floored_to_its_period_whatever_its_last_run() -> None:
    every_10s = schedule(timedelta(seconds=10))
    for last in (T - timedelta(seconds=3), T - timedelta(days=3), datetime(2020, 1, 1, tzinfo=UTC)):
        assert due_tick(every_10s, last_run_at=last, now=T) == T.replace(second=10, microsecond=0)
    # a naive now (enable_utc with a naive clock) is read as UTC
    assert due_tick(every_10s, last_run_at=T, now=T.replace(tzinfo=None)) == T.replace(
        second=10, microsecond=0
    )


def test_a_crontab_entry_s_tick_is_its_newest_occurrence_missed_ones_coalesced() -> None:
    every_5_min = crontab(minute="*/5")
    at = T.replace(minute=5, second=0, microsecond=0)
    assert due_tick(every_5_min, last_run_at=T - timedelta(minutes=3), now=T) == at
    assert due_tick(every_5_min, last_run_at=T - timedelta(days=40), now=T) == at
    exactly = T.replace(minute=10, second=0, microsecond=0)
    assert due_tick(every_5_min, last_run_at=at, now=exactly) == exactly


def test_crontab_days_of_week_keep_celery_s_numbering() -> None:
    sundays_at_2 = crontab(minute=0, hour=2, day_of_week=0)  # 0 is Sunday in Celery
    assert due_tick(sundays_at_2, last_run_at=T - timedelta(days=9), now=T) == T.replace(
        minute=0, second=0, microsecond=0
    )
    mondays_at_2 = crontab(minute=0, hour=2, day_of_week="mon")
    assert due_tick(mondays_at_2, last_run_at=T - timedelta(days=9), now=T) == datetime(
        2026, 11, 23, 2, 0, tzinfo=UTC
    )


def test_schedules_the_replicas_cannot_agree_on_are_refused() -> None:
    class Jittered(BaseSchedule):  # type: ignore[misc]  # a custom schedule, like solar
        pass

    with pytest.raises(ConfigError, match="Jittered ticks cannot be agreed on"):
        due_tick(Jittered(), last_run_at=T, now=T)


def test_a_beat_interval_is_bounded_as_every_duration() -> None:
    """Before: an interval of any length was taken (every other duration stops at int32)."""
    with pytest.raises(ConfigError, match=r"^a beat interval must be at most 2147483647 seconds"):
        due_tick(schedule(run_every=timedelta(seconds=2**31)), last_run_at=T, now=T)
    with pytest.raises(ConfigError, match=r"^a beat interval must be positive"):
        due_tick(schedule(run_every=timedelta(0)), last_run_at=T, now=T)


def test_entry_names_become_distinct_dns_labels() -> None:
    assert entry_job_name("add-every-10-seconds") == "add-every-10-seconds"
    names = ["tasks.add every 10s", "tasks.add_every_10s", "Tasks.Add every 10s", "x" * 80, "é"]
    jobs = [entry_job_name(n) for n in names]
    assert all(is_dns_label(j) for j in jobs), jobs
    assert len(set(jobs)) == len(names)
    assert entry_job_name("tasks.add every 10s") == jobs[0]  # stable across processes

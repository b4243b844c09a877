"""Misfire policies over real APScheduler triggers, with the current time passed in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from k8slease.jobs.misfire import MisfirePolicy, missed_ticks
from k8slease.jobs.triggers import INTERVAL_ANCHOR

HOURLY = CronTrigger.from_crontab("0 * * * *", timezone=UTC)
NOW = datetime(2026, 11, 30, 5, 30, tzinfo=UTC)


def at(hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 11, 30, hour, minute, tzinfo=UTC)


def missed(policy: MisfirePolicy, *, last: datetime | None, grace: float) -> list[datetime]:
    return missed_ticks(
        HOURLY.get_next_fire_time, last_tick=last, now=NOW, grace=grace, policy=policy
    )


def test_run_all_runs_each_missed_tick_within_grace_oldest_first() -> None:
    assert missed(MisfirePolicy.RUN_ALL, last=at(1), grace=3 * 3600) == [at(3), at(4), at(5)]


def test_coalesce_runs_once_for_the_newest_missed_tick() -> None:
    assert missed(MisfirePolicy.COALESCE, last=at(1), grace=3 * 3600) == [at(5)]


def test_skip_runs_nothing() -> None:
    assert missed(MisfirePolicy.SKIP, last=at(1), grace=3 * 3600) == []


def test_ticks_older_than_grace_are_dropped() -> None:
    assert missed(MisfirePolicy.RUN_ALL, last=at(1), grace=20 * 60) == []
    assert missed(MisfirePolicy.RUN_ALL, last=at(1), grace=31 * 60) == [at(5)]


def test_nothing_is_missed_when_the_last_tick_is_current_or_the_job_never_ran() -> None:
    assert missed(MisfirePolicy.RUN_ALL, last=at(5), grace=86400) == []
    assert missed(MisfirePolicy.RUN_ALL, last=None, grace=86400) == []


def test_anchored_interval_ticks_agree_across_replicas_and_are_bounded() -> None:
    a = IntervalTrigger(seconds=1, start_date=INTERVAL_ANCHOR, timezone=UTC)
    b = IntervalTrigger(seconds=1, start_date=INTERVAL_ANCHOR, timezone=UTC)
    week_ago = NOW - timedelta(days=7)
    ticks_a = missed_ticks(
        a.get_next_fire_time, last_tick=week_ago, now=NOW, grace=5, policy=MisfirePolicy.RUN_ALL
    )
    ticks_b = missed_ticks(
        b.get_next_fire_time, last_tick=week_ago, now=NOW, grace=5, policy=MisfirePolicy.RUN_ALL
    )
    assert ticks_a == ticks_b == [NOW - timedelta(seconds=s) for s in (5, 4, 3, 2, 1, 0)]

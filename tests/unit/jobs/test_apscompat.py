"""APScheduler habits on ``Jobs.cron``/``Jobs.interval`` (issue 21): what maps cleanly is
accepted, the rest refused with a message naming the k8slease option; no raw TypeError."""

from __future__ import annotations

from typing import Any

import pytest

from k8slease import JobContext, Jobs, MisfirePolicy
from k8slease.errors import ConfigError


def job(ctx: JobContext) -> None: ...


def jobs() -> Jobs:
    return Jobs("habits", namespace="default", identity="a")


def test_misfire_grace_time_and_coalesce_map_onto_grace_and_misfire() -> None:
    registry = jobs()
    registry.cron("0 2 * * *", name="a", misfire_grace_time=120, coalesce=False)(job)
    registry.interval(minutes=5, name="b", coalesce=True)(job)
    assert registry.specs["a"].grace == 120
    assert registry.specs["a"].misfire is MisfirePolicy.RUN_ALL
    assert registry.specs["b"].misfire is MisfirePolicy.COALESCE


def test_interval_takes_days_and_weeks() -> None:
    registry = jobs()
    registry.interval(days=1, name="daily")(job)
    registry.interval(weeks=1, hours=1, name="weekly")(job)
    assert registry.specs["daily"].trigger.interval.total_seconds() == 86400  # type: ignore[union-attr]
    assert registry.specs["weekly"].trigger.interval.total_seconds() == 608400  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"max_instances": 3},
            r"job 'job': max_instances= is an APScheduler option .* at most once",
        ),
        ({"jitter": 5}, r"jitter= is an APScheduler option .*same instant"),
        ({"id": "x"}, r"id= is an APScheduler option .*pass name="),
        ({"misfire_grace_time": None}, r"misfire_grace_time=None .*grace=SECONDS"),
        ({"coalesce": "yes"}, r"coalesce must be True or False"),
        ({"coalesce": True, "misfire": "skip"}, r"misfire= or coalesce=, not both"),
        ({"grace": 1, "misfire_grace_time": 2}, r"grace= or misfire_grace_time=, not both"),
        ({"lock_for": 60}, r"unknown option lock_for=; a job takes lock_at_most_for"),
    ],
)
def test_other_options_are_refused_naming_what_to_use(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        jobs().cron("0 2 * * *", **options)(job)


def test_a_bad_timezone_is_reported_as_a_timezone() -> None:
    with pytest.raises(ConfigError, match=r"invalid timezone 'Mars/Olympus'.*IANA name"):
        jobs().cron("0 2 * * *", timezone="Mars/Olympus")(job)
    with pytest.raises(ConfigError, match=r"invalid cron expression"):
        jobs().cron("0 25 * * *", timezone="Europe/Berlin")(job)

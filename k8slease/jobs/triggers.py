"""From what a user writes on ``@jobs.cron`` / ``@jobs.interval`` to an APScheduler trigger and a
:class:`~k8slease.jobs.spec.JobSpec`: one place for the option checks, with errors that name the
option (and the k8slease option to use where an APScheduler habit does not map).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, tzinfo
from typing import Any

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from k8slease.errors import ConfigError
from k8slease.jobs.apscompat import check_timezone, translate
from k8slease.jobs.misfire import MisfirePolicy
from k8slease.jobs.spec import JobSpec, Mode, job_name_from
from k8slease.kube.options import check_at_most, member
from k8slease.kube.options import seconds as check_seconds

#: Interval ticks are counted from this instant, so that every replica computes the same ticks.
INTERVAL_ANCHOR = datetime(2000, 1, 1, tzinfo=UTC)


def cron_trigger(expression: str, *, timezone: str | tzinfo) -> CronTrigger:
    """A five-field cron ``expression`` in ``timezone``; ``ConfigError`` names what is wrong."""
    if not isinstance(expression, str):
        raise ConfigError(
            f"the cron expression must be a string of five fields, got {expression!r}"
        )
    zone = check_timezone(timezone)
    try:
        return CronTrigger.from_crontab(expression, timezone=zone)
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"invalid cron expression {expression!r}: {exc}") from None


def interval_trigger(
    *,
    seconds: float,
    minutes: float,
    hours: float,
    days: float,
    weeks: float,
    anchor: datetime,
) -> IntervalTrigger:
    """Every ``weeks``/``days``/``hours``/``minutes``/``seconds`` (added up), counted from
    ``anchor`` so that all replicas agree on the ticks."""
    total = (
        check_seconds("seconds", seconds)
        + 60 * check_seconds("minutes", minutes)
        + 3600 * check_seconds("hours", hours)
        + 86400 * check_seconds("days", days)
        + 604800 * check_seconds("weeks", weeks)
    )
    if total <= 0:
        raise ConfigError(
            "an interval must be longer than 0 seconds (seconds/minutes/hours/days/weeks)"
        )
    check_at_most("the interval (seconds/minutes/hours/days/weeks added up)", total, given=total)
    if not isinstance(anchor, datetime) or anchor.tzinfo is None:
        raise ConfigError("anchor must be timezone-aware")
    return IntervalTrigger(seconds=total, start_date=anchor, timezone=UTC)


def job_spec(
    func: Callable[..., Any],
    *,
    trigger: BaseTrigger | None,
    mode: Mode,
    name: str | None,
    options: dict[str, Any],
) -> JobSpec:
    """The spec of ``func`` registered with ``options`` (APScheduler's names translated)."""
    spec_name = job_name_from(func) if name is None else name
    given: dict[str, Any] = translate(dict(options), job=spec_name)
    if "misfire" in given:  # a MisfirePolicy, or its value or name ("skip", "RUN_ALL")
        prefix = f"job {spec_name!r}: "
        given["misfire"] = member("misfire", given["misfire"], MisfirePolicy, prefix=prefix)
    return JobSpec(name=spec_name, func=func, mode=mode, trigger=trigger, **given)

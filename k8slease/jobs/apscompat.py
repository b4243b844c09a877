"""APScheduler habits on ``Jobs.cron``/``Jobs.interval``: accept what maps cleanly onto k8slease's
job options, refuse the rest with a message naming the option to use (never a raw TypeError).

* ``misfire_grace_time=S`` is ``grace=S``; ``coalesce=True`` is ``misfire="coalesce"`` and
  ``coalesce=False`` is ``misfire="run_all"`` (both bounded by ``grace``, as in APScheduler).
* options that k8slease decides itself (``max_instances``, ``id``, ``replace_existing``,
  ``executor``, ``next_run_time``, ...) are refused with the reason.
* a bad ``timezone`` is reported as a timezone, not as an invalid cron expression.
"""

from __future__ import annotations

from datetime import tzinfo
from typing import Any

from k8slease.errors import ConfigError

#: The options a scheduled job takes (JobOptions), for the "unknown option" message.
JOB_OPTIONS = ("lock_at_most_for", "lock_at_least_for", "misfire", "grace", "fail_open")

_BIND = "a job takes its JobContext (or nothing): bind other arguments with functools.partial"

#: APScheduler ``add_job`` options k8slease does not take, and what to do instead.
REFUSED = {
    "max_instances": "a job runs at most once at a time per replica, and ONCE_PER_TICK jobs once"
    " per tick across replicas: there is nothing to set",
    "id": "pass name=... (it names the job's Lease)",
    "replace_existing": "register each job once; a duplicate name is an error",
    "executor": "k8slease runs jobs on its own executor; pass scheduler= to Jobs for yours",
    "jobstore": "the job's Lease is its state; APScheduler job stores are not used",
    "next_run_time": "ticks come from the schedule; use Jobs.fire(name, tick) to run one now",
    "args": _BIND,
    "kwargs": _BIND,
    "jitter": "ticks must be the same instant on every replica: jitter is not supported",
    "start_date": "interval jobs count ticks from anchor=...; cron jobs follow the expression",
    "end_date": "stop the Jobs (or do not register the job) instead",
    "trigger": "use jobs.cron(...), jobs.interval(...) or jobs.singleton(...)",
}


def translate(options: dict[str, Any], *, job: str) -> dict[str, Any]:
    """``options`` as :class:`~k8slease.jobs.spec.JobOptions`, APScheduler aliases mapped.

    Raises ``ConfigError`` naming the option (and what to use) for anything else.
    """
    prefix = f"job {job!r}: "
    given = dict(options)
    if "misfire_grace_time" in given:
        if "grace" in given:
            raise ConfigError(f"{prefix}pass grace= or misfire_grace_time=, not both")
        grace = given.pop("misfire_grace_time")
        if grace is None:
            raise ConfigError(
                f"{prefix}misfire_grace_time=None (no limit) has no k8slease equivalent: pass"
                " grace=SECONDS (how late a missed tick may still run)"
            )
        given["grace"] = grace
    if "coalesce" in given:
        if "misfire" in given:
            raise ConfigError(f"{prefix}pass misfire= or coalesce=, not both")
        coalesce = given.pop("coalesce")
        if not isinstance(coalesce, bool):
            raise ConfigError(f"{prefix}coalesce must be True or False, got {coalesce!r}")
        given["misfire"] = "coalesce" if coalesce else "run_all"
    for key in given:
        if key in JOB_OPTIONS:
            continue
        if key in REFUSED:
            raise ConfigError(
                f"{prefix}{key}= is an APScheduler option k8slease does not take: {REFUSED[key]}"
            )
        raise ConfigError(
            f"{prefix}unknown option {key}=; a job takes {', '.join(JOB_OPTIONS)}"
            " (and APScheduler's misfire_grace_time= and coalesce=)"
        )
    return given


def check_timezone(timezone: object) -> tzinfo:
    """``timezone`` (an IANA name or a ``tzinfo``) as a ``tzinfo``; else a ``ConfigError`` that
    says it is the timezone that is wrong."""
    from apscheduler.util import astimezone

    try:
        zone = astimezone(timezone)
    except Exception as exc:  # ZoneInfoNotFoundError (a KeyError), TypeError, ValueError
        raise ConfigError(
            f"invalid timezone {timezone!r}: pass an IANA name such as 'Europe/Berlin' or a"
            f" tzinfo ({type(exc).__name__}: {exc})"
        ) from None
    if zone is None:
        raise ConfigError("timezone must not be None (the default is 'UTC')")
    return zone  # type: ignore[no-any-return]

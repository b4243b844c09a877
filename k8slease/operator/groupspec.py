"""The ``spec`` of a ScheduledJobGroup, read without trusting it.

The CRD's schema rejects most bad specs at the API server, but some mistakes pass any schema (a
cron expression with a minute of 61, a time zone that does not exist) and an older CRD may have
let anything through. :func:`parse_spec` therefore never raises: it returns the usable part and
a list of problems that the operator shows in ``status.message`` and a ``Degraded`` condition.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

from apscheduler.triggers.cron import CronTrigger

from k8slease.kube.microtime import shift

DEFAULT_HISTORY_LIMIT = 20
MAX_HISTORY_LIMIT = 100
DEFAULT_GRACE_SECONDS = 300
MAX_GRACE_SECONDS = 86400


@dataclass(frozen=True, slots=True)
class JobExpectation:
    """A job that should run on ``schedule`` (five-field cron in ``timezone``).

    A tick counts as missing when no replica claimed it ``grace_seconds`` after the tick.
    """

    name: str
    schedule: str
    timezone: str
    grace_seconds: int
    trigger: CronTrigger = field(compare=False, repr=False)

    def next_tick_after(self, moment: datetime) -> datetime | None:
        """The first tick strictly after ``moment`` (aware, UTC), or None when there is none."""
        start = shift(moment, 1e-6)
        try:
            fire = self.trigger.get_next_fire_time(None, start)
        except (OverflowError, ValueError):
            # a tick a hand edit put at the end of the calendar: no tick follows it
            return None
        if fire is None:
            return None
        result: datetime = fire
        return result

    def missed_ticks(
        self, covered: datetime, now: datetime, *, cap: int
    ) -> tuple[datetime | None, int]:
        """The first tick after ``covered`` past its grace at ``now``, and how many (<= ``cap``)."""
        tick = self.next_tick_after(covered)
        limit = now - timedelta(seconds=self.grace_seconds)
        if tick is None or tick > limit:
            return None, 0
        count = 0
        cursor: datetime | None = tick
        while cursor is not None and cursor <= limit and count < cap:
            count += 1
            cursor = self.next_tick_after(cursor)
        return tick, count


@dataclass(frozen=True, slots=True)
class GroupSpec:
    """The usable part of a ScheduledJobGroup's spec."""

    lease_name: str
    history_limit: int = DEFAULT_HISTORY_LIMIT
    jobs: tuple[JobExpectation, ...] = ()
    problems: tuple[str, ...] = ()


def _zone(name: str) -> tzinfo:
    return ZoneInfo(name)


def parse_job(raw: Any, index: int) -> tuple[JobExpectation | None, list[str]]:
    """Read one ``spec.jobs[]`` entry; returns None and the reasons when it is unusable."""
    where = f"spec.jobs[{index}]"
    if not isinstance(raw, Mapping):
        return None, [f"{where} is not an object"]
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        return None, [f"{where}.name is missing"]
    where = f"spec.jobs[{index}] ({name})"
    schedule = raw.get("schedule")
    if not isinstance(schedule, str) or not schedule.strip():
        return None, [f"{where}: schedule is missing"]
    timezone = raw.get("timezone") or "UTC"
    if not isinstance(timezone, str):
        return None, [f"{where}: timezone is not a string"]
    grace = raw.get("graceSeconds", DEFAULT_GRACE_SECONDS)
    if isinstance(grace, bool) or not isinstance(grace, int) or not 0 <= grace <= MAX_GRACE_SECONDS:
        return None, [f"{where}: graceSeconds must be an integer in 0..{MAX_GRACE_SECONDS}"]
    try:
        zone = _zone(timezone)
    except Exception:
        return None, [f"{where}: unknown time zone {timezone!r}"]
    try:
        trigger = CronTrigger.from_crontab(schedule.strip(), timezone=zone)
    except Exception as exc:
        return None, [f"{where}: bad schedule {schedule!r}: {exc}"]
    return JobExpectation(name, schedule.strip(), timezone, grace, trigger), []


def parse_spec(body: Mapping[str, Any]) -> GroupSpec:
    """Read a ScheduledJobGroup's spec. Never raises on the object's content."""
    problems: list[str] = []
    metadata = body.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    default_lease = name if isinstance(name, str) else ""
    spec = body.get("spec")
    if spec is None:
        spec = {}
    if not isinstance(spec, Mapping):
        return GroupSpec(default_lease, problems=("spec is not an object",))
    lease_name = spec.get("leaseName") or default_lease
    if not isinstance(lease_name, str):
        problems.append("spec.leaseName is not a string")
        lease_name = default_lease
    limit = spec.get("historyLimit", DEFAULT_HISTORY_LIMIT)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_HISTORY_LIMIT:
        problems.append(f"spec.historyLimit must be an integer in 1..{MAX_HISTORY_LIMIT}")
        limit = DEFAULT_HISTORY_LIMIT
    jobs: list[JobExpectation] = []
    raw_jobs = spec.get("jobs") or []
    if not isinstance(raw_jobs, list):
        problems.append("spec.jobs is not a list")
        raw_jobs = []
    seen: set[str] = set()
    for index, raw in enumerate(raw_jobs):
        job, job_problems = parse_job(raw, index)
        problems.extend(job_problems)
        if job is None:
            continue
        if job.name in seen:
            problems.append(f"spec.jobs: job {job.name!r} is listed twice")
            continue
        seen.add(job.name)
        jobs.append(job)
    return GroupSpec(lease_name, limit, tuple(jobs), tuple(problems))

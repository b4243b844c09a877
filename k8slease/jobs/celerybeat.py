"""Celery beat in every replica, each due entry sent once per tick: :class:`TickLockScheduler`.

``celery -A proj beat -S k8slease.jobs.celerybeat:TickLockScheduler`` (or
``beat_scheduler = "k8slease.jobs.celerybeat:TickLockScheduler"``). Every replica runs beat; when
an entry is due, each beat claims the entry's tick through :class:`~k8slease.TickLock` (the lock
``Jobs`` uses: one conditional write claims the tick and bumps the fencing token) and only the
winner sends the task. The tick is the entry's due time computed from its schedule alone, so the
replicas agree on it whatever their local state: an interval schedule's ticks are multiples of
``run_every`` counted from 2000-01-01 UTC, a crontab's its occurrences. After an entry is
applied its ``last_run_at`` is set to the tick (not to the moment of sending), so every beat
fires right after each tick, and the Lease's claimed tick refuses a tick already sent, also to a
new beat whose local schedule file is stale or empty (a rolling update). Other schedule types
(``solar``, custom ones) are refused with a ``ConfigError``: replicas could not agree on them.

The task is sent with two message headers, ``k8slease_tick`` (ISO 8601) and
``k8slease_fencing_token``, which the task can read from ``self.request`` as an idempotency key.

Settings (``app.conf.k8slease_beat``, a dict; all optional): ``group`` (default
``"celery-beat"``: the job Leases are ``<group>.<entry>``), ``namespace``, ``identity`` (defaults
as for ``Jobs``), ``lock_at_most_for`` (seconds the lock of a crashed sender blocks the entry;
default 60; the lock is held only while sending).
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from apscheduler.triggers.cron import CronTrigger
from celery.beat import PersistentScheduler, ScheduleEntry
from celery.schedules import crontab
from celery.schedules import schedule as interval_schedule

from k8slease.errors import ConfigError
from k8slease.jobs.tickhold import TickSkipped
from k8slease.jobs.ticklock import TickLock
from k8slease.jobs.tickof import floor_tick
from k8slease.jobs.triggers import INTERVAL_ANCHOR
from k8slease.kube.options import check_at_most, seconds
from k8slease.kube.validate import is_dns_label
from k8slease.logs import get_logger

__all__ = ["TickLockScheduler", "due_tick", "entry_job_name"]

log = get_logger("k8slease.celery")

_SETTINGS = frozenset({"group", "namespace", "identity", "lock_at_most_for"})
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")  # celery counts Sunday as 0
#: at most this many occurrences are stepped through to find the newest due one
_MAX_STEPS = 100_000


def entry_job_name(name: str) -> str:
    """The job name (a DNS label, part of the Lease name) of beat entry ``name``: the name when it
    is one, else a cleaned-up form plus a hash of the name, so two entries never share a lock."""
    if is_dns_label(name):
        return name
    base = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:54].strip("-") or "entry"
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{base}-{digest}"


def _cron_of(schedule: crontab) -> CronTrigger:
    """The APScheduler trigger firing at ``schedule``'s occurrences (fields from its parsed
    sets, so Celery's day-of-week numbering is kept)."""

    def listed(values: set[int]) -> str:
        return ",".join(str(v) for v in sorted(values))

    return CronTrigger(
        minute=listed(schedule.minute),
        hour=listed(schedule.hour),
        day=listed(schedule.day_of_month),
        month=listed(schedule.month_of_year),
        day_of_week=",".join(_DAYS[d] for d in sorted(schedule.day_of_week)),
        timezone=schedule.tz or UTC,
    )


def due_tick(schedule: object, *, last_run_at: datetime, now: datetime) -> datetime:
    """The tick of an entry on ``schedule`` that beat found due at ``now``: for an interval, the
    newest multiple of ``run_every`` (from 2000-01-01 UTC) not after ``now``; for a crontab, its
    newest occurrence not after ``now`` (missed ones coalesce into it, as beat does). Pure: the
    same on every replica. Any other schedule is a ``ConfigError``."""
    now = now if now.tzinfo is not None else now.replace(tzinfo=UTC)
    if isinstance(schedule, crontab):
        trigger = _cron_of(schedule)
        last = last_run_at if last_run_at.tzinfo is not None else last_run_at.replace(tzinfo=UTC)
        # never step from further back than a year: older history cannot change the answer
        start = max(last, now - timedelta(days=366))
        newest: datetime | None = None
        following = trigger.get_next_fire_time(None, start)
        for _ in range(_MAX_STEPS):
            if following is None or following > now:
                break
            newest = following
            following = trigger.get_next_fire_time(newest, newest + timedelta(microseconds=1))
        if newest is None:  # beat is a little early: the occurrence it is about to reach
            newest = following if following is not None else now
        return newest.astimezone(UTC)
    if isinstance(schedule, interval_schedule):
        period = schedule.run_every
        if period <= timedelta(0):
            raise ConfigError(f"a beat interval must be positive, got {period}")
        check_at_most("a beat interval", period.total_seconds(), given=period)
        return floor_tick(now.astimezone(UTC), period, anchor=INTERVAL_ANCHOR)
    raise ConfigError(
        f"k8slease sends only interval and crontab beat entries once per tick; "
        f"{type(schedule).__name__} ticks cannot be agreed on by the replicas"
    )


class TickLockScheduler(PersistentScheduler):  # type: ignore[misc]
    """Celery beat's default scheduler, sending each due entry once per tick across replicas
    (see the module docstring for the settings and the guarantees)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._ticks: TickLock | None = None
        self._due: dict[str, datetime] = {}
        app = kwargs["app"] if "app" in kwargs else args[0]
        settings = dict(app.conf.get("k8slease_beat") or {})
        unknown = set(settings) - _SETTINGS
        if unknown:
            raise ConfigError(
                f"k8slease_beat: unknown settings {sorted(unknown)}; known: {sorted(_SETTINGS)}"
            )
        self._settings = settings
        self._lock_at_most_for = seconds(
            "k8slease_beat lock_at_most_for", settings.get("lock_at_most_for", 60.0), minimum=1
        )
        super().__init__(*args, **kwargs)

    def setup_schedule(self) -> None:
        super().setup_schedule()
        for entry in self.schedule.values():  # refuse a schedule the replicas cannot agree on
            due_tick(entry.schedule, last_run_at=entry.last_run_at, now=entry.default_now())

    def _tick_lock(self) -> TickLock:
        if self._ticks is None:
            self._ticks = TickLock(
                self._settings.get("group", "celery-beat"),
                namespace=self._settings.get("namespace"),
                identity=self._settings.get("identity"),
            )
        return self._ticks

    def reserve(self, entry: ScheduleEntry) -> ScheduleEntry:
        """The entry's next state, with ``last_run_at`` at the tick just due (so the next one is
        due at the next tick, on every replica alike)."""
        tick = due_tick(entry.schedule, last_run_at=entry.last_run_at, now=entry.default_now())
        self._due[entry.name] = tick
        new_entry: ScheduleEntry = entry._next_instance(last_run_at=tick)
        self.schedule[entry.name] = new_entry
        return new_entry

    def apply_entry(self, entry: ScheduleEntry, producer: Any = None) -> None:
        """Send ``entry`` if this replica claims its tick; otherwise skip (DEBUG)."""
        tick = self._due.pop(entry.name, None) or due_tick(
            entry.schedule, last_run_at=entry.last_run_at, now=entry.default_now()
        )
        job = entry_job_name(entry.name)
        try:
            with self._tick_lock().hold(
                job, tick=tick, lock_at_most_for=self._lock_at_most_for
            ) as ctx:
                log.info(
                    "beat.sending",
                    entry=entry.name,
                    task=entry.task,
                    tick=tick.isoformat(),
                    fencing_token=ctx.fencing_token,
                )
                headers = dict(entry.options.get("headers") or {})
                headers.update(
                    k8slease_tick=tick.isoformat(), k8slease_fencing_token=ctx.fencing_token
                )
                stamped = self.Entry(**dict(entry, options={**entry.options, "headers": headers}))
                self.apply_async(stamped, producer=producer, advance=False)
        except TickSkipped as skip:
            log.debug("beat.skipped", entry=entry.name, tick=tick.isoformat(), why=skip.reason)
        except Exception as exc:  # recorded as a failed run on the Lease; beat goes on
            log.error("beat.send_failed", entry=entry.name, tick=tick.isoformat(), error=str(exc))

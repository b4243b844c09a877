"""Which tick a call of the tick lock claims: the one passed in, or now floored to a period.

Pure (the caller passes ``now`` in). Every replica must name the same tick for the same firing,
so a tick is either given by the caller's scheduler (its scheduled fire time) or computed as the
start of the period that ``now`` falls in, counted from a fixed ``anchor`` (2000-01-01 UTC by
default, as for ``Jobs.interval``), in whole microseconds so that no float rounding can make two
replicas disagree.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from k8slease.errors import ConfigError
from k8slease.jobs.triggers import INTERVAL_ANCHOR
from k8slease.kube.options import check_at_most, seconds

_MICRO = timedelta(microseconds=1)


def check_period(period: object, *, prefix: str = "") -> timedelta:
    """``period`` (seconds or a ``timedelta``) as a positive ``timedelta`` of whole microseconds,
    at most :data:`~k8slease.kube.options.MAX_SECONDS` either way, else a ``ConfigError`` naming
    it."""
    if isinstance(period, timedelta):
        if period <= timedelta(0):
            raise ConfigError(f"{prefix}period must be positive, got {period!r}")
        check_at_most("period", period.total_seconds(), given=period, prefix=prefix)
        return period
    value = seconds("period", period, above=True, prefix=prefix)
    length = timedelta(microseconds=round(value * 1_000_000))
    if length <= timedelta(0):
        raise ConfigError(f"{prefix}period must be at least one microsecond, got {period!r}")
    return length


def check_tick(tick: object, *, name: str = "tick", prefix: str = "") -> datetime:
    """``tick`` if it is a timezone-aware ``datetime``, else a ``ConfigError``."""
    if not isinstance(tick, datetime):
        raise ConfigError(f"{prefix}{name} must be a datetime, got {tick!r}")
    if tick.tzinfo is None or tick.utcoffset() is None:
        raise ConfigError(
            f"{prefix}{name} must be timezone-aware (every replica must name the same instant), "
            f"got {tick!r}"
        )
    return tick


def floor_tick(now: datetime, period: timedelta, *, anchor: datetime = INTERVAL_ANCHOR) -> datetime:
    """The start of the ``period`` that ``now`` falls in, counting periods from ``anchor``."""
    steps = ((now - anchor) // _MICRO) // (period // _MICRO)
    return anchor + steps * period


def resolve_tick(
    *,
    tick: datetime | None,
    period: timedelta | None,
    anchor: datetime,
    now: datetime,
    job: str,
) -> datetime:
    """The tick a call claims: ``tick`` when given (it wins over ``period``), else ``now``
    floored to ``period``; neither is a ``ConfigError``."""
    if tick is not None:
        return check_tick(tick, prefix=f"job {job!r}: ")
    if period is None:
        raise ConfigError(
            f"job {job!r}: pass tick=<the scheduled time> or period=<seconds> (the tick is then "
            "the current time floored to it)"
        )
    return floor_tick(now, period, anchor=anchor)

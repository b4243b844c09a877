"""The Kubernetes MicroTime codec: how Lease and Event times are written and read.

client-go writes MicroTime as RFC 3339 in UTC with exactly six fractional digits; a real API server
rejects other renderings in MicroTime fields. Reading accepts any RFC 3339 time with a zone
(``Z`` or an offset, one to nine fractional digits, nanoseconds truncated to microseconds).

Every time read is in the *accepted range*, :data:`MIN_TIME` to :data:`MAX_TIME` in UTC: a day
inside what :class:`datetime.datetime` can hold at each end. A time outside it (year 9999 with a
negative offset, year 1 with a positive one, which do not even convert to UTC) is refused like any
other unreadable text, so that converting an accepted time to another zone (a cron schedule's)
or moving it by a microsecond never leaves ``datetime``'s range. :func:`format_microtime` writes
every accepted time zero-padded (``0001-06-01T00:00:00.000000Z``), so whatever k8slease writes
reads back equal and fits a ``format: date-time`` field. :func:`shift` adds seconds to a time
without ever raising: the result is clamped to the accepted range.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

#: Kubernetes MicroTime, as client-go writes it: RFC 3339 with exactly six fractional digits.
#: (Documentation only: :func:`format_microtime` renders the year zero-padded itself, which
#: ``strftime("%Y")`` does not do for years below 1000 on every platform.)
MICROTIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"

#: The earliest time k8slease reads or writes: a day after ``datetime.min``.
MIN_TIME = datetime(1, 1, 2, tzinfo=UTC)
#: The latest time k8slease reads or writes: a day before ``datetime.max``.
MAX_TIME = datetime(9999, 12, 30, 23, 59, 59, 999999, tzinfo=UTC)

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
    r"(?:([Zz])|([+-])(\d{2}):(\d{2}))",
    re.ASCII,
)
#: The longest text worth parsing (nine fractional digits and an offset, with some blanks).
_MAX_TEXT = 64


def in_range(value: datetime) -> bool:
    """Whether the aware ``value`` lies in the accepted range."""
    return MIN_TIME <= value <= MAX_TIME


def format_microtime(value: datetime) -> str:
    """Render an aware datetime as a Kubernetes MicroTime string in UTC, the year zero-padded.

    Raises ``ValueError`` for a naive datetime or one outside the accepted range (a caller bug:
    every time k8slease reads is in range, and clocks are).
    """
    if value.tzinfo is None:
        raise ValueError("MicroTime needs a timezone-aware datetime")
    utc = _to_utc(value)
    if utc is None or not in_range(utc):
        raise ValueError(f"time outside {format_rfc3339(MIN_TIME)}..{format_rfc3339(MAX_TIME)}")
    return format_rfc3339(utc, digits=6)


def format_rfc3339(value: datetime, *, digits: int = 0) -> str:
    """``value`` (aware, in UTC) as RFC 3339 with ``digits`` (0, 3 or 6) fractional digits."""
    utc = _to_utc(value) or value
    text = (
        f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}"
        f"T{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}"
    )
    if digits:
        text += "." + f"{utc.microsecond:06d}"[:digits]
    return text + "Z"


def parse_microtime(text: object) -> datetime:
    """Parse a MicroTime or RFC 3339 time (``Z`` or an offset) into an aware UTC datetime.

    Raises ``ValueError`` naming the offending text when it is not such a time or lies outside
    the accepted range; never any other exception, whatever ``text`` is.
    """
    if not isinstance(text, str) or not text:
        raise ValueError(f"not a time: {_shown(text)}")
    match = _RFC3339.fullmatch(text.strip()) if len(text) <= _MAX_TEXT else None
    if match is None:
        raise ValueError(f"not an RFC 3339 time: {_shown(text)}")
    year, month, day, hour, minute, second, fraction, zulu, sign, off_h, off_m = match.groups()
    try:
        local = datetime(
            int(year),
            int(month),
            int(day),
            int(hour),
            int(minute),
            int(second),
            int((fraction or "0").ljust(6, "0")[:6]),
        )
    except ValueError:
        raise ValueError(f"not a valid date and time: {_shown(text)}") from None
    offset = timedelta(0)
    if not zulu:
        if int(off_h) > 23 or int(off_m) > 59:
            raise ValueError(f"not a valid UTC offset: {_shown(text)}")
        offset = timedelta(hours=int(off_h), minutes=int(off_m))
        if sign == "-":
            offset = -offset
    try:
        parsed = (local - offset).replace(tzinfo=UTC)
    except OverflowError:
        parsed = None
    if parsed is None or not in_range(parsed):
        raise ValueError(
            f"time outside {format_rfc3339(MIN_TIME)}..{format_rfc3339(MAX_TIME)}: {_shown(text)}"
        )
    return parsed


def time_field(value: object, name: str, problems: list[str]) -> datetime | None:
    """``value`` parsed as a time; ``None`` when absent, or (noted in ``problems``) unreadable."""
    if value is None:
        return None
    try:
        return parse_microtime(value)
    except ValueError as exc:
        problems.append(f"{name}: {exc}")
        return None


def shift(value: datetime, seconds: float) -> datetime:
    """``value`` moved by ``seconds``, clamped to the accepted range; never raises.

    For arithmetic on times read from a Lease (a renewTime plus its duration, a tick plus a
    microsecond): a time a hand edit put near the end of the range saturates instead of
    overflowing.
    """
    utc = _to_utc(value)
    if utc is None:
        return MAX_TIME if value.year > 5000 else MIN_TIME
    if seconds != seconds:  # NaN
        return utc
    room_up = (MAX_TIME - utc).total_seconds()
    room_down = (utc - MIN_TIME).total_seconds()
    if seconds >= room_up:
        return MAX_TIME
    if -seconds >= room_down:
        return MIN_TIME
    return utc + timedelta(seconds=seconds)


def _to_utc(value: datetime) -> datetime | None:
    try:
        return value.astimezone(UTC)
    except (OverflowError, ValueError):
        return None


def _shown(text: object) -> str:
    """``text`` for an error message: its repr, cut to 80 characters."""
    shown = repr(text)
    return shown if len(shown) <= 80 else shown[:77] + "..."

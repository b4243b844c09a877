"""The Kubernetes MicroTime codec: how Lease and Event times are written and read.

client-go writes MicroTime as RFC 3339 in UTC with exactly six fractional digits; a real API server
rejects other renderings in MicroTime fields. Reading accepts any RFC 3339 time with a zone.
"""

from __future__ import annotations

from datetime import UTC, datetime

#: Kubernetes MicroTime, as client-go writes it: RFC 3339 with exactly six fractional digits.
MICROTIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def format_microtime(value: datetime) -> str:
    """Render an aware datetime as a Kubernetes MicroTime string in UTC."""
    if value.tzinfo is None:
        raise ValueError("MicroTime needs a timezone-aware datetime")
    return value.astimezone(UTC).strftime(MICROTIME_FORMAT)


def parse_microtime(text: object) -> datetime:
    """Parse a MicroTime or RFC 3339 time (``Z`` or an offset) into an aware UTC datetime.

    Raises ``ValueError`` with the offending text when it is not such a time.
    """
    if not isinstance(text, str) or not text:
        raise ValueError(f"not a time: {text!r}")
    candidate = text.strip()
    if candidate.endswith(("Z", "z")):
        candidate = candidate[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(candidate)
    except ValueError:
        raise ValueError(f"not an RFC 3339 time: {text!r}") from None
    if parsed.tzinfo is None:
        raise ValueError(f"time has no timezone: {text!r}")
    return parsed.astimezone(UTC)


def time_field(value: object, name: str, problems: list[str]) -> datetime | None:
    """``value`` parsed as a time; ``None`` when absent, or (noted in ``problems``) unreadable."""
    if value is None:
        return None
    try:
        return parse_microtime(value)
    except ValueError as exc:
        problems.append(f"{name}: {exc}")
        return None

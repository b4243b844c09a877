"""Clocks, injected wherever time is read so that decisions can be tested with a fake one.

The monotonic clock measures how long a Lease has been seen unchanged; the wall clock is only
used to fill in ``acquireTime``/``renewTime`` for humans and for client-go compatibility, never to
judge expiry.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    """Where k8slease reads time."""

    def monotonic(self) -> float:
        """Seconds on a clock that never jumps; only differences mean anything."""
        ...

    def now(self) -> datetime:
        """The wall-clock time, timezone-aware, in UTC."""
        ...

    def wait(self, cond: threading.Condition, timeout: float | None) -> None:
        """Wait on ``cond`` (held by the caller) until notified or ``timeout`` seconds of this
        clock passed (``None``: until notified). May return early: callers check again."""
        ...


class SystemClock:
    """The process's real clocks."""

    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime:
        return datetime.now(UTC)

    def wait(self, cond: threading.Condition, timeout: float | None) -> None:
        cond.wait(timeout)

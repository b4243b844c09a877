"""Clocks, injected wherever time is read so that decisions can be tested with a fake one.

The monotonic clock measures how long a Lease has been seen unchanged; the wall clock is only
used to fill in ``acquireTime``/``renewTime`` for humans and for client-go compatibility, never to
judge expiry.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    """Where k8slease reads time."""

    def monotonic(self) -> float:
        """Seconds on a clock that never jumps; only differences mean anything."""
        ...

    def now(self) -> datetime:
        """The wall-clock time, timezone-aware, in UTC."""
        ...


class SystemClock:
    """The process's real clocks."""

    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime:
        return datetime.now(UTC)


class FakeClock:
    """A clock that moves only when told to; thread-safe. For tests and simulations."""

    def __init__(self, *, start: float = 1000.0, wall: datetime | None = None) -> None:
        self._lock = threading.Lock()
        self._mono = start
        self._wall = wall or datetime(2026, 1, 1, tzinfo=UTC)

    def monotonic(self) -> float:
        with self._lock:
            return self._mono

    def now(self) -> datetime:
        with self._lock:
            return self._wall

    def advance(self, seconds: float) -> None:
        """Move both clocks forward by ``seconds``."""
        if seconds < 0:
            raise ValueError("a clock does not go backwards")
        with self._lock:
            self._mono += seconds
            self._wall += timedelta(seconds=seconds)

    def set_wall(self, wall: datetime) -> None:
        """Jump the wall clock (as NTP might) without touching the monotonic one."""
        with self._lock:
            self._wall = wall

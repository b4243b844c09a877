"""A clock that moves only when told to, for tests of anything that takes a ``Clock``."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta


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

"""A clock that moves only when told to, for tests of anything that takes a ``Clock``."""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from k8slease.clock import SystemClock


class FakeClock:
    """A clock that moves only when told to; thread-safe. For tests and simulations.

    Threads that wait on it (``wait``) are woken by :meth:`advance`; :meth:`settle` then blocks
    until every such thread is waiting again, so that a test knows the threads have acted on the
    new time before it looks or moves the clock again.

    The clock knows a thread only from its first ``wait``: a thread that has just started, or
    that is still acting before its first wait (an elector's loop dispatching the grant it won
    without ever waiting), is invisible to it. A test that starts such threads and then drives
    the clock says how many threads must be waiting first (``settle(sleepers=...)``,
    ``run_until(..., sleepers=...)``), or the clock may move while they are still busy.
    """

    #: Real seconds a waiter waits at most between checks, in case a notification raced its wait.
    RECHECK = 0.05

    def __init__(self, *, start: float = 1000.0, wall: datetime | None = None) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._waiters: weakref.WeakSet[threading.Condition] = weakref.WeakSet()
        self._mono = start
        self._wall = wall or datetime(2026, 1, 1, tzinfo=UTC)
        self._generation = 0
        self._known: set[threading.Thread] = set()
        self._asleep: dict[threading.Thread, int] = {}

    def monotonic(self) -> float:
        with self._lock:
            return self._mono

    def now(self) -> datetime:
        with self._lock:
            return self._wall

    def advance(self, seconds: float) -> None:
        """Move both clocks forward by ``seconds`` and wake the threads waiting on this clock."""
        if seconds < 0:
            raise ValueError("a clock does not go backwards")
        with self._lock:
            self._mono += seconds
            self._wall += timedelta(seconds=seconds)
            self._generation += 1
            waiters = list(self._waiters)
        for cond in waiters:
            with cond:
                cond.notify_all()

    def set_wall(self, wall: datetime) -> None:
        """Jump the wall clock (as NTP might) without touching the monotonic one."""
        with self._lock:
            self._wall = wall

    def wait(self, cond: threading.Condition, timeout: float | None) -> None:
        """Wait until notified (by the owner or by :meth:`advance`): fake time moves only there."""
        me = threading.current_thread()
        with self._lock:
            self._waiters.add(cond)
            self._known.add(me)
            self._asleep[me] = self._generation
            self._changed.notify_all()
        try:
            cond.wait(self.RECHECK)
        finally:
            with self._lock:
                self._asleep.pop(me, None)

    def settle(self, timeout: float = 5.0, *, sleepers: int = 0) -> bool:
        """Block until every live thread that waits on this clock waits again since the last
        :meth:`advance`, and at least ``sleepers`` threads do (or ``timeout`` real seconds
        passed); returns whether it settled."""
        if sleepers < 0:
            raise ValueError(f"sleepers must be >= 0, got {sleepers}")

        def settled() -> bool:
            self._known = {thread for thread in self._known if thread.is_alive()}
            waiting = [t for t in self._known if self._asleep.get(t) == self._generation]
            return len(waiting) == len(self._known) and len(waiting) >= sleepers

        deadline = time.monotonic() + timeout
        with self._lock:
            # asked again every RECHECK too: a thread that ends says nothing when it does
            while not settled():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(min(left, self.RECHECK))
            return True

    def run_until(
        self, done: Callable[[], bool], *, limit: float, step: float = 0.05, sleepers: int = 0
    ) -> bool:
        """Advance by ``step`` until ``done()`` or ``limit`` seconds passed; after each step the
        threads waiting on this clock have acted on the new time (:meth:`settle`) before
        ``done`` is asked. It starts once at least ``sleepers`` threads wait on the clock.
        Returns ``done()``."""
        assert self.settle(sleepers=sleepers), f"fewer than {sleepers} threads wait on the clock"
        for _ in range(round(limit / step)):
            if done():
                return True
            self.advance(step)
            assert self.settle(), "threads did not come back to wait on the clock"
        return done()


class JumpingClock(SystemClock):
    """The real clocks, with the monotonic one jumped forward at will (``jumped`` seconds):
    what a process resumed after SIGSTOP sees before any of its threads has run."""

    def __init__(self) -> None:
        self.jumped = 0.0

    def monotonic(self) -> float:
        return super().monotonic() + self.jumped


class ShiftedClock(SystemClock):
    """The real monotonic clock with the wall clock fixed at a chosen instant: for tests whose
    code really waits (a scheduler, a thread) but must see a chosen "now" (catch-up after
    downtime)."""

    def __init__(self, now: datetime) -> None:
        self._now = now

    def now(self) -> datetime:
        return self._now

"""A lock this replica holds for one tick of one job (:class:`Grant`) and its ``lost`` flag.

The grant is what :class:`~k8slease.jobs.lock.JobLock` hands the winner of a tick: the fencing
token to pass on, and ``lost``, which reads as set the moment the keep-alive budget has run out on
this replica's monotonic clock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from k8slease.callbacks import CancelHooks
from k8slease.clock import Clock
from k8slease.lease.view import LeaseView


class LostFlag(threading.Event):
    """``Grant.lost``: set when the lock could not be kept, and read as set the moment the
    keep-alive budget has run out on this replica's monotonic clock, even if the keep-alive
    thread has not run since (a process resumed after SIGSTOP learns it before acting), by
    ``is_set`` and by ``wait``."""

    def __init__(self) -> None:
        super().__init__()
        self.expired: Callable[[], bool] = _never
        self._once = threading.Lock()

    def is_set(self) -> bool:
        return super().is_set() or self.expired()

    def wait(self, timeout: float | None = None) -> bool:
        return super().wait(timeout) or self.expired()

    def set_once(self) -> bool:
        """Set the flag; returns whether this call set it."""
        with self._once:
            if super().is_set():
                return False
            self.set()
            return True


def _never() -> bool:
    return False


@dataclass(eq=False)
class Grant:
    """A lock this replica holds for one tick of one job.

    ``lost`` is set when the lock could not be kept alive (another replica may take over);
    ``fencing_token`` is the grant's token, to pass to the systems the job writes to.
    """

    job: str
    tick: datetime
    fencing_token: int
    started_wall: datetime
    started_mono: float
    lost: LostFlag = field(default_factory=LostFlag)
    #: the Lease as last written by (or re-read for) this grant, decoded once
    _view: LeaseView | None = field(default=None, repr=False)
    _last_ok_send: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)
    _mutex: threading.Lock = field(default_factory=threading.Lock, repr=False)
    #: run (from the keep-alive thread) when the lock is lost while held; cancels coroutine jobs
    lost_hooks: CancelHooks = field(default_factory=CancelHooks, repr=False)

    #: monotonic clock and keep-alive budget (seconds after the last good write was sent)
    _clock: Clock | None = field(default=None, repr=False)
    _budget: float = float("inf")

    def __post_init__(self) -> None:
        self.lost.expired = self._budget_spent

    def _budget_spent(self) -> bool:
        if self._clock is None or self._stop.is_set():
            return False
        if self._clock.monotonic() - self._last_ok_send < self._budget:
            return False
        self.mark_lost()
        return True

    def mark_lost(self) -> None:
        """Record that the lock could not be kept, and tell whoever asked."""
        if self.lost.set_once():
            self.lost_hooks.fire()

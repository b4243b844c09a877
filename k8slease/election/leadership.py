"""What ``on_started_leading`` and ``on_stopped_leading`` receive about one term."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from k8slease.callbacks import CancelHooks


def _leading() -> bool:
    return True


class TermLost(threading.Event):
    """``LeadershipContext.lost``: set when the term ends, and read as set (``is_set``,
    ``wait``) the moment this replica no longer believes it leads in that term, its renew
    deadline passed on the monotonic clock, even if the elector's watchdog has not run since:
    a process resumed after ``SIGSTOP`` learns it before it acts (what ``is_leader`` reads)."""

    def __init__(self) -> None:
        super().__init__()
        #: whether the term still holds, read now (the elector sets it when the term starts)
        self.leading: Callable[[], bool] = _leading

    def is_set(self) -> bool:
        return super().is_set() or not self.leading()

    def wait(self, timeout: float | None = None) -> bool:
        return super().wait(timeout) or not self.leading()


@dataclass(eq=False)
class LeadershipContext:
    """What ``on_started_leading`` (and ``on_stopped_leading``) receive about one term.

    ``lost`` is set the moment leadership ends (renew deadline passed, Lease taken, stop); work
    must stop then. It reads as set from the renew deadline on even before the elector's
    watchdog has run (a :class:`TermLost`). Coroutine callbacks are also cancelled.
    ``fencing_token`` grows with every grant of the Lease: pass it to systems you write to so
    they can reject a stale leader.
    ``term`` counts this elector's grants (1, 2, ...).
    """

    lease_name: str
    namespace: str
    identity: str
    fencing_token: int
    term: int
    lost: threading.Event = field(default_factory=TermLost)
    cancel_hooks: CancelHooks = field(default_factory=CancelHooks, repr=False)

    def mark_lost(self) -> None:
        """End the term: set ``lost`` and run the hooks (the elector calls this)."""
        self.lost.set()
        self.cancel_hooks.fire()

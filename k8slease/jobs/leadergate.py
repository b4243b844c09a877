"""A LEADER-class run is bound to its replica's leadership (issue 26).

A LEADER job's tick is claimed on its lock like any other, but its class promises more: it runs
only while its replica leads. The claim write may be slow (a slow API server): leadership read
before it says nothing about the moment the run starts. So the runner checks leadership again
after every slow step (the claim write, the hop to the event loop) right before it starts, on
the monotonic clock (``is_leader`` reads the elector's belief, which ends at its renew deadline),
and binds the grant's ``lost`` flag to leadership: ``ctx.lost`` reads as set the moment
leadership ends (also before the elector's watchdog has run), and is set, its hooks fired
(coroutine jobs cancelled), when the elector reports the end of the term.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from k8slease.jobs.lock import Grant


def bind_to_leadership(grant: Grant, is_leader: Callable[[], bool]) -> None:
    """Make ``grant.lost`` read as set (and be set) once ``is_leader()`` is false, in addition
    to the lock's own keep-alive budget."""
    budget_spent = grant.lost.expired

    def lost() -> bool:
        if grant._stop.is_set():
            return False  # finished: what it was is recorded
        if budget_spent():
            return True
        if is_leader():
            return False
        grant.mark_lost()
        return True

    grant.lost.expired = lost

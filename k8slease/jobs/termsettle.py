"""A LEADER job's unanswered claim, settled when its replica's term ends (issue 26).

A LEADER-class job's lock settles an unanswered claim write at its next claim
(:func:`~k8slease.jobs.settle.settle`). Once its replica stops leading, there is no next claim:
the job's scheduler entry is paused. A claim sent in the term's last moments and applied after
the replica gave up on it then named a holder that would never run the tick nor release the
lock; the new leader skipped its ticks for that lock at DEBUG (the holder not yet silent), and
no replica said a tick was lost (the simulation's ``held-unsettled-ex-leader`` gap).

So when the term ends with such a claim, this replica keeps looking at the Lease in a thread
until the claim is settled, never running it:

* applied: the lock is released at once, the claimed tick recorded ``lost``, and
  ``lock.claim_applied_late`` (WARNING, ``decision=release``) names the span of ticks the
  others skipped for it (``held_from`` .. ``held_until``), as the claim path does;
* refused (the Lease moved on without it): nothing was held; the claim is forgotten;
* still open (the Lease exactly as the claim was conditioned on): looked at again.

It stops when the claim is settled, when this replica leads again (its claim path settles it
then, and may run it), or once ``lock_at_most_for`` has passed since the claim was sent (other
replicas may take the lock over by then, and report the holder silent).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from k8slease.errors import TransportError
from k8slease.jobs.settle import SettlingLock, settle


def settle_after_term(
    lock: SettlingLock[Any], *, leading: Callable[[], bool], every: float
) -> threading.Thread | None:
    """Settle ``lock``'s unanswered claim (and kept record) in a thread, looking every
    ``every`` seconds of the lock's clock; ``None`` when there is nothing to settle."""
    pending = lock._pending
    if pending is None:
        return None  # a kept record alone: its own retry, or the next claim, writes it
    until = pending.sent_mono + lock.lock_at_most_for
    cond = threading.Condition()

    def once() -> bool:
        """One look; whether to look again."""
        if leading() or lock._clock.monotonic() >= until:
            return False
        try:
            with lock._active_lock:
                if leading():
                    return False  # leading again: its claim path settles (and may run it)
                settle(lock, may_run=False)
        except TransportError as exc:
            lock._log.debug("lock.settle_after_term_failed", error=str(exc))
        # settled, unless the claim is still open or the release of an applied one is unwritten
        return lock._pending is not None or lock._unwritten is not None

    def loop() -> None:
        while once():
            with cond:
                lock._clock.wait(cond, every)

    thread = threading.Thread(target=loop, name=f"k8slease-settle-{lock.job}", daemon=True)
    thread.start()
    return thread

"""The LEADER singletons of a group's terms, as part of each term's work.

Before a graceful release the elector lets the ended term's ``on_started_leading`` finish, up to
the moment other replicas could take over (:meth:`~k8slease.election.terms.TermCallbacks.
work_done`); if it still runs then, the Lease is not released but left to expire. ``Jobs`` makes
its LEADER singletons part of that work: its ``on_started_leading`` returns only once every
LEADER singleton has ended, so the group Lease is never released, and no other replica starts
them, while one is still finishing its iteration after ``ctx.lost``. A new term starts its
singletons only once those of earlier terms have ended: a replica that missed its renewals and
took its own Lease back does not run a singleton twice at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from k8slease.jobs.singletons import SingletonRun


class LeaderSingletons:
    """The LEADER singleton runs of one ``Jobs`` that have not ended yet (any term's)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._runs: list[SingletonRun] = []
        #: runs let go of (not waited for) that a stop must still tell, until they end
        self._unwaited: list[SingletonRun] = []

    def add(self, run: SingletonRun) -> None:
        """Count ``run`` from now until :meth:`ended` (pass that as its ``on_end``)."""
        with self._cond:
            self._runs.append(run)

    def ended(self, run: SingletonRun) -> None:
        """``run`` has ended (its thread is returning)."""
        with self._cond:
            for runs in (self._runs, self._unwaited):
                if run in runs:
                    runs.remove(run)
            self._cond.notify_all()

    def wake(self) -> None:
        """A term ended: a new term's :meth:`wait_for_earlier` looks at its ``lost`` again."""
        with self._cond:
            self._cond.notify_all()

    def wait_for_earlier(self, lost: threading.Event) -> bool:
        """Block until no LEADER singleton runs (True), or ``lost`` is set first (False: the
        term ended before it could start its own)."""
        with self._cond:
            self._cond.wait_for(lambda: lost.is_set() or not self._runs)
            return not self._runs and not lost.is_set()

    def wait_all(self) -> None:
        """Block until every LEADER singleton has ended (the elector bounds how long it waits for
        the thread that calls this)."""
        with self._cond:
            self._cond.wait_for(lambda: not self._runs)

    def stop(self) -> None:
        """Tell every run to stop (``lost`` set, a coroutine cancelled); waits for none."""
        with self._cond:
            told = self._runs + self._unwaited
        for run in told:
            run.stop(timeout=0)

    def let_go_of_current(self) -> None:
        """The calling thread is a LEADER singleton that is stopping the jobs: count it as
        ended, or the release would wait for the very thread waiting for it."""
        current = threading.current_thread()
        self._let_go(lambda run: run.thread is current)

    def let_go_of_coroutines(self) -> None:
        """The stop blocks the event loop the coroutine singletons run on: count them as ended,
        or the release would wait (until the Lease's expiry) for what cannot end before the
        stop returns."""
        self._let_go(lambda run: run.spec.is_coroutine)

    def _let_go(self, which: Callable[[SingletonRun], bool]) -> None:
        """Stop waiting for the runs ``which`` picks; :meth:`stop` still tells them."""
        with self._cond:
            for run in [r for r in self._runs if which(r)]:
                self._runs.remove(run)
                self._unwaited.append(run)
            self._cond.notify_all()

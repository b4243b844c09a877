"""A job replica's runs in the simulation: a granted tick run, kept alive and released.

As :class:`k8slease.jobs.lock.JobLock` does, a run keeps the lock alive with
:func:`~k8slease.jobs.lockrules.extend` and releases it with
:func:`~k8slease.jobs.lockrules.release` (a Conflict re-reads once, and writes again if the
Lease is still this grant's). A release without an answer keeps its run record (issue 26),
written later by a release before the replica's next claim (``sim_jobs``) or carried by that
claim (``sim_jobclaim``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from k8slease.errors import Conflict, TransportError
from k8slease.jobs.lock import JobLock
from k8slease.jobs.lockbudget import remaining
from k8slease.jobs.lockrules import extend, release
from k8slease.lease.jobrecord import RunRecord, lease_with_job_state
from k8slease.lease.record import lease_with_record
from k8slease.lease.view import LeaseView
from tests.sim.sim_core import T0
from tests.sim.sim_informer import InformedReplica


class _Run:
    def __init__(self, *, k: int, view: LeaseView, last_ok: float, started: float) -> None:
        self.k = k
        self.view = view
        self.last_ok = last_ok
        self.started = started
        self.done = False
        self.lost = False
        #: a LEADER run's real grant, bound to leadership (``sim_leader``)
        self.grant: Any = None


def kept_release(view: LeaseView, kept: RunRecord, *, now: datetime) -> dict[str, Any]:
    """``settle._write_kept_release``'s body: ``view``'s Lease released with the kept run record
    ``kept`` (it ran for an unknown time, so nothing holds the lock on)."""
    record, state = release(
        view.record, view.job, kept, ran_for=float("inf"), lock_at_least_for=0, now=now
    )
    return lease_with_job_state(lease_with_record(view.body, record), state)


class RunningReplica(InformedReplica):
    """A job replica's runs, one at a time (APScheduler's ``max_instances=1``)."""

    # set by JobReplica.__init__ (sim_jobs)
    lock: JobLock
    period: float
    at_most: float
    run_time: tuple[float, float]
    busy: bool
    current: _Run | None

    def _tick(self, k: int) -> datetime:
        return T0 + timedelta(seconds=k * self.period)

    # -- running -----------------------------------------------------------------------------

    def _left(self, run: _Run) -> float:
        """What an extension or the release may take (``lockbudget.remaining``): the time left
        of the grant's keep budget, never below the request timeout."""
        return remaining(run.last_ok, self.at_most, now=self.mono(), floor=self.net.timeout)

    def _runs(self, token: int) -> bool:
        """Whether this replica runs the grant with ``token``, or is releasing it: its release
        is in flight or kept (no answer; retried, and said at WARNING)."""
        run = self.current
        kept = self.lock._unwritten
        if kept is not None and kept.fencing_token == token:
            return True
        return run is not None and run.view.fencing_token == token

    def _start(self, run: _Run, record: Callable[[], None]) -> None:
        """The run of ``run.k`` starts now (``record``: its grant, for the checks)."""
        record()
        self.world.log(f"r{self.index}{self.tag} runs tick {run.k} token {run.view.fencing_token}")
        run.started = self.world.t
        self.current = run
        end = self.world.t + self.world.rng.uniform(*self.run_time)
        self._keepalive(run)
        self.later(end, lambda: self._finish(run))

    def _keepalive(self, run: _Run, wait: float | None = None) -> None:
        """``JobLock._keepalive_loop`` / ``extend_once``: extend every third of the ceiling,
        retry after a second when an extension failed, lost once 2/3 of the ceiling passed
        since the last good extension was sent; a Conflict reads once and extends again when
        the Lease is still this grant's (``_write_extension``)."""
        interval = self.at_most / 3
        retry = min(1.0, interval / 2)

        def tick() -> None:
            if run.done or run.lost:
                return
            if self.mono() - run.last_ok >= self.at_most * 2 / 3:
                run.lost = True  # Grant.lost reads as set: the budget ran out
                return
            sent = self.mono()

            def done(ok: bool) -> None:
                if ok:
                    run.last_ok = sent
                elif sent - run.last_ok >= self.at_most * 2 / 3:
                    run.lost = True
                if not run.done and not run.lost:
                    self._keepalive(run, interval if ok else retry)

            self._extend(run, done, retry_on_conflict=True)

        after = interval if wait is None else wait
        self.later(self.world.t + after / (1 + self.clock.drift), tick)

    def _extend(self, run: _Run, done: Callable[[bool], None], *, retry_on_conflict: bool) -> None:
        record = extend(run.view.record, now=self.clock.wall(self.world.t))
        body = lease_with_record(run.view.body, record)

        def answer(lease: dict[str, Any] | None, error: TransportError | None) -> None:
            if error is None and lease is not None:
                run.view = LeaseView.decode(lease)
                done(True)
            elif isinstance(error, Conflict):
                if not retry_on_conflict:
                    run.lost = True
                    done(False)
                    return

                def fresh(view: LeaseView | None) -> None:
                    if view is None:
                        run.lost = True
                        done(False)
                        return
                    run.view = view
                    self._extend(run, done, retry_on_conflict=False)

                self._fresh_if_still_mine(run, fresh)
            else:
                done(False)

        self._ask(
            lambda s: s.replace(self.lease, body),
            answer,
            late_ok=True,
            timeout=self._left(run),
        )

    def _fresh_if_still_mine(self, run: _Run, then: Callable[[LeaseView | None], None]) -> None:
        """``JobLock._fresh_if_still_mine``: one read; the Lease if it is still this grant's."""

        def answer(lease: dict[str, Any] | None, error: TransportError | None) -> None:
            if error is not None or lease is None:
                then(None)
                return
            fresh = LeaseView.decode(lease)
            mine = fresh.record.holder == self.me and fresh.fencing_token == run.view.fencing_token
            then(fresh if mine else None)

        self._ask(
            self._read_op,
            answer,
            timeout=self._left(run),
        )

    def _finish(self, run: _Run) -> None:
        """``JobLock.finish``: release with the run record; a Conflict reads once and releases
        again when the Lease is still this grant's."""
        run.done = True
        if self.mono() - run.last_ok >= self.at_most * 2 / 3:
            run.lost = True
        wall = self.clock.wall(self.world.t)
        outcome = "lost" if run.lost else "succeeded"
        self.ledger.finished[run.k] = outcome
        record = RunRecord(
            holder=self.me,
            tick=self._tick(run.k),
            started=wall,
            finished=wall,
            outcome=outcome,
            fencing_token=run.view.fencing_token,
        )
        if run.lost:
            self.ledger.lost_recorded.add(run.k)
        ran_for = (self.world.t - run.started) * (1 + self.clock.drift)

        def attempt(held: LeaseView, first: bool) -> None:
            new_record, state = release(
                held.record, held.job, record, ran_for=ran_for, lock_at_least_for=0, now=wall
            )
            body = lease_with_job_state(lease_with_record(held.body, new_record), state)

            def answer(lease: dict[str, Any] | None, error: TransportError | None) -> None:
                if lease is not None:
                    self.see(lease)
                if isinstance(error, Conflict) and first:
                    self._fresh_if_still_mine(
                        run, lambda fresh: attempt(fresh, False) if fresh else self._kept(record)
                    )
                    return
                if error is not None:
                    self._kept(record)  # JobLock.finish: the record is kept (issue 26)
                    return
                self._idle()

            self._ask(
                lambda s: s.replace(self.lease, body),
                answer,
                late_ok=True,
                timeout=self._left(run),
            )

        attempt(run.view, True)

    def _kept(self, record: RunRecord) -> None:
        self.lock._unwritten = record
        self._idle()

    def _idle(self) -> None:
        self.busy = False
        self.current = None

    # -- kept run records --------------------------------------------------------------------

    def _holds_kept(self, view: LeaseView | None) -> bool:
        """Whether ``view`` shows this replica still holding the grant whose run record it
        keeps unwritten (``settle``): then that record is written by a release first."""
        kept = self.lock._unwritten
        return (
            kept is not None
            and view is not None
            and view.record.held
            and view.record.holder == self.me
            and view.fencing_token == kept.fencing_token
        )

    def _recorded(self, run: RunRecord) -> None:
        """A kept run record was written (by a release, a correction, or carried by a claim,
        whose write may show another run as its last: a takeover's in the same write)."""
        if self.lock._unwritten is run:
            self.lock._unwritten = None
        k = int((run.tick - T0).total_seconds() // self.period)
        self.ledger.recorded[k] = run.outcome
        if run.outcome == "lost":
            self.ledger.lost_recorded.add(k)
        else:
            self.ledger.written_ok.add(k)

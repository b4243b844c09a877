"""The holder's half of a job lock: extend the Lease while the job runs, release it with the
run record in the same write.

:class:`LockHolding` is a base of :class:`~k8slease.jobs.lock.JobLock` (which sets every attribute
declared here); the claiming half stays in :mod:`k8slease.jobs.lock`. A release whose answer did
not arrive keeps its run record for the next write (issue 26).
"""

from __future__ import annotations

import threading

from k8slease.clock import Clock
from k8slease.errors import Conflict, TransportError, Unavailable
from k8slease.jobs.grant import Grant
from k8slease.jobs.lockbudget import remaining
from k8slease.jobs.lockrules import extend, release
from k8slease.kube.events import EventRecorder
from k8slease.lease.budget import request_budget
from k8slease.lease.jobrecord import Outcome, RunRecord
from k8slease.lease.observe import Observations
from k8slease.lease.store import LeaseStore
from k8slease.lease.transport import LeaseTransport
from k8slease.lease.view import LeaseView
from k8slease.logs import Logger


class LockHolding:
    """Keep-alive and release of the grants of one job lock (see the module docstring)."""

    transport: LeaseTransport
    leases: LeaseStore
    job: str
    name: str
    identity: str
    lock_at_most_for: float
    lock_at_least_for: float
    keepalive_interval: float
    _clock: Clock
    _events: EventRecorder | None
    _observations: Observations
    _active: Grant | None
    _active_lock: threading.Lock
    _unwritten: RunRecord | None
    _log: Logger

    def _retry_kept_release(self, *, until: float, every: float) -> None:
        """Retry writing the kept run record in the background until ``until`` (monotonic)."""
        raise NotImplementedError

    # -- keeping ------------------------------------------------------------------------------

    def start_keepalive(self, grant: Grant) -> None:
        """Extend ``grant`` in a background thread until :meth:`finish` is called."""
        thread = threading.Thread(
            target=self._keepalive_loop,
            args=(grant,),
            name=f"k8slease-keepalive-{self.job}",
            daemon=True,
        )
        grant._thread = thread
        thread.start()

    def _keepalive_loop(self, grant: Grant) -> None:
        try:
            self._keep(grant)
        except Exception:
            # nobody extends the lock any more: the run must hear it lost the lock now, not
            # after another replica took it over
            grant.mark_lost()
            self._log.exception("lock.keepalive_crashed", tick=grant.tick.isoformat())

    def _keep(self, grant: Grant) -> None:
        retry = min(1.0, self.keepalive_interval / 2)
        wait = self.keepalive_interval
        while not grant._stop.wait(wait):
            ok = self.extend_once(grant)
            wait = self.keepalive_interval if ok else retry
            if grant.lost.is_set():
                return

    def extend_once(self, grant: Grant) -> bool:
        """Extend ``grant`` now with one conditional write; returns whether it was extended.

        When no extension has succeeded for two thirds of ``lock_at_most_for`` since the last
        successful one was sent, ``grant.lost`` is set: other replicas may take the lock soon.
        """
        with grant._mutex:
            if grant._stop.is_set() or grant.lost.is_set():
                return False
            sent = self._clock.monotonic()
            left = remaining(
                grant._last_ok_send,
                self.lock_at_most_for,
                now=sent,
                floor=self.transport.request_timeout,
            )
            with request_budget(left, connect=self.transport.request_timeout):
                ok = self._write_extension(grant)
            if ok:
                grant._last_ok_send = sent
                return True
            if sent - grant._last_ok_send >= self.lock_at_most_for * 2 / 3:
                grant.mark_lost()
                self._log.warning(
                    "lock.lost", tick=grant.tick.isoformat(), fencing_token=grant.fencing_token
                )
            return False

    def _write_extension(self, grant: Grant, *, retry_on_conflict: bool = True) -> bool:
        held = grant._view
        assert held is not None
        record = extend(held.record, now=self._clock.now())
        try:
            grant._view = self.leases.update(self.name, held, record=record)
            return True
        except Conflict:
            fresh = self._fresh_if_still_mine(grant) if retry_on_conflict else None
            if fresh is None:
                grant.mark_lost()
                self._log.warning("lock.lost", tick=grant.tick.isoformat(), why="taken-over")
                return False
            grant._view = fresh
            return self._write_extension(grant, retry_on_conflict=False)
        except TransportError as exc:
            self._log.warning("lock.extend_failed", error=str(exc))
            return False

    def _fresh_if_still_mine(self, grant: Grant) -> LeaseView | None:
        try:
            fresh = self.leases.get(self.name)
        except TransportError:
            return None
        if fresh.record.holder == self.identity and fresh.fencing_token == grant.fencing_token:
            return fresh
        return None

    # -- releasing ----------------------------------------------------------------------------

    def finish(self, grant: Grant, outcome: Outcome, *, error: str | None = None) -> RunRecord:
        """Stop keeping ``grant`` alive and release it, writing the run record in the same write.

        A grant that was lost while the job ran is recorded with outcome ``lost``. Returns the
        run record (also when it could not be written; that is logged).
        """
        overran = grant.lost.is_set()  # before stopping: the budget may have run out unseen
        grant._stop.set()
        with self._active_lock:
            if self._active is grant:
                self._active = None
        if grant._thread is not None and grant._thread is not threading.current_thread():
            grant._thread.join(timeout=self.transport.request_timeout * 2)
        if overran or grant.lost.is_set():
            outcome = "lost"
        run = RunRecord(
            holder=self.identity,
            tick=grant.tick,
            started=grant.started_wall,
            finished=self._clock.now(),
            outcome=outcome,
            fencing_token=grant.fencing_token,
            error=error,
        )
        ran_for = self._clock.monotonic() - grant.started_mono
        left = remaining(
            grant._last_ok_send,
            self.lock_at_most_for,
            now=self._clock.monotonic(),
            floor=self.transport.request_timeout,
        )
        with grant._mutex, request_budget(left, connect=self.transport.request_timeout):
            held = grant._view
            assert held is not None
            for attempt in range(2):
                record, state = release(
                    held.record,
                    held.job,
                    run,
                    ran_for=ran_for,
                    lock_at_least_for=self.lock_at_least_for,
                    now=run.finished,
                )
                try:
                    written = self.leases.update(self.name, held, record=record, state=state)
                    self._observations.see(self.name, written)
                    break
                except Conflict:
                    fresh = self._fresh_if_still_mine(grant) if attempt == 0 else None
                    if fresh is None:
                        # taken over: the next claim this replica writes carries the record
                        self._unwritten = run
                        self._log.warning(
                            "lock.release_lost", tick=grant.tick.isoformat(), kept=True
                        )
                        break
                    held = fresh
                except Unavailable as exc:
                    # no answer: kept, written by a retry or this replica's next write (issue 26)
                    self._unwritten = run
                    self._retry_kept_release(
                        until=grant._last_ok_send + self.lock_at_most_for,
                        every=min(1.0, self.keepalive_interval / 2),
                    )
                    self._log.warning(
                        "lock.release_unanswered",
                        tick=grant.tick.isoformat(),
                        outcome=run.outcome,
                        error=str(exc),
                        kept=True,
                    )
                    break
                except TransportError as exc:
                    self._log.warning("lock.release_failed", error=str(exc))
                    break
        self._log.info(
            "job.finished",
            tick=grant.tick.isoformat(),
            outcome=run.outcome,
            fencing_token=grant.fencing_token,
            seconds=round(ran_for, 3),
        )
        if run.outcome != "succeeded" and self._events is not None:
            self._events.post(
                held.body,
                reason="JobFailed" if run.outcome == "failed" else "JobLockLost",
                message=f"job {self.job} tick {grant.tick.isoformat()} on {self.identity}: "
                f"{run.outcome}{': ' + error if error else ''}",
                type_="Warning",
            )
        return run

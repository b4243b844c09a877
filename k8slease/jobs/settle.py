"""Settling a job lock's unanswered writes at its next look at the Lease (issue 26).

:class:`~k8slease.jobs.lock.JobLock` calls :func:`settle` before it judges a new claim whenever
it has a claim write or a release whose answer did not arrive. The rules are pure and live in
:mod:`k8slease.jobs.unsettled`; this module does the I/O they ask for, through the lock:

* an applied claim within its grace and budget is run (the grant is returned); past them the
  lock is released at once, the tick recorded ``lost`` (never run), said at WARNING either way;
* a kept run record is written by a release as soon as the Lease still names this replica with
  the record's token; when it does not (taken over, deleted), the next claim write carries it.
"""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any, Protocol, TypeVar

from k8slease.clock import Clock
from k8slease.errors import Conflict, NotFound, TransportError
from k8slease.jobs.lockrules import release
from k8slease.jobs.unsettled import (
    Adoption,
    Decision,
    PendingClaim,
    Settled,
    adopt_or_release,
    landed,
    never_ran,
    settle_claim,
)
from k8slease.lease.jobrecord import RunRecord
from k8slease.lease.keptruns import merge_run
from k8slease.lease.observe import Observations
from k8slease.lease.store import LeaseStore
from k8slease.lease.transport import LeaseTransport
from k8slease.lease.view import LeaseView

G = TypeVar("G")
G_co = TypeVar("G_co", covariant=True)


class SettlingLock(Protocol[G_co]):
    """What settling needs of :class:`~k8slease.jobs.lock.JobLock` (whose grants are ``G``);
    a protocol, so that this module does not import the lock that calls it."""

    _pending: PendingClaim | None
    _unwritten: RunRecord | None
    _clock: Clock
    _log: Any
    _observations: Observations
    _active_lock: threading.Lock
    transport: LeaseTransport
    leases: LeaseStore
    identity: str
    name: str
    job: str
    grace: float
    lock_at_most_for: float

    def _look(self, *, fresh: bool) -> tuple[LeaseView | None, bool]: ...

    def _grant(self, view: LeaseView, write: PendingClaim) -> G_co: ...

    def _report_lost(self, tick: datetime, holder: str, lease: LeaseView) -> None: ...


def settle(lock: SettlingLock[G], *, may_run: bool = True) -> G | None:
    """Settle ``lock``'s unanswered writes; the grant of an applied claim to run, else ``None``.

    ``may_run=False`` (a LEADER job's replica whose term ended, :mod:`~k8slease.jobs.termsettle`)
    releases an applied claim at once whatever its grace: the run may not start there.

    Looks at the informer's view when it is usable, and reads the Lease when the view cannot
    tell (the Lease still at the version the claim was conditioned on). Raises
    :class:`~k8slease.errors.TransportError` when the Lease cannot be read; what is unsettled
    stays so until a later call.
    """
    lease, read = lock._look(fresh=False)
    pending = lock._pending
    if pending is not None:
        settled = settle_claim(pending, lease, me=lock.identity)
        if settled is Settled.OPEN and not read:
            lease, read = lock._look(fresh=True)
            settled = settle_claim(pending, lease, me=lock.identity)
        if settled is Settled.REFUSED:
            lock._pending = None
            lock._log.info("lock.claim_settled", tick=pending.tick.isoformat(), applied=False)
        elif settled is Settled.APPLIED:
            lock._pending = None
            if pending.carried is not None and lock._unwritten is pending.carried:
                # written with the claim: written again, it would correct a second lost run
                lock._unwritten = None
            assert lease is not None
            grant = _applied(lock, landed(pending, lease), lease, may_run=may_run)
            if grant is not None:
                return grant
    if lock._unwritten is not None and lease is not None:
        _write_kept_release(lock, lease)
    return None


def _applied(
    lock: SettlingLock[G], pending: PendingClaim, lease: LeaseView, *, may_run: bool
) -> G | None:
    """This replica's claim was applied after it gave up on it: run it or release at once."""
    clock = lock._clock
    now, mono = clock.now(), clock.monotonic()
    adoption = adopt_or_release(
        pending, now=now, mono=mono, grace=lock.grace, lock_at_most_for=lock.lock_at_most_for
    )
    if not may_run:
        adoption = Adoption(Decision.RELEASE, "its leadership ended: a LEADER run may not start")
    lock._log.warning(
        "lock.claim_applied_late",
        tick=pending.tick.isoformat(),
        fencing_token=pending.fencing_token,
        decision=adoption.decision.value,
        why=adoption.why,
        # the other replicas skipped the ticks in between, at DEBUG at first: the lock named
        # this replica, which did not know it (they warn once its silence is long enough)
        held_from=pending.tick.isoformat(),
        held_until=now.isoformat(),
    )
    if adoption.decision is Decision.RUN:
        return lock._grant(lease, pending)
    lock._unwritten = never_ran(pending, me=lock.identity, now=now, why=adoption.why)
    lock._report_lost(pending.tick, lock.identity, lease)
    return None


def retry_kept_release(lock: SettlingLock[Any], *, until: float, every: float) -> threading.Thread:
    """Retry writing the kept run record in a thread, every ``every`` seconds of the lock's
    clock, until it is written, the Lease no longer names this replica, another write of this
    lock carried it, or ``until`` (monotonic: when other replicas may take the lock over).
    A partition that heals before then leaves the run recorded with its real outcome."""
    cond = threading.Condition()

    def loop() -> None:
        while lock._unwritten is not None and lock._clock.monotonic() < until:
            with cond:
                lock._clock.wait(cond, every)
            if lock._unwritten is None or lock._clock.monotonic() >= until:
                return
            try:
                with lock._active_lock:
                    if lock._unwritten is None:
                        return  # a claim carried it while this thread waited for the lock
                    lease, _ = lock._look(fresh=True)
                    if lease is None or lease.record.holder != lock.identity:
                        return  # taken over or gone: the next claim write carries it
                    _write_kept_release(lock, lease)
            except TransportError:
                continue

    thread = threading.Thread(target=loop, name=f"k8slease-release-{lock.job}", daemon=True)
    thread.start()
    return thread


def _write_kept_release(lock: SettlingLock[Any], lease: LeaseView, *, again: bool = True) -> None:
    """Write the kept run record with a release when the Lease still names this replica with
    its token; as a correction of the record alone when the Lease is free (someone took the
    lock over and released it since); else the next claim write carries it (``JobLock._judge``)."""
    run = lock._unwritten
    assert run is not None
    record = lease.record
    if not record.held and not record.malformed:
        _write_correction(lock, lease, run)
        return
    if not (record.held and record.holder == lock.identity):
        return
    if record.fencing_token != run.fencing_token:
        return
    new_record, state = release(
        record, lease.job, run, ran_for=float("inf"), lock_at_least_for=0.0, now=lock._clock.now()
    )
    try:
        written = lock.leases.update(lock.name, lease, record=new_record, state=state)
    except Conflict:
        # the view was stale: one of this replica's own writes may have landed late (an
        # extension); read, and write again while the Lease still names this grant
        fresh, _ = lock._look(fresh=True)
        if again and fresh is not None:
            _write_kept_release(lock, fresh, again=False)
        return  # else judged afresh, and the next claim carries the record
    except NotFound:
        return
    lock._unwritten = None
    lock._observations.see(lock.name, written)
    lock._log.warning("lock.release_written_late", tick=run.tick.isoformat(), outcome=run.outcome)


def _write_correction(lock: SettlingLock[Any], lease: LeaseView, run: RunRecord) -> None:
    """Write ``run`` into the job state of a free Lease (its lock record unchanged): a takeover
    recorded the run ``lost`` while this replica could not write, and waiting for this replica
    to win a claim again (its turn in the claim order) left it so for ticks, at any replica
    count. A conditional write: a claim sent at the same moment wins or loses as against any
    other write (the loser reads and judges again); lost here, the next look tries again."""
    state = merge_run(lease.job, run, lease_token=lease.fencing_token)
    if state is None:
        lock._unwritten = None  # the Lease records it already
        return
    try:
        written = lock.leases.update(lock.name, lease, record=lease.record, state=state)
    except (Conflict, NotFound):
        return  # someone wrote first (a claim): the next look judges again
    lock._unwritten = None
    lock._observations.see(lock.name, written)
    lock._log.warning("lock.run_corrected_late", tick=run.tick.isoformat(), outcome=run.outcome)

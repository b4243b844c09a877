"""A claim's read whose answer the informer overtook: served before a release, heard after the
informer saw the release. Taken as the latest, the old holder's record would look renewed just
now, and the tick would be skipped quietly ("held by") for the whole lock duration."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from k8slease.jobs.lock import Grant
from k8slease.lease.jobrecord import JobState, lease_with_job_state
from k8slease.lease.record import LeaseRecord, new_lease
from k8slease.lease.view import LeaseView
from tests.support.factories import make_lock
from tests.support.fakeclock import FakeClock

NAME = "g.job"


def _lease(clock: FakeClock, holder: str, claimed: datetime, rv: str) -> dict[str, Any]:
    """The job Lease held by ``holder`` for tick ``claimed`` ("": released after its run)."""
    record = LeaseRecord(
        holder=holder,
        duration_seconds=15 if holder else 1,
        acquire_time=clock.now(),
        renew_time=clock.now(),
        transitions=3,
        fencing_token=5,
    )
    lease = new_lease(NAME, "default", record)
    lease["metadata"].update(resourceVersion=rv, uid="u1")
    return lease_with_job_state(lease, JobState(claimed_tick=claimed))


class _Overtaken:
    """Reads answer ``stale`` ``overtaken`` times, each overtaken by the informer seeing
    ``fresh`` while it was out; then ``fresh``. Writes succeed."""

    namespace = "default"
    request_timeout = 5.0

    def __init__(self, stale: dict[str, Any], fresh: dict[str, Any], *, overtaken: int) -> None:
        self.stale, self.fresh, self.overtaken = stale, fresh, overtaken
        self.informer: Any = None
        self.reads = 0
        self.written: list[dict[str, Any]] = []

    def get(self, name: str) -> dict[str, Any]:
        self.reads += 1
        if self.reads > self.overtaken:
            return self.fresh
        self.informer.see(name, LeaseView.decode(self.fresh))  # while the read is out
        return self.stale

    def replace(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        self.written.append(body)
        return {**body, "metadata": {**body["metadata"], "resourceVersion": "99"}}


def _setup(overtaken: int) -> tuple[Any, _Overtaken, datetime]:
    clock = FakeClock()
    last_tick = clock.now() - timedelta(seconds=10)
    held = _lease(clock, "other", last_tick, "5")
    released = _lease(clock, "", last_tick, "6")
    transport = _Overtaken(held, released, overtaken=overtaken)
    lock = make_lock(transport, identity="me", lock_at_most_for=15, clock=clock)
    transport.informer = lock.observations
    lock.observations.see(NAME, LeaseView.decode(held))  # the informer saw other's claim
    clock.advance(5)
    return lock, transport, clock.now()


def test_a_read_overtaken_by_the_informer_is_read_again_and_the_tick_is_claimed() -> None:
    lock, transport, tick = _setup(overtaken=1)
    verdict = lock.try_acquire(tick)
    assert isinstance(verdict, Grant), f"the released Lease was judged held: {verdict}"
    assert transport.reads == 2, "one read again, no more"
    assert len(transport.written) == 1


def test_reads_overtaken_again_and_again_end_after_three_and_decide_on_the_last() -> None:
    lock, transport, tick = _setup(overtaken=100)
    verdict = lock.try_acquire(tick)
    assert transport.reads == 3, "bounded: a Lease that keeps changing is not read forever"
    assert not isinstance(verdict, Grant), "the last (stale) answer counts: held by other"
    assert transport.written == []

"""A job Lease deleted by hand: the claim is judged on what was seen before (found by the
deterministic simulation, seed 2020 of the issue-16 model)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from k8slease.errors import AlreadyExists, NotFound
from k8slease.jobs.lock import Grant
from k8slease.jobs.lockrules import Verdict
from k8slease.lease.jobrecord import JobState, lease_with_job_state
from k8slease.lease.record import LeaseRecord, new_lease
from k8slease.lease.view import LeaseView
from tests.support.factories import make_lock
from tests.support.fakeclock import FakeClock

NAME = "g.job"


class _Gone:
    """A transport whose job Lease has been deleted: reads find nothing, creates succeed."""

    namespace = "default"
    request_timeout = 5.0

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []

    def get(self, name: str) -> dict[str, Any]:
        raise NotFound(f"{name} not found", status=404)

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.created:
            raise AlreadyExists("exists", status=409, reason="AlreadyExists")
        self.created.append(body)
        return {**body, "metadata": {**body["metadata"], "resourceVersion": "9", "uid": "u2"}}

    def replace(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("nothing to replace")


def _lease(clock: FakeClock, holder: str, token: int, claimed: Any, rv: str) -> dict[str, Any]:
    record = LeaseRecord(
        holder=holder,
        duration_seconds=15,
        acquire_time=clock.now(),
        renew_time=clock.now(),
        transitions=token,
        fencing_token=token,
    )
    lease = new_lease(NAME, "default", record)
    lease["metadata"].update(resourceVersion=rv, uid="u1")
    return lease_with_job_state(lease, JobState(claimed_tick=claimed))


def test_a_tick_seen_claimed_after_a_far_future_claim_is_not_claimed_again_after_a_deletion() -> (
    None
):
    """Someone claimed a tick a month ahead by hand; the next grant claimed tick T over it; the
    Lease was then deleted. A replica that saw both must not claim T again: the far-future claim
    is set aside as suspect, but T, seen claimed, still counts (it may have run)."""
    clock = FakeClock()
    transport = _Gone()
    lock = make_lock(transport, identity="me", lock_at_most_for=15, clock=clock)
    tick = clock.now() + timedelta(seconds=5)
    far = clock.now() + timedelta(days=20)
    lock.observations.see(NAME, LeaseView.decode(_lease(clock, "", 4, far, "5")))  # the hand edit
    clock.advance(1)
    claimed = LeaseView.decode(_lease(clock, "other", 5, tick, "6"))
    lock.observations.see(NAME, claimed)  # other claims T
    clock.advance(1)
    lock.observations.see(NAME, None)  # deleted by hand
    clock.advance(20)  # the holder seen before the deletion is waited out

    verdict = lock.try_acquire(tick)

    assert not isinstance(verdict, Grant), "tick T, seen claimed, was granted again"
    assert verdict is Verdict.ALREADY_CLAIMED
    assert transport.created == []
    later = lock.try_acquire(tick + timedelta(seconds=5))
    assert isinstance(later, Grant) and later.fencing_token == 6


class _Edited(_Gone):
    """A transport whose job Lease was edited by hand (a far-future claim) after a grant."""

    def __init__(self, lease: dict[str, Any]) -> None:
        super().__init__()
        self.lease = lease
        self.replaced: list[dict[str, Any]] = []

    def get(self, name: str) -> dict[str, Any]:
        return self.lease

    def replace(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        self.replaced.append(body)
        return {**body, "metadata": {**body["metadata"], "resourceVersion": "8"}}


def test_a_tick_seen_claimed_is_not_claimed_again_when_a_far_future_claim_overwrote_it() -> None:
    """Found by the simulation (seed 5019): the holder of tick T stops renewing mid-run, and a
    hand edit overwrites the claimed tick with one a month ahead. The far-future claim is set
    aside as suspect and the last *completed* tick is the floor, but T was seen claimed (it may
    have run): a replica whose claim of T was delayed must not take the expired lock for T."""
    clock = FakeClock()
    tick = clock.now() + timedelta(seconds=5)
    far = clock.now() + timedelta(days=20)
    granted = _lease(clock, "other", 5, tick, "6")
    edited = _lease(clock, "other", 5, far, "7")
    edited["spec"] = granted["spec"]  # the edit touched the annotation only
    transport = _Edited(edited)
    lock = make_lock(transport, identity="me", lock_at_most_for=15, clock=clock)
    lock.observations.see(NAME, LeaseView.decode(granted))  # other claims T
    clock.advance(20)  # ... and stops renewing: its lock expires

    verdict = lock.try_acquire(tick)

    assert not isinstance(verdict, Grant), "tick T, seen claimed, was granted again"
    assert verdict is Verdict.ALREADY_CLAIMED
    later = lock.try_acquire(tick + timedelta(seconds=5))
    assert isinstance(later, Grant) and later.fencing_token == 6

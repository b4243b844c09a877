"""Hole 3 of issue 15: deleting a job's Lease must not run a tick twice, reuse a fencing token or
let a token go backwards on a replica that watched all along (its informer saw the higher one)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest

from k8slease.jobs.jobwiring import JobWiring
from k8slease.jobs.lock import Grant, JobLock
from k8slease.jobs.lockrules import Verdict
from k8slease.lease.informer import LeaseInformer
from k8slease.lease.observe import Observations
from k8slease.lease.transport import LeaseTransport
from k8slease.testing.server import APIServer
from tests.support.fakeclock import FakeClock

TICK = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
NAME = "g.j"


def _until(replica: Replica, condition: Callable[[], bool], what: str) -> None:
    """Wait on the replica's observations (each change wakes it) until ``condition`` holds."""
    deadline = time.monotonic() + 5
    while True:
        generation = replica.observations.generation
        if condition():
            return
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"informer never saw {what}"
        replica.observations.wait_for_change(generation, remaining)


def _gone(replica: Replica) -> bool:
    current = replica.observations.observer(NAME).current
    return current is None or not current.exists


class Replica:
    def __init__(self, server: APIServer, identity: str, clock: FakeClock) -> None:
        self.clock = clock
        self.transport = LeaseTransport(server.api_client(), "default", request_timeout=2)
        self.observations = Observations(clock)
        wiring = JobWiring(
            transport=self.transport,
            group="g",
            identity=identity,
            clock=clock,
            observations=self.observations,
        )
        self.lock = JobLock(wiring, job="j", lock_at_most_for=30)
        self.informer = LeaseInformer(
            self.transport, self.observations, label_selector="k8slease.io/group=g"
        )

    def token_seen(self) -> int:
        return self.observations.observer(NAME).highest_token


@pytest.fixture
def pair(k8s_embedded_apiserver: APIServer) -> Iterator[tuple[Replica, Replica, APIServer]]:
    clock = FakeClock(wall=TICK + timedelta(minutes=3))  # the ticks claimed are not in the future
    a, b = Replica(k8s_embedded_apiserver, "a", clock), Replica(k8s_embedded_apiserver, "b", clock)
    b.informer.start()
    assert b.informer.synced.wait(5)
    yield a, b, k8s_embedded_apiserver
    b.informer.stop()


def _run(replica: Replica, tick: datetime) -> Grant:
    grant = replica.lock.try_acquire(tick)
    assert isinstance(grant, Grant), grant
    replica.lock.finish(grant, "succeeded")
    return grant


def test_after_a_deletion_a_watching_replica_neither_reruns_a_tick_nor_reuses_a_token(
    pair: tuple[Replica, Replica, APIServer],
) -> None:
    a, b, _ = pair
    tokens = [_run(a, TICK + timedelta(minutes=i)).fencing_token for i in range(3)]
    assert tokens == [1, 2, 3]
    _until(b, lambda: b.token_seen() == 3, "token 3")
    a.transport.delete(NAME)
    _until(b, lambda: _gone(b), "the deletion")

    again = b.lock.try_acquire(TICK + timedelta(minutes=2))
    assert again is Verdict.ALREADY_CLAIMED, "the last claimed tick ran already"
    assert b.lock.try_acquire(TICK + timedelta(minutes=3)) is Verdict.HELD, "gone: unknown"
    b.clock.advance(30)  # lock_at_most_for since b saw it disappear
    nxt = b.lock.try_acquire(TICK + timedelta(minutes=3))
    assert isinstance(nxt, Grant)
    assert nxt.fencing_token == 4, "a token above every one this replica's informer saw"


def test_a_lease_deleted_while_held_is_waited_out_before_it_is_recreated(
    pair: tuple[Replica, Replica, APIServer],
) -> None:
    a, b, _ = pair
    running = a.lock.try_acquire(TICK)
    assert isinstance(running, Grant)
    _until(b, lambda: b.token_seen() == 1, "token 1")
    a.transport.delete(NAME)
    _until(b, lambda: _gone(b), "the deletion")
    assert b.lock.try_acquire(TICK + timedelta(minutes=1)) is Verdict.HELD


def test_a_lease_deleted_after_a_release_is_still_waited_out(
    pair: tuple[Replica, Replica, APIServer],
) -> None:
    """Found by the simulation (seed 10): a claim lands, the Lease is deleted, and a replica
    whose watch had not delivered the claim yet saw only the release before it. Absence after a
    Lease was seen means held by someone unknown for lock_at_most_for, never free."""
    a, b, _ = pair
    _run(a, TICK)
    _until(b, lambda: b.token_seen() == 1, "token 1")
    a.transport.delete(NAME)
    _until(b, lambda: _gone(b), "the deletion")
    assert b.lock.try_acquire(TICK + timedelta(minutes=1)) is Verdict.HELD

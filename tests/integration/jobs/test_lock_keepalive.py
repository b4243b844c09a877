"""Lock extension decided with a fake clock: when a running job's lock cannot be extended for two
thirds of ``lock_at_most_for``, the job is told (``lost`` and callbacks) before anyone else may
take the lock; a taken-over lock is noticed at once."""

from __future__ import annotations

import copy
from datetime import UTC, datetime

from k8slease.jobs.jobwiring import JobWiring
from k8slease.jobs.lock import Grant, JobLock
from k8slease.lease.jobrecord import job_state_from_lease
from k8slease.lease.record import record_from_lease
from k8slease.lease.transport import LeaseTransport
from k8slease.testing.server import APIServer
from tests.support.fakeclock import FakeClock

TICK = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
LEASES = "coordination.k8s.io/leases"


def make_lock(server: APIServer, clock: FakeClock, identity: str = "a") -> JobLock:
    transport = LeaseTransport(server.api_client(), "default", request_timeout=2)
    wiring = JobWiring(transport=transport, group="g", identity=identity, clock=clock)
    return JobLock(wiring, job="j", lock_at_most_for=30)


def granted(server: APIServer) -> tuple[FakeClock, JobLock, Grant, list[str]]:
    """A lock on a fake clock and its grant of TICK, whose loss is told into the list."""
    clock = FakeClock()
    lock = make_lock(server, clock)
    grant = lock.try_acquire(TICK)
    assert isinstance(grant, Grant)
    told: list[str] = []
    grant.lost_hooks.add(lambda: told.append("lost"))
    return clock, lock, grant, told


def test_extension_failures_set_lost_after_two_thirds_of_the_ceiling(
    k8s_embedded_apiserver: APIServer,
) -> None:
    server = k8s_embedded_apiserver
    clock, lock, grant, told = granted(server)

    clock.advance(10)
    assert lock.extend_once(grant)  # extension works: renewTime moves, resourceVersion changes
    server.faults.add("update", "leases", status=503)
    clock.advance(10)
    assert not lock.extend_once(grant)
    assert not grant.lost.is_set()  # 10 s since the last good extension < 20 s
    clock.advance(10)
    assert not lock.extend_once(grant)
    assert grant.lost.is_set() and told == ["lost"]  # 20 s: told before anyone may take it (30 s)

    server.faults.clear()
    run = lock.finish(grant, "succeeded")
    assert run.outcome == "lost"
    lease = LeaseTransport(server.api_client(), "default").get("g.j")
    assert job_state_from_lease(lease).last_run == run


def test_a_lock_taken_over_behind_the_holders_back_is_noticed_at_the_next_extension(
    k8s_embedded_apiserver: APIServer,
) -> None:
    server, clock = k8s_embedded_apiserver, FakeClock()
    lock = make_lock(server, clock)
    grant = lock.try_acquire(TICK)
    assert isinstance(grant, Grant)
    stored = copy.deepcopy(server.store.get(LEASES, "default", "g.j"))
    assert stored is not None
    stored["spec"]["holderIdentity"] = "intruder"
    server.store.commit(LEASES, "MODIFIED", stored)

    assert not lock.extend_once(grant)
    assert grant.lost.is_set()
    lock.finish(grant, "succeeded")
    lease = LeaseTransport(server.api_client(), "default").get("g.j")
    assert record_from_lease(lease).holder == "intruder"  # the release did not clobber it
    assert job_state_from_lease(lease).last_run is None


def test_a_run_stalled_past_two_thirds_of_the_ceiling_reads_lost_before_any_write(
    k8s_embedded_apiserver: APIServer,
) -> None:
    """Hole 5 of issue 15: a process resumed after SIGSTOP must learn ``lost`` the moment it
    reads it, before the keep-alive thread has run, and before anyone may take the lock."""
    server = k8s_embedded_apiserver
    clock, lock, grant, told = granted(server)
    clock.advance(19.9)
    assert not grant.lost.is_set()
    clock.advance(0.1)  # 20 s = 2/3 of lock_at_most_for, with no keep-alive since (stopped)
    assert grant.lost.is_set() and told == ["lost"]
    assert not lock.extend_once(grant), "a lost grant is not extended"
    assert lock.finish(grant, "succeeded").outcome == "lost"


def test_a_stalled_run_waiting_on_lost_wakes_to_it(k8s_embedded_apiserver: APIServer) -> None:
    """A job that paces itself with ``ctx.lost.wait(...)`` learns ``lost`` from the wait's
    answer once the keep-alive budget is spent, before the keep-alive thread has run (found
    with the chaos suite's leadership counterpart, LeadershipContext.lost)."""
    server, clock = k8s_embedded_apiserver, FakeClock()
    lock = make_lock(server, clock)
    grant = lock.try_acquire(TICK)
    assert isinstance(grant, Grant)
    assert not grant.lost.wait(0)
    clock.advance(20)  # 2/3 of lock_at_most_for with no keep-alive since
    assert grant.lost.wait(0)
    lock.finish(grant, "succeeded")

"""Job locks under an API server that is slow but answering (issue 22).

A lock's requests used to be bounded by ``request_timeout`` each, so a server slower than that
failed every claim and every extension. Now a claim may take as long as its grant would still be
used (and the tick is within its grace), an extension the time the grant has left
(:mod:`k8slease.jobs.lockbudget`). The latency is real time on the embedded server.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from k8slease.errors import Unavailable
from k8slease.jobs.context import JobOwner
from k8slease.jobs.lock import Grant, JobLock
from k8slease.jobs.runner import TickRunner
from k8slease.jobs.spec import JobSpec, Mode
from k8slease.lease.transport import LeaseTransport
from k8slease.lease.view import LeaseView
from k8slease.testing.server import APIServer
from tests.support.factories import make_lock

TIMEOUT = 0.3  # request_timeout: what every request used to be bounded by
LATENCY = 0.8  # more than that, well within what is at stake (a 6 s lock keeps 4 s)


@pytest.fixture
def transport(k8s_embedded_apiserver: APIServer) -> Iterator[LeaseTransport]:
    api = k8s_embedded_apiserver.api_client()
    yield LeaseTransport(api, "default", request_timeout=TIMEOUT)
    api.close()


def _slow_leases(server: APIServer, latency: float) -> None:
    """Every Lease read, create and update on ``server`` takes ``latency`` s from now on."""
    server.faults.add(["get", "create", "update"], "leases", latency=latency)


def _lock(transport: LeaseTransport, *, grace: float | None) -> JobLock:
    return make_lock(
        transport,
        group="billing",
        job="invoices",
        identity="replica-0",
        lock_at_most_for=6,
        grace=grace,
    )


@pytest.mark.timeout(60)
def test_a_slow_claim_extension_and_release_succeed_past_request_timeout(
    k8s_embedded_apiserver: APIServer, transport: LeaseTransport
) -> None:
    server = k8s_embedded_apiserver
    lock = _lock(transport, grace=300)
    _slow_leases(server, LATENCY)
    tick = datetime.now(UTC).replace(microsecond=0)
    grant = lock.try_acquire(tick)
    assert isinstance(grant, Grant), grant
    assert lock.extend_once(grant), "an extension slower than request_timeout still lands"
    assert not grant.lost.is_set()
    token = grant.fencing_token
    run = lock.finish(grant, "succeeded")
    assert run.outcome == "succeeded"
    server.faults.clear()
    job = LeaseView.decode(transport.get(lock.name)).job
    assert job.last_run is not None and job.last_run.fencing_token == token
    assert job.last_run.outcome == "succeeded"


@pytest.mark.timeout(60)
def test_a_claim_is_not_waited_for_past_the_ticks_grace(
    k8s_embedded_apiserver: APIServer, transport: LeaseTransport
) -> None:
    lock = _lock(transport, grace=2.0)
    _slow_leases(k8s_embedded_apiserver, 3.0)
    # the tick is 1.5 s old: 0.5 s of grace left, so the claim gives up after about that
    tick = datetime.now(UTC) - timedelta(seconds=1.5)
    with pytest.raises(Unavailable, match="timed out"):
        lock.try_acquire(tick)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("still_leading", [False, True])
def test_a_leader_jobs_slow_claim_answered_after_the_leadership_ended_does_not_run(
    k8s_embedded_apiserver: APIServer, transport: LeaseTransport, still_leading: bool
) -> None:
    """A LEADER-class job's claim, slowed past request_timeout, may be answered after the
    leadership ended: then the tick must not run (its grant is released, the tick reported
    lost); while leading, the slow claim runs the tick."""
    ran: list[object] = []
    spec = JobSpec(name="invoices", func=ran.append, mode=Mode.LEADER, trigger=None)
    # leading before the claim; once the claim was sent, ``still_leading`` for every later look
    answers = itertools.chain([True], itertools.repeat(still_leading))
    lock = _lock(transport, grace=300)
    owner = JobOwner("billing", "replica-0")
    runner = TickRunner(spec, owner, lock=lock, is_leader=lambda: next(answers))
    _slow_leases(k8s_embedded_apiserver, LATENCY)
    tick = datetime.now(UTC).replace(microsecond=0)
    outcome = runner.run_tick(tick)
    k8s_embedded_apiserver.faults.clear()
    job = LeaseView.decode(transport.get(lock.name)).job
    assert job.last_run is not None and job.last_run.tick == tick
    if still_leading:
        assert outcome == "succeeded" and len(ran) == 1
    else:
        assert outcome is None and not ran
        assert runner.losses.count == 1  # reported lost (job.not_started, job.ticks_lost)
        assert job.last_run.outcome == "lost"

"""Promises of the elector that a new user found broken (issue 21), on the in-memory store:
``release_on_return`` ends ``run()``, every elector exports its leadership gauges (0) from its
start, and ``AsyncLeaderElector.wait_until_leading`` takes a timeout and returns a bool like
the sync one."""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

from prometheus_client import CollectorRegistry

from k8slease import AsyncLeaderElector, LeaderElector
from k8slease.election.seams import Seams
from k8slease.lease.record import record_from_lease
from k8slease.metrics import NoopMetrics, PrometheusMetrics
from tests.support.fakeclock import JumpingClock
from tests.support.threads import returns_within
from tests.unit.election.elector_memstore import MemoryLeaseStore, MemoryTransport, make_elector

FAST: dict[str, Any] = dict(
    namespace="default",
    lease_duration=2,
    renew_interval=0.3,
    renew_deadline=1.2,
    retry_interval=0.2,
)


make = partial(make_elector, defaults={**FAST, "handle_signals": False})


def test_release_on_return_ends_run_after_the_release(
    store: MemoryLeaseStore, electors: list[LeaderElector]
) -> None:
    calls: list[str] = []
    elector = make(
        store,
        electors,
        "a",
        release_on_return=True,
        on_started_leading=lambda: calls.append("started"),
        on_stopped_leading=lambda: calls.append("stopped"),
    )
    assert returns_within(elector.run, 5), "run() returns once the work has returned"
    assert calls == ["started", "stopped"]
    assert record_from_lease(store.get("demo")).holder == ""
    assert elector.wait(0)


def test_a_candidate_exports_zero_from_its_start(
    store: MemoryLeaseStore, electors: list[LeaderElector]
) -> None:
    """The alert the docs suggest, ``max by (lease) (k8slease_is_leader) == 0``, needs every
    replica's series, not only those that have led once."""
    make(store, electors, "leader", on_started_leading=lambda ctx: ctx.lost.wait()).start()
    assert electors[0].wait_until_leading(5)
    registry = CollectorRegistry()
    candidate = make(store, electors, "candidate", metrics=PrometheusMetrics(registry)).start()
    assert store.wait_for(lambda: candidate.leader == "leader", 5)
    assert registry.get_sample_value("k8slease_is_leader", {"lease": "demo"}) == 0.0
    assert registry.get_sample_value("leader_election_master_status", {"name": "demo"}) == 0.0


def test_async_wait_until_leading_takes_a_timeout_and_returns_a_bool(
    store: MemoryLeaseStore, electors: list[LeaderElector]
) -> None:
    holder = make(store, electors, "holder", on_started_leading=lambda ctx: ctx.lost.wait())
    holder.start()
    assert holder.wait_until_leading(5)

    async def main() -> tuple[bool, bool, bool]:
        elector = AsyncLeaderElector(
            "demo", identity="b", seams=Seams(transport=MemoryTransport(store)),
            metrics=NoopMetrics(),
            handle_signals=False, **FAST,
        )  # fmt: skip
        async with elector:
            timed_out = await elector.wait_until_leading(timeout=0.3)
            not_leading = await elector.wait_until_not_leading(timeout=0.1)
            holder.stop(timeout=5)
            leads = await elector.wait_until_leading(timeout=5)
        return timed_out, not_leading, leads

    assert asyncio.run(main()) == (False, True, True)


def test_a_leader_past_its_renew_deadline_is_not_ready(
    store: MemoryLeaseStore, electors: list[LeaderElector]
) -> None:
    """Found by the contract matrix (the API server cut off, so no watch either): ``is_leader``
    was already false but ``ready()`` still true until the watchdog ran: it read the phase."""
    clock = JumpingClock()
    slow = {"lease_duration": 30, "renew_interval": 10, "renew_deadline": 20}
    leader = make(store, electors, "a", clock=clock, **slow)
    leader._runner.transport.watch_enabled = False  # type: ignore[union-attr]  # no watch: cut off
    leader.start()
    assert leader.wait_until_leading(5) and leader.ready()
    clock.jumped = 20.5  # past the renew deadline; no thread of the elector has run since
    assert not leader.is_leader
    assert leader.healthy(), "within the margin: a stuck leader is not yet unhealthy"
    assert not leader.ready()

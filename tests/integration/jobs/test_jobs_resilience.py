"""Catch-up after downtime, an unreachable API server, hand-edited Leases, async jobs, and the
real scheduler firing ticks on three replicas."""

from __future__ import annotations

import asyncio
import copy
import logging
import threading
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from kubernetes import client

from k8slease import JobContext, Jobs, MisfirePolicy, TickLock, TickSkipped
from k8slease.clock import SystemClock
from k8slease.lease.jobrecord import job_state_from_lease
from k8slease.lease.record import record_from_lease
from k8slease.lease.transport import LeaseTransport
from k8slease.testing.server import APIServer
from tests.support.factories import JobsFactory, hourly_catch_up, make_jobs
from tests.support.fakeclock import FakeClock, ShiftedClock
from tests.support.recorders import SeenTicks
from tests.support.timing import NEVER

T0 = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)


@pytest.fixture
def stop_after() -> Iterator[list[Jobs]]:
    started: list[Jobs] = []
    yield started
    for jobs in started:
        jobs.stop()


def test_catch_up_runs_missed_ticks_once_across_replicas_per_policy(
    k8s_api_client: client.ApiClient,
    k8s_namespace: str,
    stop_after: list[Jobs],
    new_jobs: JobsFactory,
) -> None:
    """Hourly jobs last ran at 01:00; every replica was down until 05:30. With grace 3 h:
    RUN_ALL runs 03:00, 04:00 and 05:00, COALESCE only 05:00, SKIP nothing; each once, although
    three replicas start and all of them try."""
    seen: dict[str, list[tuple[str, datetime | None]]] = {"all": [], "coalesce": [], "skip": []}
    lock = threading.Lock()
    done = threading.Condition(lock)

    def recorder(key: str) -> Any:
        def job(ctx: JobContext) -> None:
            with done:
                seen[key].append((ctx.identity, ctx.tick))
                done.notify_all()

        return job

    def register(jobs: Jobs) -> None:
        for key, policy in (
            ("all", MisfirePolicy.RUN_ALL),
            ("coalesce", MisfirePolicy.COALESCE),
            ("skip", MisfirePolicy.SKIP),
        ):
            jobs.interval(hours=1, name=key, misfire=policy, grace=3 * 3600, lock_at_most_for=60)(
                recorder(key)
            )

    # Before the downtime: one replica ran the 01:00 tick of each job.
    before = new_jobs(
        "nightly",
        identity="before",
        clock=ShiftedClock(T0 - timedelta(hours=1)),
    )
    register(before)
    before.start()
    for key in seen:
        assert before.fire(key, T0 - timedelta(hours=1)) == "succeeded"
    before.stop()
    for values in seen.values():
        values.clear()

    now = datetime(2026, 11, 30, 5, 30, tzinfo=UTC)
    for i in range(3):
        jobs = new_jobs(
            "nightly",
            identity=f"after-{i}",
            clock=ShiftedClock(now),
        )
        register(jobs)
        stop_after.append(jobs)
        jobs.start()
    expected_all = [T0 + timedelta(hours=h) for h in (1, 2, 3)]
    with done:
        assert done.wait_for(lambda: len(seen["all"]) >= 3 and len(seen["coalesce"]) >= 1, 20)
    transport = LeaseTransport(k8s_api_client, k8s_namespace)
    # Every catch-up claim has been decided once the claimed ticks reached the newest tick.
    for key in ("all", "coalesce"):
        state = job_state_from_lease(transport.get(f"nightly.{key}"))
        assert state.claimed_tick == T0 + timedelta(hours=3)
    for jobs in stop_after:
        jobs.stop()
    assert sorted(tick for _, tick in seen["all"]) == expected_all
    assert [tick for _, tick in seen["coalesce"]] == [T0 + timedelta(hours=3)]
    assert seen["skip"] == []


def event_of(record: logging.LogRecord) -> str:
    return str(getattr(record, "k8slease_event", ""))


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    fields: dict[str, Any] = getattr(record, "k8slease_fields", {})
    return fields


def test_an_unreachable_api_server_skips_coordinated_jobs_and_warns_once(
    k8s_embedded_apiserver: APIServer, stop_after: list[Jobs], caplog: pytest.LogCaptureFixture
) -> None:
    server = k8s_embedded_apiserver
    ran: list[str] = []
    jobs = make_jobs("billing", server.api_client(), identity="solo", request_timeout=2)
    jobs.cron(NEVER, name="invoices")(lambda ctx: ran.append("invoices"))
    jobs.cron(NEVER, name="metrics-push", fail_open=True)(lambda ctx: ran.append("push"))
    stop_after.append(jobs)
    jobs.start()
    # claims read the informer's cache and write; every request the lock sends fails
    server.faults.add(("get", "create", "update"), "leases", status=503)
    with caplog.at_level(logging.DEBUG, logger="k8slease"):
        for minute in range(3):
            tick = T0 + timedelta(minutes=minute)
            assert jobs.fire("invoices", tick) is None
            assert jobs.fire("metrics-push", tick) == "succeeded"
    assert ran == ["push"] * 3
    warnings = [r for r in caplog.records if event_of(r) == "job.api_unreachable"]
    assert [fields_of(w)["job"] for w in warnings] == ["invoices", "metrics-push"]
    assert all(w.levelno == logging.WARNING for w in warnings)
    assert jobs.runners["invoices"].stats.skips == {"api-unreachable": 3}
    server.faults.clear()
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="k8slease"):
        assert jobs.fire("invoices", T0 + timedelta(hours=1)) == "succeeded"
    assert any(event_of(r) == "job.api_recovered" for r in caplog.records)


@pytest.mark.parametrize("fail_open", [False, True], ids=["locked", "fail-open"])
@pytest.mark.parametrize("status", [403, 422])
def test_a_refused_claim_skips_on_every_replica_even_failing_open(
    k8s_embedded_apiserver: APIServer,
    stop_after: list[Jobs],
    caplog: pytest.LogCaptureFixture,
    status: int,
    fail_open: bool,
) -> None:
    """The server answered: it refuses every replica alike, so a job that failed open here
    would run on all of them at once (fail_open is for a server that cannot be asked)."""
    server = k8s_embedded_apiserver
    ran: list[str] = []
    replicas = []
    for name in ("r1", "r2"):
        jobs = make_jobs("billing", server.api_client(), identity=name)
        jobs.cron(NEVER, name="invoices", fail_open=fail_open)(
            lambda ctx, name=name: ran.append(name)
        )
        stop_after.append(jobs)
        jobs.start()
        replicas.append(jobs)
    server.faults.add(("get", "create", "update"), "leases", status=status)
    with caplog.at_level(logging.DEBUG, logger="k8slease"):
        for minute in range(2):
            for jobs in replicas:
                assert jobs.fire("invoices", T0 + timedelta(minutes=minute)) is None
        ticks = TickLock(
            "billing", namespace="default", identity="r3", api_client=server.api_client()
        )
        with pytest.raises(TickSkipped) as skipped, ticks.hold("reports", tick=T0):
            ran.append("r3")
        ticks.close()
    assert ran == [] and skipped.value.reason == "api-refused"
    warnings = [r for r in caplog.records if event_of(r) == "job.claim_refused"]
    assert len(warnings) == 3 and all(w.levelno == logging.WARNING for w in warnings)
    assert not [r for r in caplog.records if event_of(r) == "job.api_unreachable"]
    assert all(j.runners["invoices"].stats.skips == {"api-refused": 2} for j in replicas)
    server.faults.clear()
    assert replicas[0].fire("invoices", T0 + timedelta(hours=1)) == "succeeded"
    assert ran == ["r1"]


@pytest.mark.parametrize("status", [403, 422])
def test_a_replica_whose_claims_are_refused_is_not_ready_yet_healthy(
    k8s_embedded_apiserver: APIServer, stop_after: list[Jobs], status: int
) -> None:
    """One job whose claims the server refuses (its Lease not in the RBAC Role: 403; an invalid
    object: 422) makes the replica not ready, as a missing namespace does: it cannot run that
    job. It stays healthy (a restart grants no RBAC) and is ready again once a claim works."""
    server = k8s_embedded_apiserver
    jobs = make_jobs("billing", server.api_client(), identity="r1")
    for name in ("invoices", "reports"):
        jobs.cron(NEVER, name=name)(lambda ctx: None)
    stop_after.append(jobs)
    jobs.start()
    assert jobs.fire("invoices", T0) == "succeeded"  # its Lease exists: its writes are named
    assert jobs.ready() and jobs.healthy()
    refusal = server.faults.add(("get", "update"), "leases", name="billing.invoices", status=status)
    assert jobs.fire("invoices", T0 + timedelta(minutes=1)) is None
    assert jobs.fire("reports", T0) == "succeeded"  # the other job claims as usual
    assert jobs.runners["invoices"].refused
    assert not jobs.ready(), "ready while every claim of a job is refused"
    assert jobs.healthy()
    server.faults.remove(refusal)
    assert jobs.fire("invoices", T0 + timedelta(minutes=2)) == "succeeded"
    assert not jobs.runners["invoices"].refused
    assert jobs.ready() and jobs.healthy()


@pytest.mark.parametrize(
    "spec",
    [
        {"holderIdentity": "someone", "leaseDurationSeconds": -5},
        {"holderIdentity": "someone", "renewTime": "not a time"},
        {"holderIdentity": 42},
    ],
    ids=["negative-duration", "bad-time", "non-string-holder"],
)
def test_a_hand_edited_lock_lease_is_treated_as_held_then_repaired(
    k8s_embedded_apiserver: APIServer, stop_after: list[Jobs], spec: dict[str, Any]
) -> None:
    """The embedded server validates Leases like a real one, so the nonsense is written into a
    stored object's JSON behind its back, as an old or buggy client might have left it."""
    server = k8s_embedded_apiserver
    api = server.api_client()
    transport = LeaseTransport(api, "default")
    transport.create({"metadata": {"name": "billing.invoices"}, "spec": {}})
    stored = copy.deepcopy(
        server.store.get("coordination.k8s.io/leases", "default", "billing.invoices")
    )
    assert stored is not None
    stored["spec"] = spec
    server.store.commit("coordination.k8s.io/leases", "MODIFIED", stored)
    ran: list[datetime | None] = []
    clock = FakeClock(wall=T0)
    jobs = make_jobs("billing", api, identity="solo", clock=clock)
    jobs.cron(NEVER, name="invoices", lock_at_most_for=60)(lambda ctx: ran.append(ctx.tick))
    stop_after.append(jobs)
    jobs.start()
    assert jobs.fire("invoices", T0) is None  # unknown holder, not yet seen for long enough
    record = record_from_lease(transport.get("billing.invoices"))
    assert record.malformed
    clock.advance(59.9)  # our lock_at_most_for is the fallback duration of a malformed Lease
    assert jobs.fire("invoices", T0 + timedelta(minutes=1)) is None
    clock.advance(0.1)
    assert jobs.fire("invoices", T0 + timedelta(minutes=1)) == "succeeded"
    repaired = record_from_lease(transport.get("billing.invoices"))
    assert not repaired.malformed and repaired.holder == ""
    assert ran == [T0 + timedelta(minutes=1)]


def test_coroutine_jobs_run_on_an_asyncio_scheduler_and_get_their_tick(
    new_jobs: JobsFactory,
) -> None:
    async def main() -> list[tuple[str, datetime | None]]:
        seen: list[tuple[str, datetime | None]] = []
        got_two = asyncio.Event()

        async def report(ctx: JobContext) -> None:
            await asyncio.sleep(0)
            seen.append((ctx.identity, ctx.tick))
            if len(seen) >= 2:
                got_two.set()

        replicas = []
        for i in range(2):
            jobs = new_jobs(
                "asyncgroup",
                identity=f"a{i}",
                scheduler=AsyncIOScheduler(timezone=UTC),
            )
            jobs.interval(seconds=1, name="report", lock_at_most_for=5)(report)
            replicas.append(jobs)
        for jobs in replicas:
            await jobs.__aenter__()
        try:
            await asyncio.wait_for(got_two.wait(), 10)
        finally:
            for jobs in replicas:
                await jobs.__aexit__(None, None, None)
        return seen

    seen = asyncio.run(main())
    ticks = Counter(tick for _, tick in seen)
    assert all(count == 1 for count in ticks.values()), seen
    assert all(tick is not None and tick.microsecond == 0 for tick in ticks)


def test_the_real_scheduler_fires_each_interval_tick_once_across_three_replicas(
    stop_after: list[Jobs], new_jobs: JobsFactory
) -> None:
    seen: list[tuple[str, datetime | None, int | None]] = []
    cond = threading.Condition()

    def tick_job(ctx: JobContext) -> None:
        with cond:
            seen.append((ctx.identity, ctx.tick, ctx.fencing_token))
            cond.notify_all()

    for i in range(3):
        jobs = new_jobs("ticker", identity=f"t{i}")
        jobs.interval(seconds=1, name="tick", lock_at_most_for=5)(tick_job)
        stop_after.append(jobs)
        jobs.start()
    with cond:
        assert cond.wait_for(lambda: len(seen) >= 4, 15)
    for jobs in stop_after:
        jobs.stop()
    ticks = Counter(tick for _, tick, _ in seen)
    assert all(count == 1 for count in ticks.values()), seen
    tokens = [token for _, _, token in seen]
    assert len(set(tokens)) == len(tokens)


def test_coroutine_jobs_catch_up_on_an_asyncio_scheduler(new_jobs: JobsFactory) -> None:
    now = datetime(2026, 11, 30, 5, 30, tzinfo=UTC)

    async def main() -> list[datetime | None]:
        ran = asyncio.Event()
        hourly = SeenTicks(ran)

        def make(identity: str, clock: SystemClock) -> Jobs:
            scheduler = AsyncIOScheduler(timezone=UTC)
            return hourly_catch_up(
                new_jobs,
                "asynccatchup",
                hourly.job,
                identity=identity,
                clock=clock,
                scheduler=scheduler,
            )

        before = make("before", ShiftedClock(T0 - timedelta(hours=1)))
        await before.__aenter__()
        await asyncio.to_thread(before.fire, "hourly", T0 - timedelta(hours=1))
        await before.__aexit__(None, None, None)
        hourly.ticks.clear()
        ran.clear()
        after = make("after", ShiftedClock(now))
        await after.__aenter__()
        try:
            await asyncio.wait_for(ran.wait(), 10)
        finally:
            await after.__aexit__(None, None, None)
        return hourly.ticks

    assert asyncio.run(main()) == [T0 + timedelta(hours=3)]

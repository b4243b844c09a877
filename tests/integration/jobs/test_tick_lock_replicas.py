"""The scheduler-agnostic tick lock (issue 25) against an API server: replicas are TickLocks with
distinct identities sharing one namespace, contending for the same ticks at the same moment
(a barrier), on the embedded server and, with ``--k8s-server=real``, on kube-apiserver."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from kubernetes import client

from k8slease import ConfigError, JobContext, Jobs, TickLock, TickSkipped
from k8slease.lease.jobrecord import job_state_from_lease
from k8slease.lease.record import record_from_lease
from k8slease.lease.transport import LeaseTransport
from tests.support.fakeclock import FakeClock
from tests.support.timing import NEVER

T0 = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)

Make = Callable[[int], list[TickLock]]


@pytest.fixture
def replicas(k8s_api_client: client.ApiClient, k8s_namespace: str) -> Make:
    def make(count: int) -> list[TickLock]:
        return [
            TickLock(
                "billing",
                namespace=k8s_namespace,
                identity=f"replica-{i}",
                api_client=k8s_api_client,
            )
            for i in range(count)
        ]

    return make


def _lease(api_client: client.ApiClient, namespace: str, name: str) -> dict[str, object]:
    return LeaseTransport(api_client, namespace).get(name)


def test_replicas_contending_for_each_tick_run_it_exactly_once(
    replicas: Make, k8s_api_client: client.ApiClient, k8s_namespace: str
) -> None:
    group = replicas(3)
    ticks = [T0 + timedelta(minutes=i) for i in range(8)]
    ran: list[tuple[str, datetime, int]] = []
    skipped: list[str] = []
    guard = threading.Lock()
    for tick in ticks:
        barrier = threading.Barrier(len(group))

        def contend(ticks_: TickLock, tick: datetime = tick, barrier: threading.Barrier = barrier):
            barrier.wait()
            try:
                with ticks_.hold("invoices", tick=tick, lock_at_most_for=60) as ctx:
                    assert ctx.fencing_token is not None
                    with guard:
                        ran.append((ctx.identity, tick, ctx.fencing_token))
            except TickSkipped as skip:
                with guard:
                    skipped.append(skip.reason)

        threads = [threading.Thread(target=contend, args=(t,)) for t in group]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert Counter(tick for _, tick, _ in ran) == Counter({tick: 1 for tick in ticks})
    assert len(skipped) == 2 * len(ticks)
    assert set(skipped) <= {"already-claimed", "held", "lost-race"}
    tokens = [token for *_, token in ran]
    assert tokens == sorted(tokens) and len(set(tokens)) == len(ticks)  # grows with each grant

    lease = _lease(k8s_api_client, k8s_namespace, "billing.invoices")
    state = job_state_from_lease(lease)
    assert state.claimed_tick == ticks[-1] == state.completed_tick
    assert state.count("succeeded") == len(ticks)
    assert state.last_run is not None and state.last_run.fencing_token == tokens[-1]
    assert record_from_lease(lease).holder == ""  # released with the run record


def test_an_exception_is_recorded_failed_and_raised_again(
    replicas: Make, k8s_api_client: client.ApiClient, k8s_namespace: str
) -> None:
    (one,) = replicas(1)
    with (
        pytest.raises(ValueError, match="no invoices"),
        one.hold("invoices", tick=T0, lock_at_most_for=60),
    ):
        raise ValueError("no invoices")
    state = job_state_from_lease(_lease(k8s_api_client, k8s_namespace, "billing.invoices"))
    assert state.last_run is not None
    assert state.last_run.outcome == "failed" and state.last_run.error == "ValueError: no invoices"
    assert state.count("failed") == 1


def test_the_decorator_form_runs_each_tick_once(
    replicas: Make, k8s_api_client: client.ApiClient, k8s_namespace: str
) -> None:
    ran: list[tuple[str, int | None]] = []
    reports = []
    for replica in replicas(2):

        @replica.once_per_tick("report", lock_at_most_for=60)
        def report(ctx: JobContext) -> str:
            ran.append((ctx.identity, ctx.fencing_token))
            return ctx.identity

        reports.append(report)
    for minute in range(4):
        tick = T0 + timedelta(minutes=minute)
        results = [report(tick=tick) for report in reports]
        assert results.count(None) == 1  # the other replica skipped
    assert [token for _, token in ran] == [1, 2, 3, 4]
    state = job_state_from_lease(_lease(k8s_api_client, k8s_namespace, "billing.report"))
    assert state.count("succeeded") == 4


def test_the_async_forms_contending_on_one_loop(
    replicas: Make, k8s_api_client: client.ApiClient, k8s_namespace: str
) -> None:
    group = replicas(3)
    ran: list[tuple[str, datetime]] = []

    async def with_block(replica: TickLock, tick: datetime) -> bool:
        try:
            async with replica.hold("sweep", tick=tick, lock_at_most_for=60) as ctx:
                await asyncio.sleep(0.01)  # a run that holds across an await: the scenario
                ran.append((ctx.identity, tick))
                return True
        except TickSkipped:
            return False

    decorated = []
    for replica in group:

        @replica.once_per_tick("sweep", lock_at_most_for=60)
        async def sweep(ctx: JobContext) -> str:
            await asyncio.sleep(0.01)  # a run that holds across an await: the scenario
            assert ctx.tick is not None
            ran.append((ctx.identity, ctx.tick))
            return "swept"

        decorated.append(sweep)

    async def main() -> None:
        for minute in range(3):
            tick = T0 + timedelta(minutes=minute)
            won = await asyncio.gather(*(with_block(r, tick) for r in group))
            assert won.count(True) == 1
        for minute in range(3, 6):
            tick = T0 + timedelta(minutes=minute)
            results = await asyncio.gather(*(d(tick=tick) for d in decorated))
            assert results.count("swept") == 1 and results.count(None) == 2

    asyncio.run(main())
    assert Counter(tick for _, tick in ran) == Counter(
        {T0 + timedelta(minutes=m): 1 for m in range(6)}
    )
    state = job_state_from_lease(_lease(k8s_api_client, k8s_namespace, "billing.sweep"))
    assert state.count("succeeded") == 6


def test_jobs_and_the_tick_lock_share_one_lock(
    replicas: Make, k8s_api_client: client.ApiClient, k8s_namespace: str
) -> None:
    """The same Lease and the same claim: a tick Jobs ran is refused to the tick lock and the
    other way round (one lock path, one Lease format)."""
    (ticks,) = replicas(1)
    jobs = Jobs("billing", namespace=k8s_namespace, identity="jobs-0", api_client=k8s_api_client)
    jobs.cron(NEVER, name="invoices", lock_at_most_for=60)(lambda: None)
    jobs.start()
    try:
        assert jobs.fire("invoices", T0) == "succeeded"
        with (
            pytest.raises(TickSkipped) as skipped,
            ticks.hold("invoices", tick=T0, lock_at_most_for=60),
        ):
            pass  # pragma: no cover
        assert skipped.value.reason == "already-claimed"
        later = T0 + timedelta(minutes=1)
        with ticks.hold("invoices", tick=later, lock_at_most_for=60) as ctx:
            assert ctx.fencing_token == 2
        assert jobs.fire("invoices", later) is None
    finally:
        jobs.stop()
    state = job_state_from_lease(_lease(k8s_api_client, k8s_namespace, "billing.invoices"))
    assert state.last_run is not None and state.last_run.holder == "replica-0"
    assert state.count("succeeded") == 2


def test_with_watch_a_new_process_takes_over_a_crashed_holder_at_its_first_tick(
    k8s_api_client: client.ApiClient, k8s_namespace: str
) -> None:
    """Expiry by observation: a process without the watch meets the crashed holder's Lease for
    the first time at its claim and must skip that tick as held; with ``watch=True`` it has seen
    the Lease since it started, so the first tick after ``lock_at_most_for`` is taken over (and
    the crashed run recorded lost)."""
    crashed = TickLock(
        "billing", namespace=k8s_namespace, identity="crashed", api_client=k8s_api_client
    )
    hold = crashed.hold("invoices", tick=T0, lock_at_most_for=2)
    hold.__enter__()
    grant = crashed._runners["invoices"][0]._running
    assert grant is not None
    grant._stop.set()  # the process dies: no extension, no release
    assert grant._thread is not None
    grant._thread.join(10)

    watching_clock, plain_clock = FakeClock(wall=T0), FakeClock(wall=T0)
    watching = TickLock(
        "billing",
        namespace=k8s_namespace,
        identity="watching",
        api_client=k8s_api_client,
        clock=watching_clock,
        watch=True,
    )
    plain = TickLock(
        "billing",
        namespace=k8s_namespace,
        identity="plain",
        api_client=k8s_api_client,
        clock=plain_clock,
    )
    try:
        assert watching._informer is not None and watching._informer.synced.wait(10)
        seen = watching._io().observations
        while seen.current("billing.invoices").observation is None:
            seen.wait_for_change(seen.generation, 10)
        for clock in (watching_clock, plain_clock):
            clock.advance(3)  # longer than lock_at_most_for, on each process's own clock
        later = T0 + timedelta(minutes=1)
        with (
            pytest.raises(TickSkipped) as skipped,
            plain.hold("invoices", tick=later, lock_at_most_for=2),
        ):
            pass  # pragma: no cover
        assert skipped.value.reason == "held"  # first sight of the Lease: not expired for it
        with watching.hold("invoices", tick=later, lock_at_most_for=2) as ctx:
            assert ctx.fencing_token == 2
    finally:
        watching.close()
    state = job_state_from_lease(_lease(k8s_api_client, k8s_namespace, "billing.invoices"))
    assert state.count("lost") == 1 and state.count("succeeded") == 1
    with pytest.raises(ConfigError, match="closed"):
        watching.hold("reports", tick=T0)

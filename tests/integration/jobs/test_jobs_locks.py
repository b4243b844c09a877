"""ONCE_PER_TICK and EVERY_REPLICA jobs on several replicas against a real API contract.

These run on the embedded API server by default and, unchanged, on a real cluster when one is
given with ``--kubeconfig`` (see docs/testing.md). Replicas are ``Jobs`` instances with distinct
identities sharing one namespace; ticks are driven with ``Jobs.fire`` (the same path a scheduler
tick takes) so that the tests decide interleavings instead of waiting for wall-clock ticks.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import kubernetes.watch
import pytest
from kubernetes import client

from k8slease import JobContext, Jobs, Mode
from k8slease.lease.jobrecord import job_state_from_lease
from k8slease.lease.record import record_from_lease
from k8slease.lease.transport import LeaseTransport
from tests.support.factories import JobsFactory
from tests.support.fakeclock import FakeClock
from tests.support.firing import fire_together
from tests.support.timing import NEVER

T0 = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)


class Runs:
    """What ran where, thread-safe."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: list[tuple[str, datetime | None, int | None]] = []

    def add(self, ctx: JobContext) -> None:
        with self.lock:
            self.items.append((ctx.identity, ctx.tick, ctx.fencing_token))

    def per_tick(self) -> Counter[datetime | None]:
        with self.lock:
            return Counter(tick for _, tick, _ in self.items)


@pytest.fixture
def replicas(new_jobs: JobsFactory) -> Iterator[Callable[..., list[Jobs]]]:
    started: list[Jobs] = []

    def make(count: int, register: Callable[[Jobs], None], group: str = "billing") -> list[Jobs]:
        made = []
        for i in range(count):
            jobs = new_jobs(group, identity=f"replica-{i}")
            register(jobs)
            jobs.start()
            made.append(jobs)
            started.append(jobs)
        return made

    yield make
    for jobs in started:
        jobs.stop()


def test_once_per_tick_runs_exactly_once_per_tick_across_three_replicas(
    replicas: Callable[..., list[Jobs]], k8s_api_client: client.ApiClient, k8s_namespace: str
) -> None:
    runs = Runs()

    def register(jobs: Jobs) -> None:
        jobs.cron(NEVER, mode=Mode.ONCE_PER_TICK, name="invoices", lock_at_most_for=60)(runs.add)

    group = replicas(3, register)
    ticks = [T0 + timedelta(minutes=i) for i in range(25)]
    for tick in ticks:
        outcomes = fire_together(group, "invoices", tick)
        assert outcomes.count("succeeded") == 1 and outcomes.count(None) == 2, outcomes
    assert runs.per_tick() == Counter({tick: 1 for tick in ticks})
    tokens = [token for _, _, token in runs.items]
    assert tokens == sorted(tokens) and len(set(tokens)) == len(ticks)

    lease = LeaseTransport(k8s_api_client, k8s_namespace).get("billing.invoices")
    state = job_state_from_lease(lease)
    assert state.claimed_tick == ticks[-1] == state.completed_tick
    assert state.count("succeeded") == len(ticks)
    assert state.last_run is not None and state.last_run.holder.startswith("replica-")
    assert record_from_lease(lease).holder == ""  # released after the run


def test_a_replica_whose_scheduler_fires_late_does_not_rerun_a_released_tick(
    replicas: Callable[..., list[Jobs]],
) -> None:
    runs = Runs()

    def register(jobs: Jobs) -> None:
        jobs.cron(NEVER, name="invoices", lock_at_most_for=60)(runs.add)

    on_time, late = replicas(2, register)
    for minute in range(10):
        tick = T0 + timedelta(minutes=minute)
        assert on_time.fire("invoices", tick) == "succeeded"
        # The lock is free again (released); the late replica's tick must still be refused.
        assert late.fire("invoices", tick) is None
    assert runs.per_tick() == Counter({T0 + timedelta(minutes=m): 1 for m in range(10)})
    assert late.runners["invoices"].stats.skips == {"locked": 10}


def test_every_replica_jobs_run_everywhere_and_touch_no_lease(
    replicas: Callable[..., list[Jobs]], k8s_api_client: client.ApiClient, k8s_namespace: str
) -> None:
    runs = Runs()

    def register(jobs: Jobs) -> None:
        jobs.cron(NEVER, mode=Mode.EVERY_REPLICA, name="refresh-cache")(runs.add)

    group = replicas(3, register)
    for jobs in group:
        assert jobs.fire("refresh-cache", T0) == "succeeded"
    assert sorted(identity for identity, _, _ in runs.items) == [
        "replica-0",
        "replica-1",
        "replica-2",
    ]
    assert all(token is None for _, _, token in runs.items)
    items, _ = LeaseTransport(k8s_api_client, k8s_namespace).list()
    assert items == []


def test_a_failing_run_is_recorded_with_its_error_and_a_warning_event(
    replicas: Callable[..., list[Jobs]], k8s_api_client: client.ApiClient, k8s_namespace: str
) -> None:
    def boom(ctx: JobContext) -> None:
        raise RuntimeError("ledger offline")

    def register(jobs: Jobs) -> None:
        jobs.cron(NEVER, name="invoices", lock_at_most_for=60)(boom)

    (jobs,) = replicas(1, register)
    assert jobs.fire("invoices", T0) == "failed"
    lease = LeaseTransport(k8s_api_client, k8s_namespace).get("billing.invoices")
    state = job_state_from_lease(lease)
    assert state.last_run is not None
    assert state.last_run.outcome == "failed"
    assert state.last_run.error == "RuntimeError: ledger offline"
    assert state.completed_tick == T0 and state.count("failed") == 1
    core = client.CoreV1Api(k8s_api_client)
    # Events are posted by a thread of their own (off the run's path): watch for it
    watch: Any = kubernetes.watch.Watch()  # type: ignore[no-untyped-call]
    for change in watch.stream(core.list_namespaced_event, k8s_namespace, timeout_seconds=10):
        if change["object"].reason == "JobFailed":
            watch.stop()
    events = core.list_namespaced_event(k8s_namespace).items
    failed = [e for e in events if e.reason == "JobFailed"]
    assert len(failed) == 1
    assert failed[0].type == "Warning"
    assert failed[0].involved_object.name == "billing.invoices"
    assert "ledger offline" in failed[0].message


def test_a_long_run_keeps_its_lock_alive_past_lock_at_most_for(
    replicas: Callable[..., list[Jobs]], k8s_api_client: client.ApiClient, k8s_namespace: str
) -> None:
    """lock_at_most_for is 1 s; the run lasts until the other replica has tried to take the lock
    for more than 3 s. Keep-alive writes every 1/3 s keep changing the Lease, so the contender,
    judging expiry by how long it saw the Lease unchanged, never takes it."""
    release = threading.Event()
    running = threading.Event()
    attempts: list[str | None] = []
    token_seen: list[int | None] = []

    def long_job(ctx: JobContext) -> None:
        token_seen.append(ctx.fencing_token)
        running.set()
        release.wait(30)
        assert not ctx.lost.is_set()

    def register(jobs: Jobs) -> None:
        jobs.cron(NEVER, name="long", lock_at_most_for=1)(long_job)

    holder, contender = replicas(2, register)
    runner = threading.Thread(target=holder.fire, args=("long", T0))
    runner.start()
    assert running.wait(10)  # the holder has its lock before the contender starts trying
    transport = LeaseTransport(k8s_api_client, k8s_namespace)
    deadline = threading.Event()
    timer = threading.Timer(3.5, deadline.set)
    timer.start()
    renew_times = set()
    try:
        while not deadline.is_set():
            tick = T0 + timedelta(minutes=1 + len(attempts))
            attempts.append(contender.fire("long", tick))
            renew_times.add(record_from_lease(transport.get("billing.long")).renew_time)
            deadline.wait(0.2)
    finally:
        release.set()
        runner.join()
        timer.cancel()
    assert attempts and all(result is None for result in attempts)
    assert token_seen == [1]  # one run, under the one grant
    assert len(renew_times) >= 5  # extended about 3 times a second
    state = job_state_from_lease(transport.get("billing.long"))
    assert state.last_run is not None and state.last_run.outcome == "succeeded"
    assert state.last_run.holder == "replica-0"


def test_runs_and_skips_are_counted_in_metrics(new_jobs: JobsFactory) -> None:
    prometheus_client = pytest.importorskip("prometheus_client")
    from k8slease.metrics import PrometheusJobMetrics

    registry = prometheus_client.CollectorRegistry()
    metrics = PrometheusJobMetrics(registry)
    started = []
    try:
        for i in range(2):
            jobs = new_jobs(
                "metered",
                identity=f"m{i}",
                metrics=metrics,
            )
            jobs.cron(NEVER, name="report", lock_at_most_for=60)(lambda ctx: None)
            jobs.start()
            started.append(jobs)
        assert started[0].fire("report", T0) == "succeeded"
        assert started[1].fire("report", T0) is None
    finally:
        for jobs in started:
            jobs.stop()
    labels = {"group": "metered", "job": "report"}
    assert (
        registry.get_sample_value("k8slease_job_runs_total", {**labels, "outcome": "succeeded"})
        == 1
    )
    assert (
        registry.get_sample_value("k8slease_job_skips_total", {**labels, "reason": "locked"}) == 1
    )
    assert registry.get_sample_value("k8slease_job_run_seconds_count", labels) == 1


def test_fencing_tokens_keep_growing_when_the_lock_lease_is_deleted(
    k8s_api_client: client.ApiClient, k8s_namespace: str, new_jobs: JobsFactory
) -> None:
    """Deleting a job's Lease (say, to "reset" it) must not hand out tokens that a fenced store
    has already seen: this replica remembers the highest token it saw. A Lease that vanished
    after it was seen is held by someone unknown for lock_at_most_for (issue 15): someone may
    have claimed it, unseen, just before the deletion."""
    runs = Runs()
    clock = FakeClock(wall=T0 + timedelta(minutes=3))
    jobs = new_jobs("billing", identity="solo", clock=clock)
    jobs.cron(NEVER, name="invoices", lock_at_most_for=60)(runs.add)
    jobs.start()
    try:
        for minute in range(3):
            assert jobs.fire("invoices", T0 + timedelta(minutes=minute)) == "succeeded"
        LeaseTransport(k8s_api_client, k8s_namespace).delete("billing.invoices")
        assert jobs.fire("invoices", T0 + timedelta(minutes=3)) is None  # gone: unknown
        clock.advance(60)
        assert jobs.fire("invoices", T0 + timedelta(minutes=4)) == "succeeded"
    finally:
        jobs.stop()
    assert [token for _, _, token in runs.items] == [1, 2, 3, 4]

"""The scheduler-agnostic tick lock (issue 25) on a fake Lease store and a fake clock: two
"replicas" (two TickLocks with distinct identities) share one store."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client

from k8slease import ConfigError, JobContext, TickLock, TickSkipped
from k8slease.jobs.lock import JobLock
from k8slease.jobs.runner import TickRunner
from tests.support.fakeclock import FakeClock
from tests.support.jobleases import LosingStore, tick_lock_on

T0 = datetime(2026, 1, 1, 2, 0, tzinfo=UTC)


class Recorder:
    """JobMetrics that remembers what it was told."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, str, str]] = []
        self.skips: list[tuple[str, str, str]] = []

    def ran(self, group: str, job: str, outcome: str, seconds: float) -> None:
        self.runs.append((group, job, outcome))

    def skipped(self, group: str, job: str, reason: str) -> None:
        self.skips.append((group, job, reason))


def _replica(
    store: LosingStore, clock: FakeClock, me: str, metrics: Recorder | None = None
) -> TickLock:
    # no API server in unit tests: a fake store, no Events
    return tick_lock_on(store, clock, me, metrics or Recorder())


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(wall=T0)


def test_two_replicas_one_tick_exactly_one_runs_and_the_loser_learns_at_once(
    clock: FakeClock,
) -> None:
    store = LosingStore()
    metrics = Recorder()
    a, b = _replica(store, clock, "r0", metrics), _replica(store, clock, "r1", metrics)
    ran: list[JobContext] = []
    with a.hold("job", tick=T0, lock_at_most_for=60) as ctx:
        ran.append(ctx)
        # the other replica, while the winner runs: told at once, no waiting
        with pytest.raises(TickSkipped) as skipped, b.hold("job", tick=T0, lock_at_most_for=60):
            ran.append(ctx)  # pragma: no cover - must not run
    assert [c.identity for c in ran] == ["r0"]
    assert ran[0].tick == T0 and ran[0].fencing_token == 1 and not ran[0].lost.is_set()
    assert skipped.value.reason == "already-claimed" and skipped.value.tick == T0
    # after the run: the same tick is refused as claimed, by both replicas
    for replica in (a, b):
        with pytest.raises(TickSkipped) as again, replica.hold("job", tick=T0, lock_at_most_for=60):
            pass  # pragma: no cover
        assert again.value.reason == "already-claimed"
    run = store.view().job.last_run
    assert run is not None
    assert (run.holder, run.tick, run.outcome, run.fencing_token) == ("r0", T0, "succeeded", 1)
    assert store.view().record.holder == ""  # released in the same write
    assert metrics.runs == [("g", "job", "succeeded")]
    assert sorted(reason for *_, reason in metrics.skips) == ["locked"] * 3


def test_each_grant_gets_a_larger_fencing_token_whoever_wins(clock: FakeClock) -> None:
    store = LosingStore()
    replicas = [_replica(store, clock, "r0"), _replica(store, clock, "r1")]
    tokens = []
    for i in range(6):
        tick = T0 + timedelta(minutes=i)
        winner = replicas[i % 2]
        with winner.hold("job", tick=tick, lock_at_most_for=60) as ctx:
            tokens.append(ctx.fencing_token)
        clock.advance(60)
    assert tokens == [1, 2, 3, 4, 5, 6]
    assert store.view().job.counts == {"succeeded": 6}


def test_an_exception_in_the_block_is_recorded_failed_and_raised_again(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    store = LosingStore()
    metrics = Recorder()
    a = _replica(store, clock, "r0", metrics)
    with pytest.raises(ZeroDivisionError), a.hold("job", tick=T0, lock_at_most_for=60):
        _ = 1 / 0
    run = store.view().job.last_run
    assert run is not None and run.outcome == "failed"
    assert run.error is not None and "ZeroDivisionError" in run.error
    assert metrics.runs == [("g", "job", "failed")]
    assert any("job.raised" in r.getMessage() for r in caplog.records)
    # the lock was released: the next tick runs
    with a.hold("job", tick=T0 + timedelta(minutes=1), lock_at_most_for=60) as ctx:
        assert ctx.fencing_token == 2


def test_the_tick_is_now_floored_to_the_period_so_replicas_firing_apart_agree(
    clock: FakeClock,
) -> None:
    store = LosingStore()
    a, b = _replica(store, clock, "r0"), _replica(store, clock, "r1")
    clock.advance(7)  # 02:00:07
    with a.hold("job", period=60, lock_at_most_for=30) as ctx:
        assert ctx.tick == T0
    clock.advance(40)  # 02:00:47, same minute: the other replica fires late and skips
    with pytest.raises(TickSkipped) as skipped, b.hold("job", period=60, lock_at_most_for=30):
        pass  # pragma: no cover
    assert skipped.value.tick == T0 and skipped.value.reason == "already-claimed"
    clock.advance(20)  # 02:01:07: the next minute runs
    with b.hold("job", period=timedelta(minutes=1), lock_at_most_for=30) as ctx:
        assert ctx.tick == T0 + timedelta(minutes=1) and ctx.identity == "r1"


def test_lock_at_least_for_keeps_a_fast_run_s_lock(clock: FakeClock) -> None:
    store = LosingStore()
    a, b = _replica(store, clock, "r0"), _replica(store, clock, "r1")
    with a.hold("job", tick=T0, lock_at_most_for=60, lock_at_least_for=30):
        pass
    assert store.view().record.holder == "r0"  # kept for the rest of lock_at_least_for
    tick = T0 + timedelta(seconds=10)
    with (
        pytest.raises(TickSkipped) as skipped,
        b.hold("job", tick=tick, lock_at_most_for=60, lock_at_least_for=30),
    ):
        pass  # pragma: no cover
    assert skipped.value.reason == "held"


def test_an_unreachable_api_server_is_a_skip_with_one_warning(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    store = LosingStore()
    store.down = True
    a = _replica(store, clock, "r0")
    for i in range(2):
        with (
            pytest.raises(TickSkipped) as skipped,
            a.hold("job", tick=T0 + timedelta(minutes=i), lock_at_most_for=60),
        ):
            pass  # pragma: no cover
        assert skipped.value.reason == "api-unreachable"
    warnings = [r for r in caplog.records if "job.api_unreachable" in r.getMessage()]
    assert len(warnings) == 1


def test_a_skip_is_logged_at_debug(clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    store = LosingStore()
    a, b = _replica(store, clock, "r0"), _replica(store, clock, "r1")
    caplog.set_level(logging.DEBUG, logger="k8slease")
    with a.hold("job", tick=T0, lock_at_most_for=60):
        pass
    caplog.clear()
    with contextlib.suppress(TickSkipped), b.hold("job", tick=T0, lock_at_most_for=60):
        raise AssertionError("must not run")  # pragma: no cover
    skips = [r for r in caplog.records if "job.skipped" in r.getMessage()]
    assert skips and all(r.levelno == logging.DEBUG for r in skips)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_the_decorator_runs_zero_and_one_argument_functions_once_per_tick(
    clock: FakeClock,
) -> None:
    store = LosingStore()
    a, b = _replica(store, clock, "r0"), _replica(store, clock, "r1")
    seen: list[tuple[str, int | None]] = []

    def make(replica: TickLock) -> Any:
        @replica.once_per_tick("job", lock_at_most_for=60)
        def report(ctx: JobContext) -> str:
            seen.append((ctx.identity, ctx.fencing_token))
            return "done"

        return report

    report_a, report_b = make(a), make(b)
    assert report_a(tick=T0) == "done"
    assert report_b(tick=T0) is None  # skipped
    calls: list[str] = []

    @b.once_per_tick("job", period=60, lock_at_most_for=60)
    def zero_args() -> None:
        calls.append("ran")

    clock.advance(60)
    zero_args()
    assert seen == [("r0", 1)] and calls == ["ran"]
    assert store.view().job.counts == {"succeeded": 2}


def test_the_bare_decorator_names_the_job_after_the_function(clock: FakeClock) -> None:
    store = LosingStore()
    a = _replica(store, clock, "r0")
    store_name: list[str] = []

    @a.once_per_tick
    def job() -> None:
        store_name.append("ran")

    job(tick=T0)
    assert store_name == ["ran"] and store.view().name == "g.job"


def test_the_decorator_records_and_reraises_an_exception(clock: FakeClock) -> None:
    store = LosingStore()
    a = _replica(store, clock, "r0")

    @a.once_per_tick("job", lock_at_most_for=60)
    def broken() -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        broken(tick=T0)
    run = store.view().job.last_run
    assert run is not None and run.outcome == "failed" and run.error == "RuntimeError: boom"


def test_async_with_and_the_async_decorator(clock: FakeClock) -> None:
    store = LosingStore()
    a, b = _replica(store, clock, "r0"), _replica(store, clock, "r1")

    @b.once_per_tick("job", lock_at_most_for=60)
    async def tick_job(ctx: JobContext) -> int | None:
        await asyncio.sleep(0)
        return ctx.fencing_token

    async def main() -> list[Any]:
        out: list[Any] = []
        async with a.hold("job", tick=T0, lock_at_most_for=60) as ctx:
            out.append(ctx.fencing_token)
        try:
            async with b.hold("job", tick=T0, lock_at_most_for=60):
                out.append("ran twice")  # pragma: no cover
        except TickSkipped as skip:
            out.append(skip.reason)
        out.append(await tick_job(tick=T0))  # skipped: None
        out.append(await tick_job(tick=T0 + timedelta(minutes=1)))
        return out

    assert asyncio.run(main()) == [1, "already-claimed", None, 2]
    assert store.view().job.counts == {"succeeded": 2}


def test_an_async_job_is_cancelled_when_its_lock_is_lost(clock: FakeClock) -> None:
    store = LosingStore()
    a = _replica(store, clock, "r0")
    cancelled: list[bool] = []

    @a.once_per_tick("job", lock_at_most_for=60)
    async def long_job() -> str:
        runner = a._runners["job"][0]
        assert runner._running is not None
        runner._running.mark_lost()  # as the keep-alive does when it cannot extend the lock
        try:
            await asyncio.Event().wait()  # runs until cancelled
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "finished"  # pragma: no cover

    assert asyncio.run(long_job(tick=T0)) is None
    run = store.view().job.last_run
    assert cancelled == [True] and run is not None and run.outcome == "lost"


def test_a_hold_is_used_once(clock: FakeClock) -> None:
    a = _replica(LosingStore(), clock, "r0")
    hold = a.hold("job", tick=T0, lock_at_most_for=60)
    with hold:
        pass
    with pytest.raises(RuntimeError, match="used once"), hold:
        pass  # pragma: no cover


def test_tick_lock_jobs_run_on_the_jobs_lock_path(clock: FakeClock) -> None:
    """One code path: the tick lock's job is a JobLock driven by a TickRunner, as in Jobs."""
    a = _replica(LosingStore(), clock, "r0")
    with a.hold("job", tick=T0, lock_at_most_for=60):
        pass
    runner = a._runners["job"][0]
    assert type(runner) is TickRunner and type(runner.lock) is JobLock
    assert runner.stats.runs == {"succeeded": 1}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "pass tick="),
        ({"tick": datetime(2026, 1, 1)}, "timezone-aware"),
        ({"tick": "2026-01-01"}, "must be a datetime"),
        ({"period": 0}, "period must be"),
        ({"period": -timedelta(seconds=1)}, "period must be positive"),
        ({"period": True}, "period must be"),
        ({"tick": T0, "lock_at_most_for": 0}, "lock_at_most_for"),
        ({"tick": T0, "lock_at_most_for": 10, "lock_at_least_for": 20}, "lock_at_least_for"),
        ({"tick": T0, "anchor": datetime(2000, 1, 1)}, "anchor must be timezone-aware"),
    ],
)
def test_bad_options_are_refused_before_any_request(
    clock: FakeClock, kwargs: dict[str, Any], message: str
) -> None:
    store = LosingStore()
    a = _replica(store, clock, "r0")
    with pytest.raises(ConfigError, match=message):
        a.hold("job", **kwargs)
    assert store.writes == 0 and store.lease is None


def test_bad_names_and_shapes_are_refused(clock: FakeClock) -> None:
    a = _replica(LosingStore(), clock, "r0")
    with pytest.raises(ConfigError, match="DNS label"):
        a.hold("Bad_Name", tick=T0)
    with pytest.raises(ConfigError, match="must take one argument"):

        @a.once_per_tick("job")
        def two(x: int, y: int) -> None: ...

    with pytest.raises(ConfigError, match="period must be"):
        a.once_per_tick("job", period="1m")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="must not contain"):
        TickLock("a.b", namespace="default", identity="r0", api_client=client.ApiClient())
    with pytest.raises(ConfigError, match="identity"):
        TickLock("g", namespace="default", identity=" ", api_client=client.ApiClient())


def test_a_job_keeps_the_lock_times_of_its_first_use(clock: FakeClock) -> None:
    a = _replica(LosingStore(), clock, "r0")
    with a.hold("job", tick=T0, lock_at_most_for=60):
        pass
    with pytest.raises(ConfigError, match="lock_at_most_for=60"):
        a.hold("job", tick=T0 + timedelta(minutes=1), lock_at_most_for=90)


@pytest.mark.parametrize("form", ["sync", "async"])
def test_an_earlier_claim_applied_after_its_answer_was_lost_runs_first_then_the_tick(
    clock: FakeClock, form: str
) -> None:
    """Issue 26's case through the decorator: the claim of T0 timed out (skipped as the API
    being unreachable) but was applied; the next call settles it, runs T0, then T1."""
    store = LosingStore()
    a = _replica(store, clock, "r0")
    seen: list[datetime | None] = []

    if form == "sync":

        @a.once_per_tick("job", lock_at_most_for=60)
        def job(ctx: JobContext) -> None:
            seen.append(ctx.tick)

        call: Any = job
    else:

        @a.once_per_tick("job", lock_at_most_for=60)
        async def ajob(ctx: JobContext) -> None:
            seen.append(ctx.tick)

        def call(*, tick: datetime) -> None:
            asyncio.run(ajob(tick=tick))

    store.lose = ["later"]
    call(tick=T0)  # no answer: skipped as api-unreachable
    assert seen == []
    store.land()  # ... but the server applied it
    clock.advance(10)  # within the claim's keep budget (40 s): it is run, not released
    t1 = T0 + timedelta(seconds=10)
    call(tick=t1)
    assert seen == [T0, t1]
    assert store.view().job.counts == {"succeeded": 2}


def test_a_decorated_function_takes_only_tick_as_a_scheduler_inspecting_it_sees(
    clock: FakeClock,
) -> None:
    import inspect

    a = _replica(LosingStore(), clock, "r0")

    @a.once_per_tick("job", period=60)
    def report(ctx: JobContext) -> None:
        """Send the report."""

    @a.once_per_tick("other", period=60)
    async def sweep(ctx: JobContext) -> None: ...

    for decorated in (report, sweep):
        assert list(inspect.signature(decorated).parameters) == ["tick"]
    assert report.__name__ == "report" and report.__doc__ == "Send the report."
    assert asyncio.iscoroutinefunction(sweep)

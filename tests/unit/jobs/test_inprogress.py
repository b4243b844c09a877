"""Runs cancelled by the shutdown of an ``AsyncIOScheduler`` end before ``Jobs.stop()`` returns
off the loop's thread (:mod:`k8slease.jobs.inprogress`), and a run cancelled during its claim
releases the grant the claim brings instead of leaving the lock held."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest
from apscheduler.triggers.interval import IntervalTrigger

from k8slease.jobs.context import JobContext
from k8slease.jobs.inprogress import RunsInProgress, wait_for_runs
from k8slease.jobs.runner import TickRunner
from k8slease.jobs.spec import JobSpec, Mode
from k8slease.lease.jobrecord import job_state_from_lease
from k8slease.logs import get_logger
from tests.support.fakeclock import FakeClock
from tests.support.jobleases import R0, GatedStore, job_lock, tick_at

log = get_logger("k8slease.jobs")


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop running in a thread of its own (the app's loop, seen from a stop thread)."""
    running = asyncio.new_event_loop()
    thread = threading.Thread(target=running.run_forever, daemon=True)
    thread.start()
    yield running
    if running.is_running():
        running.call_soon_threadsafe(running.stop)
    thread.join(5)
    running.close()


def start_run(loop: asyncio.AbstractEventLoop, runs: RunsInProgress, end: threading.Event) -> None:
    """A run, counted, on ``loop`` until ``end`` is set; returns once it is counted."""
    counted = threading.Event()

    async def run() -> None:
        with runs.counted():
            counted.set()
            await asyncio.to_thread(end.wait, 10)

    asyncio.run_coroutine_threadsafe(run(), loop)
    assert counted.wait(5)


def test_stop_off_the_loop_waits_until_the_run_has_ended(loop: asyncio.AbstractEventLoop) -> None:
    runs, end, returned = RunsInProgress(), threading.Event(), threading.Event()
    start_run(loop, runs, end)
    outcome: list[bool] = []

    def stop() -> None:
        outcome.append(wait_for_runs(loop, [runs], log=log))
        returned.set()

    threading.Thread(target=stop, daemon=True).start()
    assert not returned.wait(0.3), "returned while the run was in progress"
    end.set()
    assert returned.wait(5)
    assert outcome == [True] and runs.count == 0


def test_stop_gives_up_waiting_when_the_loop_stops_running(
    loop: asyncio.AbstractEventLoop,
) -> None:
    runs, end = RunsInProgress(), threading.Event()
    start_run(loop, runs, end)
    try:
        loop.call_soon_threadsafe(loop.stop)
        assert wait_for_runs(loop, [runs], log=log) is False
        assert runs.count == 1  # abandoned, not waited out
    finally:
        end.set()


def test_stop_on_the_loops_own_thread_cannot_wait() -> None:
    async def main() -> bool:
        runs = RunsInProgress()
        with runs.counted():
            return wait_for_runs(asyncio.get_running_loop(), [runs], log=log)

    assert asyncio.run(main()) is False


def test_a_run_cancelled_during_its_claim_releases_the_grant_it_brings() -> None:
    clock, store = FakeClock(), GatedStore()
    ran: list[object] = []

    async def job(ctx: JobContext) -> None:
        ran.append(ctx.tick)

    spec = JobSpec(
        name="job", func=job, mode=Mode.ONCE_PER_TICK, trigger=IntervalTrigger(seconds=2)
    )
    runner = TickRunner(spec, R0, lock=job_lock(store, clock), clock=clock)

    async def main() -> None:
        task = asyncio.ensure_future(runner.run_tick_async(tick_at(clock)))
        await asyncio.to_thread(store.entered.wait, 5)
        task.cancel()  # what the scheduler's shutdown does
        for _ in range(5):
            await asyncio.sleep(0)  # let the task take the cancellation in
        assert not task.done(), "the run ended while its claim was still under way"
        assert runner.runs.count == 1
        store.go.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert runner.runs.count == 0

    asyncio.run(main())
    assert ran == []
    assert store.lease is not None
    assert not store.lease["spec"].get("holderIdentity"), "the grant was left held"
    last = job_state_from_lease(store.lease).last_run
    assert last is not None
    assert (last.outcome, last.error) == ("failed", "cancelled before it started")

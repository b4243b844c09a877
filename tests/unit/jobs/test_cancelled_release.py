"""A coroutine run cancelled from outside (a shutdown: ``async with jobs`` left, SIGTERM, the
``AsyncIOScheduler`` shutting down, ``asyncio.run`` ending) releases its lock with a ``failed``
run record (``error=cancelled``) in a worker thread: before, the release ran on the loop's
thread, and every other task of the loop stood still for its HTTP request (up to the request
timeout on a slow API server).

The release waits (``GatedStore``) until a coroutine on the same loop lets it go on: the loop
must run while the release is under way. Each form of a coroutine run is checked: a ``Jobs`` job
(``TickRunner``), ``TickLock.once_per_tick`` on an ``async def`` and ``async with ticks.hold``.

A run cancelled while its claim waits at the server awaits the claim's answer: a grant answered
after the cancellation is released at once (``failed``, ``cancelled before it started``), never
run; before, the tick-lock forms raised ``CancelledError`` at once and the grant that landed
afterwards was left held until ``lock_at_most_for``, the next ticks skipped on every replica.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from apscheduler.triggers.interval import IntervalTrigger

from k8slease import JobContext, TickLock
from k8slease.jobs.runner import TickRunner
from k8slease.jobs.spec import JobSpec, Mode
from k8slease.lease.jobrecord import job_state_from_lease
from tests.support.fakeclock import FakeClock
from tests.support.jobleases import R0, GatedStore, job_lock, tick_lock_on

T0 = datetime(2026, 1, 1, 2, 0, tzinfo=UTC)

#: how long the gated release waits for the loop before it gives up (it is let go of at once
#: when the loop runs; this only bounds a test of the defect)
WAIT = 3.0

#: a form of a coroutine run: given the store and the event its body sets once it runs, the
#: awaitable that claims T0, runs the body until cancelled and releases
Form = Callable[[GatedStore, asyncio.Event], Awaitable[Any]]


async def body(started: asyncio.Event) -> None:
    started.set()
    await asyncio.Event().wait()  # until cancelled


def jobs_run(store: GatedStore, started: asyncio.Event) -> Awaitable[Any]:
    async def job(ctx: JobContext) -> None:
        await body(started)

    spec = JobSpec(
        name="job", func=job, mode=Mode.ONCE_PER_TICK, trigger=IntervalTrigger(seconds=60)
    )
    clock = FakeClock(wall=T0)
    lock = job_lock(store, clock, at_most=60)
    runner = TickRunner(spec, R0, lock=lock, clock=clock)
    return runner.run_tick_async(T0)


def once_per_tick_run(store: GatedStore, started: asyncio.Event) -> Awaitable[Any]:
    ticks = tick_lock_on(store, FakeClock(wall=T0), "r0")

    @ticks.once_per_tick(lock_at_most_for=60)
    async def job() -> None:
        await body(started)

    return job(tick=T0)


async def hold_run(store: GatedStore, started: asyncio.Event) -> None:
    ticks = tick_lock_on(store, FakeClock(wall=T0), "r0")
    async with ticks.hold("job", tick=T0, lock_at_most_for=60):
        await body(started)


FORMS = pytest.mark.parametrize(
    "form", [jobs_run, once_per_tick_run, hold_run], ids=["jobs", "once-per-tick", "hold"]
)


def released_cancelled(store: GatedStore) -> None:
    """The release landed: the lock free, its run record ``failed``/``cancelled``; and the loop
    let it go on (it ran while the release waited)."""
    assert store.go_in_time, "the release stalled the event loop until it gave up waiting"
    assert store.lease is not None
    assert not store.lease["spec"].get("holderIdentity"), "the lock was left held"
    last = job_state_from_lease(store.lease).last_run
    assert last is not None and (last.outcome, last.error) == ("failed", "cancelled")


async def let_go_once_under_way(store: GatedStore) -> None:
    """On the loop: wait (in a thread) until the release is under way, then let it go on."""
    assert await asyncio.to_thread(store.entered.wait, WAIT * 2)
    store.go.set()


def cancel_mid_run(
    form: Form, during_release: Callable[[GatedStore, asyncio.Future[Any]], Awaitable[None]]
) -> None:
    """Run ``form`` on a loop and cancel it once its body runs, as a shutdown does; then run
    ``during_release(store, task)`` on the same loop (the release waits for the loop to let it
    go on); the run must end cancelled, its release landed."""
    store = GatedStore("replace", wait=WAIT)

    async def main() -> None:
        started = asyncio.Event()
        task = asyncio.ensure_future(form(store, started))
        await started.wait()
        task.cancel()
        await during_release(store, task)
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    released_cancelled(store)


@FORMS
def test_a_run_cancelled_from_outside_releases_while_the_loop_runs_on(form: Form) -> None:
    async def let_go(store: GatedStore, task: asyncio.Future[Any]) -> None:
        await let_go_once_under_way(store)

    cancel_mid_run(form, let_go)


@FORMS
def test_a_second_cancellation_during_the_release_does_not_cut_it_short(form: Form) -> None:
    async def cancel_again(store: GatedStore, task: asyncio.Future[Any]) -> None:
        assert await asyncio.to_thread(store.entered.wait, WAIT * 2)
        task.cancel()  # again, while the release waits
        for _ in range(5):
            await asyncio.sleep(0)  # let the task take the second cancellation in
        assert not task.done(), "the run ended before its release did"
        store.go.set()

    cancel_mid_run(form, cancel_again)


@FORMS
def test_asyncio_run_ending_mid_run_releases_while_the_other_tasks_clean_up(form: Form) -> None:
    """``asyncio.run`` returns with the run still going: it cancels what is left (the run, and a
    task whose own clean-up is what lets the release go on) and runs them to their end. The
    record is written by the time ``asyncio.run`` returns."""
    store = GatedStore("replace", wait=WAIT)

    async def other() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await let_go_once_under_way(store)
            raise

    left: list[asyncio.Future[Any]] = []  # kept referenced after main returns

    async def main() -> None:
        started = asyncio.Event()
        left.extend([asyncio.ensure_future(other()), asyncio.ensure_future(form(store, started))])
        await started.wait()  # and return, the run still going

    asyncio.run(main())
    assert all(task.cancelled() for task in left)
    released_cancelled(store)


def rival(store: GatedStore) -> TickLock:
    """Another replica's tick lock on the same job Lease."""
    return tick_lock_on(store, FakeClock(wall=T0), "r1")


#: what happens to a run while its claim waits at the server: it is cancelled (and more)
DuringClaim = Callable[[GatedStore, asyncio.Future[Any]], None]


def cancel(store: GatedStore, task: asyncio.Future[Any]) -> None:
    task.cancel()  # a shutdown


def cancel_mid_claim(
    form: Form, during_claim: DuringClaim, *, raises: type[BaseException] = asyncio.CancelledError
) -> GatedStore:
    """Run ``form`` on a loop until its claim waits at the server, then ``during_claim``; the
    claim is let go on once the run has taken the cancellation in, and the run must end with
    ``raises``, its job never run."""
    store = GatedStore("create", wait=WAIT)

    async def main() -> None:
        started = asyncio.Event()
        task = asyncio.ensure_future(form(store, started))
        assert await asyncio.to_thread(store.entered.wait, WAIT * 2)
        during_claim(store, task)
        for _ in range(5):
            await asyncio.sleep(0)  # let the task take the cancellation in
        assert not task.done(), "the run ended while its claim was still under way"
        store.go.set()
        with pytest.raises(raises):
            await task
        assert not started.is_set(), "the job ran after its run was cancelled"

    asyncio.run(main())
    return store


def released_unstarted(store: GatedStore) -> None:
    """The grant answered after the cancellation was released with its record, and the next
    tick is free at once (left held, it would be skipped as ``held`` for ``lock_at_most_for``)."""
    assert store.lease is not None
    assert not store.lease["spec"].get("holderIdentity"), "the grant was left held"
    last = job_state_from_lease(store.lease).last_run
    assert last is not None
    assert (last.holder, last.tick, last.outcome, last.error) == (
        "r0",
        T0,
        "failed",
        "cancelled before it started",
    )
    tick = T0 + timedelta(seconds=60)
    with rival(store).hold("job", tick=tick, lock_at_most_for=60) as ctx:
        assert ctx.tick == tick


@FORMS
def test_a_claim_granted_after_the_cancellation_is_released_unrun(form: Form) -> None:
    released_unstarted(cancel_mid_claim(form, cancel))


@FORMS
def test_a_timeout_during_the_claim_releases_the_grant_and_raises_timeout_error(
    form: Form,
) -> None:
    """A timeout wrapper around the call (``asyncio.timeout``, ``wait_for``) cancels it: the
    cancellation must reach it for it to raise ``TimeoutError``."""
    deadlines: list[asyncio.Timeout] = []

    async def timed(store: GatedStore, started: asyncio.Event) -> None:
        async with asyncio.timeout(None) as deadline:
            deadlines.append(deadline)
            await form(store, started)

    def time_is_up(store: GatedStore, task: asyncio.Future[Any]) -> None:
        deadlines[0].reschedule(asyncio.get_running_loop().time())

    released_unstarted(cancel_mid_claim(timed, time_is_up, raises=TimeoutError))


@FORMS
def test_a_claim_refused_after_the_cancellation_still_raises_the_cancellation(form: Form) -> None:
    """Another replica claims the tick while this one's claim waits: the claim is refused
    (a skip, ``TickSkipped`` inside the tick-lock forms), and the cancellation, not the skip,
    reaches the caller; there is nothing of this replica's to release."""

    def cancel_and_lose_the_race(store: GatedStore, task: asyncio.Future[Any]) -> None:
        task.cancel()
        with rival(store).hold("job", tick=T0, lock_at_most_for=60):
            pass

    store = cancel_mid_claim(form, cancel_and_lose_the_race)
    assert store.lease is not None
    assert not store.lease["spec"].get("holderIdentity")
    last = job_state_from_lease(store.lease).last_run
    assert last is not None and (last.holder, last.outcome) == ("r1", "succeeded")

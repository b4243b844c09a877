"""A LEADER tick that came due between two terms is run by the new term's catch-up (issue 26).

Its replica's LEADER entry was paused when the tick came due (its take was in flight); its
leaderless watch, judging once the new term had begun, found it leading and reported nothing
(the simulation's ``between-terms`` gap, closed in the model by modelling this catch-up, which
``Jobs._on_started_leading`` runs: the missed ticks after the Lease's claimed tick, within the
job's grace). A guard for the rule the simulation now relies on.

When the new term cannot read the job's state, the ticks within grace are claimed all the same
(soak seeds 8020, 8091: the read timed out and the term ended before the catch-up): the lock
passes over a tick already claimed, and a tick not run is reported (``job.ticks_being_lost``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta

import pytest
from apscheduler.job import Job
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger

from k8slease.jobs.catchup import schedule_catch_up
from k8slease.jobs.lock import Grant
from k8slease.jobs.misfire import MisfirePolicy
from k8slease.jobs.runner import TickRunner
from k8slease.jobs.spec import JobSpec, Mode
from tests.support.fakeclock import FakeClock
from tests.support.jobleases import R0, LosingStore, job_lock, logged_events


def _catch_up_jobs(
    clock: FakeClock,
    store: LosingStore,
    *,
    late: float,
    unreadable: bool = False,
    previous_ran: int = 1,
    mode: Mode = Mode.LEADER,
    fail_open: bool = False,
    misfire: MisfirePolicy = MisfirePolicy.COALESCE,
    grace: float = 5.0,
    leading: Callable[[], bool] | None = None,
    ran: list[object] | None = None,
) -> list[Job]:
    """The previous leader ran the ticks from T0 (``previous_ran`` of them, every 10 s); the
    tick at T0+10 s came due between terms; the new term begins ``late`` seconds after it (its
    state ``unreadable``: the API server down while it reads): what does its catch-up submit?"""
    t0 = clock.now()
    previous = job_lock(store, clock, "r1")
    for n in range(previous_ran):
        grant = previous.try_acquire(t0 + timedelta(seconds=10 * n))
        assert isinstance(grant, Grant)
        previous.finish(grant, "succeeded")
    clock.advance(10 + late)
    spec = JobSpec(
        name="job",
        func=lambda: (ran if ran is not None else []).append(clock.now()),
        mode=mode,
        trigger=IntervalTrigger(seconds=10, start_date=t0),
        grace=grace,
        misfire=misfire,
        fail_open=fail_open,
    )
    runner = TickRunner(
        spec,
        R0,
        lock=job_lock(store, clock),
        is_leader=leading,
        clock=clock,
    )
    scheduler = BackgroundScheduler()
    store.down = unreadable
    schedule_catch_up(scheduler, [runner], now=clock.now(), executor="default", on_loop=False)
    return list(scheduler.get_jobs())


def _pending_ticks(clock: FakeClock, store: LosingStore, *, late: float) -> list[object]:
    return [job.func.args[1] for job in _catch_up_jobs(clock, store, late=late)]


def test_a_tick_due_between_terms_is_caught_up_when_the_term_begins() -> None:
    clock, store = FakeClock(), LosingStore()
    t1 = clock.now() + timedelta(seconds=10)

    assert _pending_ticks(clock, store, late=0.5) == [[t1]]


def test_a_catch_up_that_cannot_read_the_state_claims_the_ticks_within_grace_all_the_same() -> None:
    """Seeds 8020 and 8091: the read timed out; the tick due between terms was run nowhere and
    reported by no one. It is now claimed, and run when the server answers the claim."""
    clock, store, ran = FakeClock(), LosingStore(), []
    t1 = clock.now() + timedelta(seconds=10)

    jobs = _catch_up_jobs(clock, store, late=0.5, unreadable=True, ran=ran)

    assert [job.func.args[1] for job in jobs] == [[t1]]
    store.down = False
    jobs[0].func()
    assert len(ran) == 1 and store.view().job.claimed_tick == t1


def test_a_tick_the_unread_state_had_claimed_is_not_run_again() -> None:
    clock, store, ran = FakeClock(), LosingStore(), []

    jobs = _catch_up_jobs(clock, store, late=0.5, unreadable=True, previous_ran=2, ran=ran)
    store.down = False
    jobs[0].func()

    assert ran == []


def test_a_tick_the_catch_up_cannot_claim_either_is_reported_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The server still down at the claim, or the term over by then: the tick is lost, said at
    WARNING (``job.ticks_being_lost``, then ``job.ticks_lost`` with the count)."""
    caplog.set_level(logging.DEBUG, logger="k8slease")
    for leading in (lambda: True, lambda: False):
        clock, store, ran = FakeClock(), LosingStore(), []
        caplog.clear()

        jobs = _catch_up_jobs(clock, store, late=0.5, unreadable=True, leading=leading, ran=ran)
        jobs[0].func()

        assert ran == []
        assert "job.ticks_being_lost" in logged_events(caplog)


@pytest.mark.parametrize(("mode", "fail_open"), [(Mode.LEADER, True), (Mode.ONCE_PER_TICK, False)])
def test_only_a_leader_job_with_a_lock_claims_without_the_state(
    mode: Mode, fail_open: bool
) -> None:
    """A ``fail_open`` job would run the ticks without a lock (the previous leader may have run
    them); a ONCE_PER_TICK job's ticks fire on every replica."""
    clock, store = FakeClock(), LosingStore()

    assert (
        _catch_up_jobs(clock, store, late=0.5, unreadable=True, mode=mode, fail_open=fail_open)
        == []
    )


def test_without_the_state_only_the_newest_tick_within_grace_is_claimed() -> None:
    """The tick due between two terms is the newest before the term began (its leaderless watch
    ran late by less than its 1 s grace, after the term began); older ticks within a long grace
    were run or reported while they came due. ``run-all`` would claim (and, the server down,
    report lost) every one of them."""
    clock, store = FakeClock(), LosingStore()
    t2 = clock.now() + timedelta(seconds=20)

    jobs = _catch_up_jobs(
        clock, store, late=10.5, unreadable=True, misfire=MisfirePolicy.RUN_ALL, grace=25.0
    )

    assert [job.func.args[1] for job in jobs] == [[t2]]

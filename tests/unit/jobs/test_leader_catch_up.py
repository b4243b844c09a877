"""A LEADER tick that came due between two terms is run by the new term's catch-up (issue 26).

Its replica's LEADER entry was paused when the tick came due (its take was in flight); its
leaderless watch, judging once the new term had begun, found it leading and reported nothing
(the simulation's ``between-terms`` gap, closed in the model by modelling this catch-up, which
``Jobs._on_started_leading`` runs: the missed ticks after the Lease's claimed tick, within the
job's grace). A guard for the rule the simulation now relies on.
"""

from __future__ import annotations

from datetime import timedelta

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger

from k8slease.jobs.catchup import schedule_catch_up
from k8slease.jobs.lock import Grant
from k8slease.jobs.runner import TickRunner
from k8slease.jobs.spec import JobSpec, Mode
from tests.support.fakeclock import FakeClock
from tests.support.jobleases import LosingStore, job_lock


def _pending_ticks(clock: FakeClock, store: LosingStore, *, late: float) -> list[object]:
    """The previous leader ran the tick at T0; the tick at T0+10 s came due between terms; the
    new term begins ``late`` seconds after it: what does its catch-up submit?"""
    t0 = clock.now()
    previous = job_lock(store, clock, "r1")
    grant = previous.try_acquire(t0)
    assert isinstance(grant, Grant)
    previous.finish(grant, "succeeded")
    clock.advance(10 + late)
    spec = JobSpec(
        name="job",
        func=lambda: None,
        mode=Mode.LEADER,
        trigger=IntervalTrigger(seconds=10, start_date=t0),
        grace=5.0,
    )
    runner = TickRunner(spec, group="g", identity="r0", lock=job_lock(store, clock), clock=clock)
    scheduler = BackgroundScheduler()
    schedule_catch_up(scheduler, [runner], now=clock.now(), executor="default", on_loop=False)
    return [job.func.args[1] for job in scheduler.get_jobs()]


def test_a_tick_due_between_terms_is_caught_up_when_the_term_begins() -> None:
    clock, store = FakeClock(), LosingStore()
    t1 = clock.now() + timedelta(seconds=10)

    assert _pending_ticks(clock, store, late=0.5) == [[t1]]

"""A LEADER-class run starts only while its replica leads, read after the slow claim write, and
its ``ctx.lost`` is set the moment leadership ends (issue 26: measured, a LEADER run started 3.0 s
after its replica had stopped leading because the claim write was slow)."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any

import pytest
from apscheduler.triggers.interval import IntervalTrigger

from k8slease.jobs.context import JobContext
from k8slease.jobs.lockrules import Verdict
from k8slease.jobs.runner import TickRunner
from k8slease.jobs.spec import JobSpec, Mode
from tests.support.fakeclock import FakeClock
from tests.support.jobleases import (
    R0,
    Leadership,
    LosingStore,
    SlowStore,
    job_lock,
    leader_runner,
    logged_events,
)


def test_a_leader_run_does_not_start_when_leadership_ended_during_the_claim_write(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    store = SlowStore(clock, delay=3.0)
    ran: list[JobContext] = []
    runner = leader_runner(clock, store, ran.append, Leadership(clock, clock.monotonic() + 1.0))

    with caplog.at_level(logging.WARNING, logger="k8slease"):
        outcome = runner.run_tick(clock.now())

    assert ran == [], "a LEADER run started on a replica that no longer leads"
    assert outcome is None
    assert "job.not_started" in logged_events(caplog)
    job = store.view().job
    assert store.view().record.holder == ""  # released at once
    assert job.last_run is not None and job.last_run.outcome == "lost"
    assert "not started" in (job.last_run.error or "")
    # the span in which others skipped for this grant is named (soak seed 8054, tick 47)
    fields = next(
        getattr(r, "k8slease_fields", {})
        for r in caplog.records
        if getattr(r, "k8slease_event", "") == "job.not_started"
    )
    assert fields["held_from"] == ran_tick_of(job) and fields["held_until"] >= fields["held_from"]


def test_a_leader_run_reads_lost_the_moment_leadership_ends() -> None:
    clock = FakeClock()
    store = LosingStore()
    seen: list[bool] = []

    def job(ctx: JobContext) -> None:
        seen.append(ctx.lost.is_set())
        clock.advance(5)  # the renew deadline passes mid-run; no watchdog has run
        seen.append(ctx.lost.is_set())

    runner = leader_runner(clock, store, job, Leadership(clock, clock.monotonic() + 2.0))
    outcome = runner.run_tick(clock.now())

    assert seen == [False, True]
    assert outcome == "lost"


def test_leadership_ended_sets_lost_and_cancels_a_coroutine_run() -> None:
    clock = FakeClock()
    store = LosingStore()
    leading = Leadership(clock, float("inf"))
    started = asyncio.Event()

    async def job(ctx: JobContext) -> None:
        started.set()
        await asyncio.Event().wait()  # runs until cancelled

    runner = leader_runner(clock, store, job, leading)

    async def scenario() -> str | None:
        task = asyncio.create_task(runner.run_tick_async(clock.now()))
        await started.wait()
        runner.leadership_ended()
        return await asyncio.wait_for(task, 5)

    assert asyncio.run(scenario()) == "lost"


def test_ticks_skipped_while_the_api_server_was_unreachable_are_named_at_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 26: with the API server paused across ticks, each skip was a DEBUG line after one
    warning; once the server answers again the replica names every tick it skipped."""
    clock = FakeClock()
    store = LosingStore()
    spec = JobSpec(
        name="job",
        func=lambda ctx: None,
        mode=Mode.ONCE_PER_TICK,
        trigger=IntervalTrigger(seconds=2),
    )
    runner = TickRunner(spec, R0, lock=job_lock(store, clock), clock=clock)
    store.down = True
    skipped = []
    for _ in range(3):
        skipped.append(clock.now())
        assert runner.run_tick(clock.now()) is None
        clock.advance(2)
    store.down = False

    with caplog.at_level(logging.WARNING, logger="k8slease"):
        assert runner.run_tick(clock.now()) == "succeeded"

    [record] = [r for r in caplog.records if r.getMessage().startswith("job.api_recovered")]
    fields = record.k8slease_fields  # type: ignore[attr-defined]
    assert fields["skipped"] == 3
    assert fields["ticks"] == [t.isoformat() for t in skipped]


def test_a_leader_tick_fired_after_the_term_ended_is_reported_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Found by the simulation: a leader paused across a tick resumes past its renew deadline;
    its scheduler entry, not yet paused by the elector, fires the tick within its grace, and the
    runner skipped it as ``not-leader`` at DEBUG. The replica that took over began after the tick
    came due, so it never fired it, and the leaderless watch had missed its time in the pause:
    the tick ran nowhere and nobody said so."""
    clock = FakeClock()
    store = LosingStore()
    ran: list[JobContext] = []
    runner = leader_runner(clock, store, ran.append, Leadership(clock, clock.monotonic() - 1.0))

    with caplog.at_level(logging.WARNING, logger="k8slease"):
        outcome = runner.run_tick(clock.now())

    assert ran == [] and outcome is None
    assert "job.ticks_being_lost" in logged_events(caplog)
    assert runner.losses.count == 1
    assert store.lease is None, "nothing claimed"


def test_a_leader_claim_refused_after_the_term_ended_reports_the_tick_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Found by the simulation (late applies on the leader Lease too): the leader waited its
    turn in the claim order, was paused past its renew deadline, then found the tick claimed
    over (a later tick, by the next leader): a quiet ``locked`` skip, and the tick ran nowhere."""
    clock = FakeClock()
    store = LosingStore()
    other = job_lock(store, clock, "r1")
    later = clock.now()
    assert not isinstance(other.try_acquire(later), Verdict)  # the next leader's later tick
    ran: list[JobContext] = []
    runner = leader_runner(clock, store, ran.append, Leadership(clock, clock.monotonic() + 1.0))
    # the leadership check before the claim passes; the claim is refused after the term ended
    acquire = runner.lock.try_acquire

    def slow(*args: Any, **kwargs: Any) -> Any:
        clock.advance(3.0)
        return acquire(*args, **kwargs)

    runner.lock.try_acquire = slow  # type: ignore[method-assign]
    with caplog.at_level(logging.WARNING, logger="k8slease"):
        outcome = runner.run_tick(later - timedelta(seconds=10))

    assert ran == [] and outcome is None
    assert "job.ticks_being_lost" in logged_events(caplog)
    assert runner.losses.count == 1


def ran_tick_of(job: Any) -> str:
    """The tick of the Lease's last run record, as the warnings spell ticks."""
    assert job.last_run is not None
    return str(job.last_run.tick.isoformat())


def test_a_tick_fired_while_this_replica_still_runs_the_previous_one_is_named_at_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The jobs chaos scenario at load 8: the next tick fired while the holder still ran (or
    released) the previous one; the holder skipped it as ``running`` and the others as ``held``,
    all at DEBUG, and the tick ran nowhere without a word. The holder now says so."""
    clock = FakeClock()
    store = LosingStore()
    inner: list[str | None] = []
    fired: list[str] = []
    runner: TickRunner | None = None

    def body(ctx: JobContext) -> None:
        assert runner is not None
        fired.append((ctx.tick + timedelta(seconds=2)).isoformat())
        inner.append(runner.run_tick(ctx.tick + timedelta(seconds=2)))

    spec = JobSpec(
        name="job", func=body, mode=Mode.ONCE_PER_TICK, trigger=IntervalTrigger(seconds=2)
    )
    runner = TickRunner(spec, R0, lock=job_lock(store, clock), clock=clock)
    with caplog.at_level(logging.DEBUG, logger="k8slease"):
        assert runner.run_tick(clock.now()) == "succeeded"
    assert inner == [None], "the next tick did not run inside the first one's run"
    dropped = [r for r in caplog.records if r.getMessage().startswith("job.ticks_dropped")]
    assert [r.levelno for r in dropped] == [logging.WARNING]
    fields = dropped[0].k8slease_fields  # type: ignore[attr-defined]
    assert fields["why"] == "running"
    assert fields["tick"] == fired[0]


def test_a_leader_that_finds_its_lock_held_by_a_former_leader_reports_the_ticks_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Found by the soak (seed 8119, tick 491): a former leader, paused past its term, got its
    claim answered after it (not started, released soon); the new leader skipped the next tick
    as held, at DEBUG, and nobody said it was lost. The holder's entry is paused: a LEADER tick
    held by another replica while this one leads runs nowhere. Said once per outage, with the
    count when the leader claims again."""
    clock = FakeClock()
    store = LosingStore()
    former = job_lock(store, clock, "r1")
    held = former.try_acquire(clock.now())
    assert not isinstance(held, Verdict)
    ran: list[JobContext] = []
    runner = leader_runner(clock, store, ran.append, Leadership(clock, float("inf")))

    with caplog.at_level(logging.WARNING, logger="k8slease"):
        for _ in range(2):
            clock.advance(10)
            assert runner.run_tick(clock.now()) is None
        assert runner.losses.count == 2
        assert logged_events(caplog).count("job.ticks_being_lost") == 1
        former.finish(held, "ok")
        clock.advance(10)
        assert runner.run_tick(clock.now()) == "succeeded"

    assert len(ran) == 1
    ended = [
        getattr(r, "k8slease_fields", {})
        for r in caplog.records
        if getattr(r, "k8slease_event", "") == "job.ticks_lost"
    ]
    assert ended and ended[0]["lost"] == 2 and ended[0]["why"] == "held-by-former-leader"

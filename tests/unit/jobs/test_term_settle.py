"""A LEADER job's claim left unanswered when its replica's term ends is settled then, never run
(issue 26, the simulation's ``held-unsettled-ex-leader`` gap): before, only the next claim
settled it, and an ex-leader makes none (its LEADER entry is paused), so a claim applied late
named a holder that would neither run the tick nor release the lock, and the new leader skipped
its ticks at DEBUG."""

from __future__ import annotations

import logging
import threading

import pytest

from k8slease.jobs.context import JobContext
from k8slease.jobs.runner import TickRunner
from tests.support.fakeclock import FakeClock
from tests.support.jobleases import Leadership, LosingStore, SlowStore, leader_runner, logged_events


def _unanswered_claim(clock: FakeClock, store: LosingStore, leading: Leadership) -> TickRunner:
    """r0 leads, claims a tick; the write's answer is lost, the write not yet applied."""
    ran: list[JobContext] = []
    runner = leader_runner(clock, store, ran.append, leading, at_most=30)
    store.lose = ["later"]
    assert runner.run_tick(clock.now()) is None  # skipped: the API server did not answer
    assert runner.lock is not None and runner.lock._pending is not None
    runner.ran = ran  # type: ignore[attr-defined]
    return runner


def test_a_claim_landing_after_the_term_ended_is_released_at_once_and_named_at_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock, store = FakeClock(), LosingStore()
    leading = Leadership(clock, clock.monotonic() + 3.0)
    runner = _unanswered_claim(clock, store, leading)
    clock.advance(4)  # the term ends
    with caplog.at_level(logging.WARNING, logger="k8slease"):
        runner.leadership_ended()
        # the settling thread has looked once (the claim still open) before the clock moves
        assert clock.settle(sleepers=1)
        clock.advance(1)
        store.land()  # the claim applied after r0 gave up on it and stopped leading
        assert store.view().record.holder == "r0"

        assert clock.run_until(lambda: store.view().record.holder == "", limit=5, step=0.5), (
            "the ex-leader left the lock held by a claim it will never run"
        )

    assert runner.ran == []  # type: ignore[attr-defined]
    job = store.view().job
    assert job.last_run is not None and job.last_run.outcome == "lost"
    assert "leadership ended" in (job.last_run.error or "")
    late = [
        r for r in caplog.records if getattr(r, "k8slease_event", "") == "lock.claim_applied_late"
    ]
    assert late and "decision=release" in late[0].getMessage()
    assert "lock.tick_lost" in logged_events(caplog)


def test_a_claim_left_unanswered_after_the_term_ended_is_settled_too() -> None:
    """The claim write outlasts the term (a slow server): the runner starts settling when it
    returns unanswered, as the elector's end-of-term call found nothing to settle then."""
    clock = FakeClock()
    store = SlowStore(clock, delay=3.0)
    leading = Leadership(clock, clock.monotonic() + 1.0)  # the term ends during the claim
    runner = _unanswered_claim(clock, store, leading)
    assert runner._settling is not None
    assert clock.settle(sleepers=1)  # it has looked once, the claim still open
    store.land()

    assert clock.run_until(lambda: store.view().record.holder == "", limit=5, step=0.5)
    assert runner.ran == []  # type: ignore[attr-defined]


def _settling_after_the_term(
    clock: FakeClock, store: LosingStore
) -> tuple[Leadership, TickRunner, threading.Thread]:
    """A LEADER claim left unanswered, then the term ended: the settling thread it started."""
    leading = Leadership(clock, clock.monotonic() + 3.0)
    runner = _unanswered_claim(clock, store, leading)
    clock.advance(4)
    runner.leadership_ended()
    thread = runner._settling
    assert thread is not None
    # it has looked once (the claim still open) and waits: the clock knows it from then on
    # (CI once moved the clock past a thread still in its first look, which it did not know)
    assert clock.settle(sleepers=1)
    return leading, runner, thread


def test_a_claim_that_never_lands_is_looked_at_only_until_the_lock_could_be_taken_over() -> None:
    clock, store = FakeClock(), LosingStore()
    _, _, thread = _settling_after_the_term(clock, store)

    clock.run_until(lambda: not thread.is_alive(), limit=40, step=1.0)

    assert not thread.is_alive(), "settling must stop once lock_at_most_for has passed"
    assert store.lease is None  # never applied, nothing written


def test_settling_after_the_term_stops_when_the_replica_leads_again() -> None:
    """Leading again, the claim path settles the claim (and may run it): the thread leaves it."""
    clock, store = FakeClock(), LosingStore()
    leading, runner, thread = _settling_after_the_term(clock, store)
    leading.until = clock.monotonic() + 600  # a new term
    store.land()

    clock.run_until(lambda: not thread.is_alive(), limit=5, step=0.5)

    assert not thread.is_alive()
    assert store.view().record.holder == "r0"  # left to the claim path
    assert runner.lock is not None and runner.lock._pending is not None

"""The per-job lock protocol, decided purely: claims, expiry by observation, release."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from k8slease.jobs.lockrules import Verdict, expired, judge_claim, release, whole_seconds
from k8slease.lease.jobrecord import JobState, RunRecord
from k8slease.lease.record import LeaseRecord

T0 = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
NOW = T0 + timedelta(seconds=3)


def claim(
    record: LeaseRecord,
    state: JobState,
    *,
    me: str = "a",
    tick: datetime = T0,
    unchanged_for: float = 0.0,
    at_most: float = 900.0,
    now: datetime = NOW,
):
    return judge_claim(
        record,
        state,
        me=me,
        tick=tick,
        unchanged_for=unchanged_for,
        lock_at_most_for=at_most,
        now=now,
    )


def test_free_lock_is_granted_with_the_tick_claimed_and_a_new_token() -> None:
    result = claim(LeaseRecord(duration_seconds=1, fencing_token=41, transitions=3), JobState())
    assert result.verdict is Verdict.GRANT
    assert result.record is not None and result.state is not None
    assert result.record.holder == "a"
    assert result.record.fencing_token == 42
    assert result.record.transitions == 4
    assert result.record.duration_seconds == 900
    assert result.record.acquire_time == NOW == result.record.renew_time
    assert result.state.claimed_tick == T0


def test_a_tick_not_newer_than_the_claimed_one_is_refused_even_when_free() -> None:
    state = JobState(claimed_tick=T0)
    free = LeaseRecord(duration_seconds=1)
    assert claim(free, state, tick=T0).verdict is Verdict.ALREADY_CLAIMED
    earlier = T0 - timedelta(hours=1)
    assert claim(free, state, tick=earlier).verdict is Verdict.ALREADY_CLAIMED
    later = T0 + timedelta(hours=1)
    assert claim(free, state, tick=later).verdict is Verdict.GRANT


def test_a_lock_without_holder_that_is_not_a_release_is_held_by_someone_unknown() -> None:
    edited = LeaseRecord(holder="", duration_seconds=30, fencing_token=7)
    assert claim(edited, JobState(), unchanged_for=31, at_most=60).verdict is Verdict.HELD
    assert claim(edited, JobState(), unchanged_for=60, at_most=60).verdict is Verdict.GRANT


def test_a_held_lock_is_taken_only_after_being_seen_unchanged_for_its_duration() -> None:
    held = LeaseRecord(holder="b", duration_seconds=900, fencing_token=7)
    next_tick = T0 + timedelta(hours=1)
    state = JobState(claimed_tick=T0)
    assert claim(held, state, tick=next_tick, unchanged_for=0).verdict is Verdict.HELD
    assert claim(held, state, tick=next_tick, unchanged_for=899.9).verdict is Verdict.HELD
    taken = claim(held, state, tick=next_tick, unchanged_for=900)
    assert taken.verdict is Verdict.GRANT
    assert taken.record is not None and taken.record.fencing_token == 8


def test_the_leases_own_duration_decides_not_the_claimants_setting() -> None:
    held = LeaseRecord(holder="b", duration_seconds=30)
    assert claim(held, JobState(), unchanged_for=31, at_most=900).verdict is Verdict.GRANT
    long_held = LeaseRecord(holder="b", duration_seconds=3600)
    assert claim(long_held, JobState(), unchanged_for=1000, at_most=60).verdict is Verdict.HELD


def test_a_malformed_lease_is_never_taken_sooner_than_our_own_ceiling() -> None:
    broken = LeaseRecord(holder="b", duration_seconds=0, problems=("leaseDurationSeconds ...",))
    assert not expired(broken, unchanged_for=100, fallback_duration=900)
    assert expired(broken, unchanged_for=900, fallback_duration=900)


def test_our_own_lock_kept_by_lock_at_least_for_also_blocks_us() -> None:
    mine = LeaseRecord(holder="a", duration_seconds=50, fencing_token=3)
    state = JobState(claimed_tick=T0)
    next_tick = T0 + timedelta(seconds=10)
    assert claim(mine, state, tick=next_tick, unchanged_for=5).verdict is Verdict.HELD
    regrant = claim(mine, state, tick=next_tick, unchanged_for=50)
    assert regrant.verdict is Verdict.GRANT
    assert regrant.record is not None
    assert regrant.record.transitions == mine.transitions  # same holder: not a transition
    assert regrant.record.fencing_token == 4  # but a new grant: a new token


def run(outcome: str = "succeeded", tick: datetime = T0) -> RunRecord:
    return RunRecord(
        holder="a",
        tick=tick,
        started=T0,
        finished=NOW,
        outcome=outcome,  # type: ignore[arg-type]
        fencing_token=5,
    )


def test_release_after_a_long_enough_run_clears_the_holder_and_records_the_run() -> None:
    held = LeaseRecord(holder="a", duration_seconds=900, fencing_token=5, transitions=2)
    record, state = release(
        held, JobState(claimed_tick=T0), run(), ran_for=120, lock_at_least_for=60, now=NOW
    )
    assert record.holder == ""
    assert record.fencing_token == 5 and record.transitions == 2
    assert record.renew_time == NOW
    assert state.last_run == run()
    assert state.completed_tick == T0
    assert state.count("succeeded") == 1


def test_release_after_a_fast_run_keeps_the_lock_for_the_rest_of_lock_at_least_for() -> None:
    held = LeaseRecord(holder="a", duration_seconds=900, fencing_token=5)
    record, _ = release(
        held, JobState(claimed_tick=T0), run(), ran_for=12.5, lock_at_least_for=60, now=NOW
    )
    assert record.holder == "a"
    assert record.duration_seconds == 48  # ceil(60 - 12.5)


def test_failed_runs_complete_the_tick_but_lost_runs_do_not() -> None:
    held = LeaseRecord(holder="a", duration_seconds=900)
    _, failed = release(held, JobState(), run("failed"), ran_for=1, lock_at_least_for=0, now=NOW)
    assert failed.completed_tick == T0 and failed.count("failed") == 1
    _, lost = release(held, JobState(), run("lost"), ran_for=1, lock_at_least_for=0, now=NOW)
    assert lost.completed_tick is None and lost.count("lost") == 1


@pytest.mark.parametrize(("seconds", "expected"), [(0.2, 1), (1.0, 1), (59.5, 60), (60, 60)])
def test_whole_seconds_rounds_up_to_at_least_one(seconds: float, expected: int) -> None:
    assert whole_seconds(seconds) == expected


@given(
    ticks=st.lists(st.integers(min_value=0, max_value=50), min_size=1, max_size=40),
    replicas=st.integers(min_value=1, max_value=4),
)
def test_no_tick_is_ever_granted_twice_whatever_order_replicas_claim_in(
    ticks: list[int], replicas: int
) -> None:
    """Replicas claim ticks in any order (late schedulers included) against one Lease; each
    successful claim is a conditional write, so claims are serialised. No tick is granted twice.
    Wall clocks are within the bound: a tick is claimed no earlier than its time."""
    record, state = LeaseRecord(), JobState()
    granted: list[datetime] = []
    latest = T0
    for i, minute in enumerate(ticks):
        me = f"r{i % replicas}"
        tick = T0 + timedelta(minutes=minute)
        latest = max(latest, tick)
        result = claim(record, state, me=me, tick=tick, unchanged_for=10_000, now=latest)
        if result.verdict is Verdict.GRANT:
            assert result.record is not None and result.state is not None
            granted.append(tick)
            record, state = release(
                result.record,
                result.state,
                RunRecord(
                    holder=me,
                    tick=tick,
                    started=NOW,
                    finished=NOW,
                    outcome="succeeded",
                    fencing_token=result.record.fencing_token,
                ),
                ran_for=1,
                lock_at_least_for=0,
                now=NOW,
            )
    assert len(granted) == len(set(granted))
    assert granted == sorted(granted)
    assert record.fencing_token == len(granted)


# -- hole 2 of issue 15: a claimed tick in the future must not silence a job ---------------------


def test_a_claimed_tick_further_ahead_than_lock_at_most_for_is_suspect_and_overwritten() -> None:
    free = LeaseRecord(duration_seconds=1, fencing_token=5)
    future = NOW + timedelta(days=3)  # a fast wall clock or a hand edit claimed it
    state = JobState(claimed_tick=future, completed_tick=T0 - timedelta(minutes=1))
    result = claim(free, state, tick=T0, at_most=60)
    assert result.verdict is Verdict.GRANT
    assert result.suspect_claim == future
    assert result.state is not None and result.state.claimed_tick == T0


def test_a_suspect_claim_still_refuses_ticks_that_have_run() -> None:
    free = LeaseRecord(duration_seconds=1, fencing_token=5)
    state = JobState(claimed_tick=NOW + timedelta(days=3), completed_tick=T0)
    refused = claim(free, state, tick=T0, at_most=60)
    assert refused.verdict is Verdict.ALREADY_CLAIMED
    assert refused.suspect_claim == state.claimed_tick, "reported even when refused"
    later = claim(free, state, tick=T0 + timedelta(minutes=1), at_most=60)
    assert later.verdict is Verdict.GRANT


def test_a_claimed_tick_within_lock_at_most_for_of_now_is_honoured() -> None:
    free = LeaseRecord(duration_seconds=1, fencing_token=5)
    near = NOW + timedelta(seconds=59)  # within the clock bound: it may really be running
    result = claim(free, JobState(claimed_tick=near), tick=T0, at_most=60)
    assert result.verdict is Verdict.ALREADY_CLAIMED and result.suspect_claim is None


# -- hole 4 of issue 15: a tick claimed by a holder that died mid-run is reported, not lost -------


def test_taking_over_a_dead_holders_lock_records_its_claimed_tick_as_lost() -> None:
    dead = LeaseRecord(holder="b", duration_seconds=60, fencing_token=7, renew_time=T0)
    state = JobState(claimed_tick=T0, counts={"succeeded": 3})
    taken = claim(dead, state, tick=T0 + timedelta(minutes=1), unchanged_for=60, at_most=60)
    assert taken.verdict is Verdict.GRANT and taken.state is not None
    run = taken.state.last_run
    assert run is not None
    assert (run.holder, run.tick, run.outcome, run.fencing_token) == ("b", T0, "lost", 7)
    assert taken.state.counts == {"succeeded": 3, "lost": 1}
    assert taken.lost_tick == T0


def test_taking_over_an_idle_lock_whose_tick_ran_reports_nothing() -> None:
    kept = LeaseRecord(holder="b", duration_seconds=60, fencing_token=7, renew_time=T0)
    ran = RunRecord(
        holder="b", tick=T0, started=T0, finished=T0, outcome="succeeded", fencing_token=7
    )
    state = JobState(claimed_tick=T0, completed_tick=T0, last_run=ran)
    taken = claim(kept, state, tick=T0 + timedelta(minutes=1), unchanged_for=60, at_most=60)
    assert taken.verdict is Verdict.GRANT and taken.state is not None
    assert taken.state.last_run == ran and taken.lost_tick is None


def test_the_newest_plausible_claim_seen_ignores_far_future_claims() -> None:
    from k8slease.jobs.lockrules import newest_plausible_claim

    now = datetime(2026, 1, 1, tzinfo=UTC)
    far, seen = now + timedelta(days=20), now + timedelta(seconds=5)
    assert newest_plausible_claim((), now=now, bound=15) is None
    assert (
        newest_plausible_claim((seen - timedelta(seconds=5), far, seen), now=now, bound=15) == seen
    )
    assert newest_plausible_claim((far,), now=now, bound=15) is None


def test_a_tick_seen_claimed_counts_as_claimed_even_when_the_lease_says_otherwise() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    tick = now - timedelta(seconds=5)
    free = LeaseRecord(holder="", duration_seconds=1)
    state = JobState(claimed_tick=now + timedelta(days=20))
    kwargs = {"me": "me", "unchanged_for": 30.0, "lock_at_most_for": 15.0, "now": now}
    assert judge_claim(free, state, tick=tick, **kwargs).verdict is Verdict.GRANT  # type: ignore[arg-type]
    refused = judge_claim(free, state, tick=tick, seen_claimed=tick, **kwargs)  # type: ignore[arg-type]
    assert refused.verdict is Verdict.ALREADY_CLAIMED
    later = tick + timedelta(seconds=5)
    assert (
        judge_claim(free, state, tick=later, seen_claimed=tick, **kwargs).verdict is Verdict.GRANT
    )  # type: ignore[arg-type]

"""The claim order of a job's tick: rendezvous hashing over the members the Leases name."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from k8slease.jobs.claimorder import (
    claim_delay,
    claim_order,
    claim_rank,
    named_in,
    recent_members,
    score,
    tick_key,
)
from k8slease.lease.jobrecord import JobState, RunRecord, lease_with_job_state
from k8slease.lease.record import LeaseRecord, new_lease
from k8slease.lease.view import LeaseView

T0 = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
MEMBERS = [f"replica-{i}" for i in range(10)]

identities = st.text(alphabet="abcdefghij-0123456789", min_size=1, max_size=12)


def test_a_tick_has_the_same_key_in_every_timezone() -> None:
    cet = timezone(timedelta(hours=1))
    assert tick_key(T0) == tick_key(T0.astimezone(cet)) == tick_key(T0.replace(tzinfo=None))
    assert tick_key(T0 + timedelta(microseconds=1)) == tick_key(T0) + 1


def test_the_weight_is_fixed_by_its_inputs_not_by_the_process() -> None:
    """BLAKE2b, not hash(): every replica (any PYTHONHASHSEED, any version of k8slease in a
    rolling update) must compute the same number, so the value is pinned."""
    assert score("replica-0", "invoices", T0) == 0x5698F6661DF74986
    eastern = T0.astimezone(timezone(timedelta(hours=-5)))
    assert score("replica-0", "invoices", eastern) == score("replica-0", "invoices", T0)
    assert score("replica-0", "invoices", T0) != score("replica-1", "invoices", T0)


@given(st.sets(identities, min_size=1, max_size=12), st.integers(0, 10_000))
def test_every_replica_computes_the_same_order_whatever_order_it_lists_members_in(
    members: set[str], minute: int
) -> None:
    tick = T0 + timedelta(minutes=minute)
    forward = claim_order(sorted(members), "invoices", tick)
    backward = claim_order(sorted(members, reverse=True), "invoices", tick)
    assert forward == backward
    assert sorted(forward) == sorted(members)
    ranks = [claim_rank(members, m, "invoices", tick) for m in members]
    assert sorted(ranks) == list(range(len(members)))  # exactly one first, one second, ...


@given(st.sets(identities, min_size=2, max_size=8), identities, st.integers(0, 10_000))
def test_a_member_that_leaves_does_not_reorder_the_others(
    members: set[str], gone: str, minute: int
) -> None:
    """Rendezvous hashing: removing one member keeps the relative order of the rest, so a crashed
    first choice is followed by whoever was second, in every replica's view."""
    tick = T0 + timedelta(minutes=minute)
    with_gone = claim_order(members | {gone}, "invoices", tick)
    without = claim_order(members - {gone}, "invoices", tick)
    assert [m for m in with_gone if m != gone] == without


def test_me_is_counted_even_when_no_lease_names_me() -> None:
    assert claim_rank([], "newcomer", "invoices", T0) == 0
    assert claim_rank(["a", "b"], "newcomer", "invoices", T0) in (0, 1, 2)


def test_first_choices_spread_evenly_over_jobs_and_ticks() -> None:
    firsts = Counter(
        claim_order(MEMBERS, f"job-{j:03d}", T0 + timedelta(minutes=m))[0]
        for j in range(100)
        for m in range(30)
    )
    assert set(firsts) == set(MEMBERS)
    assert min(firsts.values()) > 3000 / 10 * 0.8  # within 20% of an even share
    assert max(firsts.values()) < 3000 / 10 * 1.2


def test_the_first_choice_changes_from_tick_to_tick() -> None:
    firsts = {claim_order(MEMBERS, "invoices", T0 + timedelta(minutes=m))[0] for m in range(50)}
    assert len(firsts) >= 6  # a crashed replica does not own a job's every tick


@pytest.mark.parametrize(
    ("rank", "expected"), [(0, 0.0), (1, 0.5), (2, 1.0), (3, 1.5), (4, 1.5), (9, 1.5)]
)
def test_the_delay_grows_with_the_rank_up_to_the_spread(rank: int, expected: float) -> None:
    assert claim_delay(rank, step=0.5, spread=3) == pytest.approx(expected)


def test_a_negative_rank_is_refused() -> None:
    with pytest.raises(ValueError, match="rank must be >= 0"):
        claim_delay(-1, step=0.5, spread=3)


def _view(holder: str, last_run_by: str | None) -> LeaseView:
    record = LeaseRecord(holder=holder, duration_seconds=60, fencing_token=3)
    body = new_lease("billing.invoices", "default", record)
    state = JobState()
    if last_run_by is not None:
        run = RunRecord(
            holder=last_run_by,
            tick=T0,
            started=T0,
            finished=T0,
            outcome="succeeded",
            fencing_token=3,
        )
        state = JobState(claimed_tick=T0, completed_tick=T0, last_run=run)
    return LeaseView.decode(lease_with_job_state(body, state))


def test_a_lease_names_its_holder_and_its_last_run_holder() -> None:
    assert named_in(_view("a", "b")) == {"a", "b"}
    assert named_in(_view("", "c")) == {"c"}
    assert named_in(_view("", None)) == frozenset()
    assert named_in(_view("d", "d")) == {"d"}


def test_an_unreadable_holder_is_no_member() -> None:
    body = new_lease("billing.invoices", "default", LeaseRecord(holder="x", duration_seconds=60))
    body["spec"]["holderIdentity"] = 42
    assert named_in(LeaseView.decode(body)) == frozenset()


def test_members_are_those_seen_within_the_window() -> None:
    last_seen = {"a": 100.0, "b": 700.0, "c": 699.0}
    assert recent_members(last_seen, now=1300.0, window=600.0) == {"b"}
    assert recent_members(last_seen, now=1299.0, window=600.0) == {"b", "c"}
    assert recent_members({}, now=0.0, window=600.0) == frozenset()

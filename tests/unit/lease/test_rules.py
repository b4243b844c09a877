"""The pure decisions: who may take a Lease when, and what each grant, renew and release writes."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from k8slease.lease.record import LeaseRecord
from k8slease.lease.rules import (
    effective_duration,
    grant_record,
    is_ours,
    is_trusted_release,
    release_record,
    renewal_record,
    takeover_at,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
HELD = LeaseRecord(
    holder="other", duration_seconds=15, renew_time=T0, transitions=2, fencing_token=7
)
MALFORMED = LeaseRecord(holder="<malformed>", problems=("holderIdentity is not a string",))


def may_take(record: LeaseRecord | None, first_seen: float, now: float, **kw: Any) -> bool:
    """Whether the Lease may be taken at ``now``: the moment :func:`takeover_at` names."""
    return now >= takeover_at(record, first_seen, **kw)


# -- may I take it? --------------------------------------------------------------------------


def test_a_held_lease_may_be_taken_after_the_longer_of_its_duration_and_ours() -> None:
    kw = {"identity": "me", "fallback_duration": 10.0}
    assert not may_take(HELD, 100.0, 114.999, **kw)
    assert may_take(HELD, 100.0, 115.0, **kw)
    assert takeover_at(HELD, 100.0, **kw) == 115.0
    # a duration shorter than ours (shortened by hand, or a holder configured shorter) is not
    # honoured: we wait our own 60 s from when we saw it
    assert takeover_at(HELD, 100.0, identity="me", fallback_duration=60.0) == 160.0


@pytest.mark.parametrize(
    "record",
    [
        LeaseRecord(holder="", duration_seconds=15, transitions=3, fencing_token=4),
        LeaseRecord(holder="", duration_seconds=0, fencing_token=4),
        LeaseRecord(holder="", problems=("spec is missing",), holder_readable=False),
    ],
    ids=["holder-removed", "empty-spec", "no-spec"],
)
def test_a_lease_without_holder_that_is_not_a_release_is_held_by_someone_unknown(
    record: LeaseRecord,
) -> None:
    assert takeover_at(record, 100.0, identity="me", fallback_duration=60.0) == 160.0


def test_a_release_is_taken_at_once_and_one_without_its_times_is_waited_out() -> None:
    """A holder's release sets ``acquireTime`` and ``renewTime`` to the same moment (as
    client-go's); no holder and a duration of 1 without them is somebody's hand edit."""
    free = LeaseRecord(
        holder="",
        duration_seconds=1,
        transitions=3,
        fencing_token=4,
        acquire_time=T0,
        renew_time=T0,
    )
    assert may_take(free, 100.0, 100.0, identity="me", fallback_duration=60.0)
    timeless = LeaseRecord(holder="", duration_seconds=1, transitions=3, fencing_token=4)
    assert not may_take(timeless, 100.0, 159.0, identity="me", fallback_duration=60.0)
    assert may_take(timeless, 100.0, 160.0, identity="me", fallback_duration=60.0)


def test_an_absent_lease_may_be_created_at_once_unless_it_was_just_deleted_while_held() -> None:
    assert may_take(None, 5.0, 5.0, identity="me", fallback_duration=60.0)
    assert not may_take(
        None, 5.0, 64.0, identity="me", fallback_duration=60.0, held_before_absence=HELD
    )
    assert may_take(
        None, 5.0, 65.0, identity="me", fallback_duration=60.0, held_before_absence=HELD
    )


def test_a_lease_naming_me_may_be_retaken_through_a_conditional_write() -> None:
    mine = LeaseRecord(holder="me", duration_seconds=15, fencing_token=3)
    assert may_take(mine, 100.0, 100.0, identity="me", fallback_duration=60.0)


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        (MALFORMED, 60.0),
        (LeaseRecord(holder="x", duration_seconds=90, problems=("renewTime: bad",)), 90.0),
        (LeaseRecord(holder="x", duration_seconds=5, problems=("renewTime: bad",)), 60.0),
        (LeaseRecord(holder="", problems=("spec is not an object: str",)), 60.0),
    ],
)
def test_malformed_leases_wait_the_longer_of_their_duration_and_ours(
    record: LeaseRecord, expected: float
) -> None:
    assert effective_duration(record, 60.0) == expected
    assert takeover_at(record, 10.0, identity="me", fallback_duration=60.0) == 10.0 + expected


def test_a_malformed_lease_naming_me_is_still_unknown() -> None:
    odd = LeaseRecord(holder="me", problems=("leaseDurationSeconds must be >= 1, got 0",))
    assert not may_take(odd, 0.0, 59.0, identity="me", fallback_duration=60.0)


def test_is_ours_needs_identity_and_token() -> None:
    mine = LeaseRecord(holder="me", duration_seconds=5, fencing_token=3)
    assert is_ours(mine, identity="me", fencing_token=3)
    assert not is_ours(mine, identity="me", fencing_token=4)
    assert not is_ours(mine, identity="you", fencing_token=3)
    assert not is_ours(None, identity="me", fencing_token=3)


# -- what is written -------------------------------------------------------------------------


def test_grant_bumps_token_and_transitions_on_holder_change() -> None:
    record = grant_record(HELD, identity="me", duration_seconds=20, now=T0 + timedelta(seconds=30))
    assert record.holder == "me"
    assert record.fencing_token == 8
    assert record.transitions == 3
    assert record.duration_seconds == 20
    assert record.acquire_time == record.renew_time == T0 + timedelta(seconds=30)
    assert not record.malformed


def test_first_grant_of_a_new_lease() -> None:
    record = grant_record(None, identity="me", duration_seconds=20, now=T0)
    assert (record.fencing_token, record.transitions) == (1, 0)


def test_regrant_to_the_same_identity_bumps_token_but_not_transitions() -> None:
    mine = LeaseRecord(holder="me", duration_seconds=5, transitions=4, fencing_token=9)
    record = grant_record(mine, identity="me", duration_seconds=5, now=T0)
    assert (record.fencing_token, record.transitions) == (10, 4)


def test_grant_after_release_counts_a_transition_even_for_the_same_identity() -> None:
    released = release_record(LeaseRecord(holder="me", duration_seconds=5, fencing_token=2), now=T0)
    record = grant_record(released, identity="me", duration_seconds=5, now=T0)
    assert (record.fencing_token, record.transitions) == (3, 1)


def test_token_never_goes_below_the_highest_seen() -> None:
    edited = LeaseRecord(holder="x", duration_seconds=5, fencing_token=0)
    record = grant_record(edited, identity="me", duration_seconds=5, now=T0, highest_token_seen=41)
    assert record.fencing_token == 42


def test_grant_repairs_a_malformed_lease() -> None:
    record = grant_record(MALFORMED, identity="me", duration_seconds=5, now=T0)
    assert record.problems == () and record.holder == "me" and record.transitions == 1


def test_renewal_keeps_the_grant_and_always_moves_renew_time_forward() -> None:
    granted = grant_record(HELD, identity="me", duration_seconds=20, now=T0)
    later = renewal_record(granted, duration_seconds=20, now=T0 + timedelta(seconds=5))
    assert later.fencing_token == granted.fencing_token
    assert later.transitions == granted.transitions
    assert later.acquire_time == granted.acquire_time
    assert later.renew_time == T0 + timedelta(seconds=5)
    clock_went_back = renewal_record(later, duration_seconds=20, now=T0)
    assert clock_went_back.renew_time is not None and later.renew_time is not None
    assert clock_went_back.renew_time > later.renew_time


def test_release_empties_holder_with_duration_one_and_keeps_token() -> None:
    granted = grant_record(HELD, identity="me", duration_seconds=20, now=T0)
    released = release_record(granted, now=T0 + timedelta(seconds=1))
    assert released.holder == ""
    assert released.duration_seconds == 1
    assert released.fencing_token == granted.fencing_token
    assert released.transitions == granted.transitions


def test_durations_below_one_second_are_refused() -> None:
    with pytest.raises(ValueError):
        grant_record(None, identity="me", duration_seconds=0, now=T0)
    with pytest.raises(ValueError):
        renewal_record(HELD, duration_seconds=0, now=T0)


def test_a_release_of_a_term_never_seen_is_waited_out() -> None:
    """Hand edits of a grant this replica never saw (not yet renewed: its ``acquireTime`` equals
    its ``renewTime``) look exactly like that term's release: waited out, like any edit."""
    seen = LeaseRecord(holder="a", duration_seconds=60, fencing_token=4, renew_time=T0)
    later = T0 + timedelta(seconds=30)
    next_term = LeaseRecord(
        holder="", duration_seconds=1, fencing_token=5, acquire_time=later, renew_time=later
    )
    same_term = replace(next_term, fencing_token=4)
    assert not is_trusted_release(next_term, seen)
    assert is_trusted_release(same_term, seen)
    assert not is_trusted_release(replace(same_term, renew_time=T0, acquire_time=T0), seen)

"""Issue 23: every decoder of Lease content is total, and whatever k8slease writes reads back.

For any JSON the API server can store (support/hostile.py draws it), each codec returns a value and
a list of what was malformed, and raises nothing; every record the rules produce from what was
decoded (a grant, a renewal, a release, a claim, a run's release) is written, read back equal and
without problems. Times are zero-padded RFC 3339 for every year the decoder accepts.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from k8slease.jobs.lockrules import Verdict, judge_claim, release
from k8slease.kube.microtime import MAX_TIME, MIN_TIME, format_microtime, parse_microtime
from k8slease.lease.jobrecord import (
    COUNT_MAX,
    JobState,
    RunRecord,
    count_up,
    job_state_from_lease,
    lease_with_job_state,
)
from k8slease.lease.record import (
    FENCING_TOKEN_MAX,
    INT32_MAX,
    LeaseRecord,
    lease_with_record,
    record_from_lease,
)
from k8slease.lease.rules import grant_record, release_record, renewal_record
from k8slease.lease.view import LeaseView
from k8slease.names import ANN_CLAIMED_TICK, ANN_FENCING_TOKEN, ANN_LAST_RUN
from k8slease.operator.history import format_precise, format_time, parse_time
from tests.support.hostile import (
    T0,
    any_json,
    at,
    fuzz_settings,
    lease_json,
    run_records,
    time_texts,
)

MICROTIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")


def _in_range(value: datetime | None) -> bool:
    return value is None or (value.tzinfo is not None and MIN_TIME <= value <= MAX_TIME)


# -- times ---------------------------------------------------------------------------------------


@fuzz_settings(2000)
@given(text=time_texts | any_json)
@example(text="9999-12-31T23:59:59.999999-23:59")
@example(text="0001-01-01T00:00:00+23:59")
def test_parse_microtime_raises_only_value_error_and_what_it_accepts_round_trips(
    text: Any,
) -> None:
    try:
        parsed = parse_microtime(text)
    except ValueError as exc:
        assert len(str(exc)) < 200, "the message quotes a bounded excerpt"
        return
    assert _in_range(parsed)
    written = format_microtime(parsed)
    assert MICROTIME.fullmatch(written), written
    assert parse_microtime(written) == parsed
    # the operator's renderings (status fields, format: date-time) read back too
    assert parse_time(format_precise(parsed)) == parsed
    assert parse_time(format_time(parsed)) == parsed.replace(microsecond=0)


@fuzz_settings(2000)
@given(
    moment=st.datetimes(
        min_value=MIN_TIME.replace(tzinfo=None), max_value=MAX_TIME.replace(tzinfo=None)
    )
)
@example(moment=datetime(1, 1, 2))
@example(moment=datetime(1, 6, 1, 2, 3, 4, 5))
@example(moment=MAX_TIME.replace(tzinfo=None))
def test_every_accepted_year_is_written_zero_padded(moment: datetime) -> None:
    value = moment.replace(tzinfo=UTC)
    for written in (format_microtime(value), format_precise(value), format_time(value)):
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z", written), written
        assert parse_microtime(written) <= value


def test_year_one_and_the_end_of_the_calendar() -> None:
    """The hand edits of issues 23 and 26: refused at the boundary with a reason, or written
    back zero-padded (never ``1-06-01T...``, which a date-time field rejects)."""
    assert (
        format_microtime(parse_microtime("0001-06-01T00:00:00Z")) == "0001-06-01T00:00:00.000000Z"
    )
    assert format_time(parse_microtime("0001-06-01T00:00:00Z")) == "0001-06-01T00:00:00Z"
    for text in (
        "9999-12-31T23:59:59.999999-23:59",
        "0001-01-01T00:00:00Z",
        "9999-12-31T00:00:00Z",
    ):
        with pytest.raises(ValueError, match="time outside 0001-01-02T00:00:00Z"):
            parse_microtime(text)
    with pytest.raises(ValueError):
        format_microtime(datetime(9999, 12, 31, 12, tzinfo=UTC))


# -- the Lease record ----------------------------------------------------------------------------


@fuzz_settings(1500)
@given(lease=lease_json())
def test_record_from_lease_is_total_and_every_record_written_from_it_reads_back(
    lease: dict[str, Any],
) -> None:
    record = record_from_lease(lease)
    assert isinstance(record.holder, str)
    assert 0 <= record.duration_seconds <= INT32_MAX
    assert 0 <= record.transitions <= INT32_MAX
    assert 0 <= record.fencing_token <= FENCING_TOKEN_MAX
    assert _in_range(record.acquire_time) and _in_range(record.renew_time)
    granted = grant_record(
        record, identity="r1", duration_seconds=15, now=T0, highest_token_seen=record.fencing_token
    )
    for written in (
        granted,
        renewal_record(granted, duration_seconds=15, now=T0),
        release_record(granted, now=T0),
    ):
        body = lease_with_record(lease, written)
        json.dumps(body)  # serialisable as sent
        assert record_from_lease(body) == written
        assert record_from_lease(body).problems == ()


@fuzz_settings(1500)
@given(lease=lease_json(name="billing.nightly", role="job", job="nightly"))
def test_job_state_and_view_decode_are_total_and_claims_and_releases_read_back(
    lease: dict[str, Any],
) -> None:
    view = LeaseView.decode(lease)
    state = view.job
    for tick in (state.claimed_tick, state.completed_tick):
        assert _in_range(tick)
    assert all(0 <= n <= COUNT_MAX for n in state.counts.values())
    assert all(len(p) < 400 for p in (*state.problems, *view.record.problems))
    claim = judge_claim(
        view.record,
        state,
        me="r1",
        tick=at(3600),
        unchanged_for=1e12,
        lock_at_most_for=600,
        now=at(3600),
        highest_token_seen=view.fencing_token,
    )
    if claim.verdict is not Verdict.GRANT:
        assert claim.verdict is Verdict.ALREADY_CLAIMED
        return
    assert claim.record is not None and claim.state is not None
    run = RunRecord("r1", at(3600), at(3600), at(3601), "succeeded", claim.record.fencing_token)
    released = release(
        claim.record, claim.state, run, ran_for=1.0, lock_at_least_for=0.0, now=at(3601)
    )
    for record, job in ((claim.record, claim.state), released):
        body = lease_with_job_state(lease_with_record(lease, record), job)
        json.dumps(body)
        back = LeaseView.decode(body)
        assert back.record == record and back.record.problems == ()
        assert back.job.problems == ()
        assert back.job.claimed_tick == job.claimed_tick
        assert back.job.completed_tick == job.completed_tick
        assert dict(back.job.counts) == dict(job.counts)
        assert len(body["metadata"]["annotations"][ANN_LAST_RUN] if job.last_run else "") < 2_000


@fuzz_settings(2000)
@given(text=run_records | any_json)
def test_run_record_from_json_raises_only_value_error(text: Any) -> None:
    try:
        run = RunRecord.from_json(text)
    except ValueError:
        return
    assert _in_range(run.tick) and _in_range(run.started) and _in_range(run.finished)
    assert 0 <= run.fencing_token <= FENCING_TOKEN_MAX
    again = RunRecord.from_json(run.to_json())
    assert again == replace(run, holder=again.holder, error=again.error)
    assert run.holder.startswith(again.holder.removesuffix("..."))


def test_hostile_annotations_of_issue_23_are_problems_not_exceptions() -> None:
    """The measured edits: each is reported and read as absent, nothing raises."""
    for edit, expected in (
        ({ANN_CLAIMED_TICK: "9999-12-31T23:59:59.999999-23:59"}, "claimed-tick: time outside"),
        ({ANN_CLAIMED_TICK: "soon"}, "claimed-tick: not an RFC 3339 time"),
        ({ANN_LAST_RUN: "[" * 100_000}, "last-run is not JSON"),
        ({ANN_FENCING_TOKEN: str(2**63)}, "fencing-token is greater than"),
        ({ANN_FENCING_TOKEN: "\u0663"}, "fencing-token is not a non-negative integer"),
    ):
        view = LeaseView.decode({"metadata": {"name": "g.j", "annotations": edit}, "spec": {}})
        problems = " | ".join((*view.record.problems, *view.job.problems))
        assert expected in problems, problems
        assert view.job.claimed_tick is None and view.fencing_token == 0


def test_counts_saturate_at_the_int64_ceiling() -> None:
    assert count_up({"succeeded": COUNT_MAX}, "succeeded") == {"succeeded": COUNT_MAX}
    assert count_up({}, "lost") == {"lost": 1}
    state = job_state_from_lease(
        {"metadata": {"annotations": {"k8slease.io/run-counts": json.dumps({"failed": 2**64})}}}
    )
    assert state.counts == {"failed": COUNT_MAX}
    assert "greater than" in state.problems[0]
    # written back, it reads as it was clamped, without a problem
    assert job_state_from_lease(lease_with_job_state({}, state)).counts == {"failed": COUNT_MAX}
    assert JobState().problems == ()


def test_a_one_megabyte_holder_is_cut_in_the_run_record_it_leaves() -> None:
    run = RunRecord("x" * 1_000_000, T0, T0, T0, "lost", 3)
    assert len(run.to_json()) < 1_000
    assert RunRecord.from_json(run.to_json()).holder.endswith("...")


def test_leaserecord_defaults_are_well_formed() -> None:
    assert (
        record_from_lease(
            lease_with_record({}, LeaseRecord(holder="a", duration_seconds=1))
        ).problems
        == ()
    )

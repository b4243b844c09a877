"""Job annotations on lock Leases: round trips, and hand-edited nonsense that never raises."""

from __future__ import annotations

from datetime import UTC, datetime

from k8slease.lease.jobrecord import JobState, RunRecord, job_state_from_lease, lease_with_job_state
from k8slease.names import ANN_CLAIMED_TICK, ANN_LAST_RUN, ANN_RUN_COUNTS

T = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)


def lease(annotations: dict[str, str]) -> dict[str, object]:
    return {
        "metadata": {
            "name": "billing.invoices",
            "annotations": annotations,
            "labels": {"keep": "me"},
        },
        "spec": {"holderIdentity": "a"},
    }


def test_state_round_trips_and_other_fields_survive() -> None:
    run = RunRecord(
        holder="pod-1",
        tick=T,
        started=T,
        finished=T,
        outcome="failed",
        fencing_token=9,
        error="ValueError: boom",
    )
    state = JobState(
        claimed_tick=T, completed_tick=T, last_run=run, counts={"succeeded": 3, "failed": 1}
    )
    body = lease_with_job_state(lease({"other": "x"}), state)
    assert body["metadata"]["annotations"]["other"] == "x"
    assert body["metadata"]["labels"] == {"keep": "me"}
    assert body["spec"] == {"holderIdentity": "a"}
    assert job_state_from_lease(body) == state


def test_malformed_annotations_are_reported_not_raised() -> None:
    state = job_state_from_lease(
        lease(
            {
                ANN_CLAIMED_TICK: "yesterday",
                ANN_LAST_RUN: "{not json",
                ANN_RUN_COUNTS: "[1, 2]",
            }
        )
    )
    assert state.claimed_tick is None and state.last_run is None and dict(state.counts) == {}
    assert len(state.problems) == 3
    assert any("claimed-tick" in p for p in state.problems)
    assert any("last-run is not JSON" in p for p in state.problems)


def test_a_run_record_with_an_unknown_outcome_is_rejected_with_its_reason() -> None:
    bad = (
        '{"holder":"a","tick":"2026-11-30T02:00:00.000000Z","started":"2026-11-30T02:00:00Z",'
        '"finished":"2026-11-30T02:00:01Z","outcome":"maybe","fencingToken":1}'
    )
    state = job_state_from_lease(lease({ANN_LAST_RUN: bad}))
    assert state.last_run is None
    assert "outcome" in state.problems[0]


def test_negative_or_foreign_counts_are_ignored() -> None:
    state = job_state_from_lease(
        lease({ANN_RUN_COUNTS: '{"succeeded": -4, "weird": 3, "failed": 2}'})
    )
    assert dict(state.counts) == {"succeeded": 0, "failed": 2}


def test_missing_metadata_is_an_empty_state() -> None:
    assert job_state_from_lease({}) == JobState()
    assert job_state_from_lease({"metadata": None}) == JobState()

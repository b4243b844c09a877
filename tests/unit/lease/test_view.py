"""A Lease is decoded once into a LeaseView, and what was unreadable is flagged, not guessed."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from k8slease.lease.jobrecord import JobState, lease_with_job_state
from k8slease.lease.record import UNREADABLE_HOLDER, LeaseRecord, new_lease
from k8slease.lease.view import LeaseView, received_lease
from k8slease.names import LABEL_GROUP, LABEL_ROLE, ROLE_JOB

T0 = datetime(2026, 1, 2, 3, 4, 5, 600000, tzinfo=UTC)


def job_lease() -> dict[str, Any]:
    record = LeaseRecord(holder="a", duration_seconds=30, renew_time=T0, fencing_token=7)
    body = new_lease(
        "billing.nightly", "ns", record, labels={LABEL_GROUP: "billing", LABEL_ROLE: ROLE_JOB}
    )
    body["metadata"]["resourceVersion"] = "42"
    return lease_with_job_state(body, JobState(claimed_tick=T0))


def test_decode_reads_every_part_once() -> None:
    view = LeaseView.decode(job_lease())
    assert (view.name, view.resource_version) == ("billing.nightly", "42")
    assert view.labels[LABEL_ROLE] == ROLE_JOB
    assert view.record.holder == "a" and view.record.holder_readable
    assert view.fencing_token == 7
    assert view.job.claimed_tick == T0
    assert view.body["spec"]["holderIdentity"] == "a"


def test_a_received_body_is_decoded_from_a_copy_its_sender_may_change() -> None:
    body = job_lease()
    view = received_lease(body)
    assert view == LeaseView.decode(job_lease())
    body["spec"]["holderIdentity"] = "b"  # kopf reuses and changes the bodies it hands out
    body["metadata"]["resourceVersion"] = "43"
    assert view.record.holder == "a" and view.body["spec"]["holderIdentity"] == "a"
    assert view.resource_version == "42"


def test_an_unreadable_holder_is_flagged_not_compared() -> None:
    body = job_lease()
    body["spec"]["holderIdentity"] = 17
    record = LeaseView.decode(body).record
    assert not record.holder_readable
    assert record.held and record.holder == UNREADABLE_HOLDER
    assert record.problems


def test_an_unreadable_spec_leaves_no_holder_and_is_flagged() -> None:
    body = job_lease()
    body["spec"] = "nonsense"
    record = LeaseView.decode(body).record
    assert not record.holder_readable and not record.held
    assert record.problems == ("spec is not an object: str",)


def test_readability_does_not_change_record_equality() -> None:
    assert LeaseRecord(holder="x", holder_readable=False) == LeaseRecord(holder="x")

"""The Lease record and its converters: client-go compatible fields, unknown fields preserved."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from k8slease.kube.microtime import format_microtime, parse_microtime
from k8slease.lease.meta import resource_version
from k8slease.lease.record import (
    LeaseRecord,
    lease_with_record,
    new_lease,
    record_from_lease,
)
from k8slease.names import ANN_FENCING_TOKEN

T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def test_microtime_round_trip_has_six_fractional_digits() -> None:
    text = format_microtime(T0)
    assert text == "2026-01-02T03:04:05.678901Z"
    assert parse_microtime(text) == T0


def test_parse_accepts_offsets_and_short_fractions() -> None:
    plus_two = timezone(timedelta(hours=2))
    assert parse_microtime("2026-01-02T05:04:05+02:00") == datetime(
        2026, 1, 2, 5, 4, 5, tzinfo=plus_two
    )
    assert parse_microtime("2026-01-02T03:04:05.5Z").microsecond == 500000


@pytest.mark.parametrize("bad", ["", "yesterday", "2026-01-02T03:04:05", 42, None])
def test_parse_rejects_non_times(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_microtime(bad)  # type: ignore[arg-type]


def test_format_rejects_naive_datetimes() -> None:
    with pytest.raises(ValueError):
        format_microtime(datetime(2026, 1, 1))


def test_record_round_trips_through_a_lease() -> None:
    record = LeaseRecord(
        holder="a-1",
        duration_seconds=15,
        acquire_time=T0,
        renew_time=T0 + timedelta(seconds=3),
        transitions=4,
        fencing_token=9,
    )
    lease = new_lease("demo", "ns", record, labels={"k8slease.io/group": "demo"})
    assert lease["spec"] == {
        "holderIdentity": "a-1",
        "leaseDurationSeconds": 15,
        "leaseTransitions": 4,
        "acquireTime": "2026-01-02T03:04:05.678901Z",
        "renewTime": "2026-01-02T03:04:08.678901Z",
    }
    assert lease["metadata"]["labels"] == {"k8slease.io/group": "demo"}
    assert lease["metadata"]["annotations"][ANN_FENCING_TOKEN] == "9"
    assert record_from_lease(lease) == record


def test_writing_preserves_unknown_fields_and_resource_version() -> None:
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": "demo",
            "resourceVersion": "17",
            "uid": "u-1",
            "labels": {"team": "x"},
            "annotations": {"other": "kept"},
        },
        "spec": {
            "holderIdentity": "old",
            "leaseDurationSeconds": 10,
            "strategy": "OldestEmulationVersion",
            "preferredHolder": "b",
        },
    }
    body = lease_with_record(lease, LeaseRecord(holder="new", duration_seconds=20, fencing_token=3))
    assert body["spec"]["strategy"] == "OldestEmulationVersion"
    assert body["spec"]["preferredHolder"] == "b"
    assert body["metadata"]["labels"] == {"team": "x"}
    assert body["metadata"]["annotations"] == {"other": "kept", ANN_FENCING_TOKEN: "3"}
    assert resource_version(body) == "17"
    assert body["metadata"]["uid"] == "u-1", "a PUT after a deletion must fail the UID check"
    assert lease["spec"]["holderIdentity"] == "old", "the input is not modified"


def test_empty_holder_is_written_as_absent() -> None:
    body = lease_with_record({"metadata": {}}, LeaseRecord(holder="", duration_seconds=1))
    assert "holderIdentity" not in body["spec"]
    assert body["spec"]["leaseDurationSeconds"] == 1


@pytest.mark.parametrize(
    ("lease", "fragment"),
    [
        ({"metadata": {}, "spec": "nonsense"}, "spec is not an object"),
        ({"metadata": {}, "spec": {"holderIdentity": 5}}, "holderIdentity"),
        (
            {"metadata": {}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 0}},
            "must be in 1..2147483647",
        ),
        (
            {"metadata": {}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": -3}},
            "must be in 1..2147483647",
        ),
        ({"metadata": {}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": "x"}}, "integer"),
        ({"metadata": {}, "spec": {"holderIdentity": "a"}}, "missing"),
        (
            {
                "metadata": {},
                "spec": {"holderIdentity": "a", "leaseDurationSeconds": 5, "renewTime": "soon"},
            },
            "renewTime",
        ),
        (
            {"metadata": {"annotations": {ANN_FENCING_TOKEN: "-1"}}, "spec": {}},
            ANN_FENCING_TOKEN,
        ),
    ],
)
def test_malformed_leases_are_read_without_raising(lease: dict[str, object], fragment: str) -> None:
    record = record_from_lease(lease)
    assert record.malformed
    assert any(fragment in problem for problem in record.problems)


def test_missing_spec_is_malformed_never_free() -> None:
    record = record_from_lease({"metadata": {"name": "x"}})
    assert record.problems == ("spec is missing",)
    assert not record.held and record.malformed and not record.holder_readable


def test_resource_version_of_odd_bodies() -> None:
    assert resource_version({}) == ""
    assert resource_version({"metadata": "x"}) == ""
    assert resource_version({"metadata": {"resourceVersion": "5"}}) == "5"

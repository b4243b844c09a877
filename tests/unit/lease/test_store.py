"""LeaseStore answers decoded Leases and sends exactly the request it wraps, nothing more."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from k8slease.errors import Conflict, NotFound
from k8slease.lease.jobrecord import JobState
from k8slease.lease.record import LeaseRecord, lease_with_record, new_lease
from k8slease.lease.store import LeaseStore, list_leases
from k8slease.lease.transport import WatchEvent


class CountingAPI:
    """One Lease in memory; every request is recorded by verb."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.calls: list[str] = []
        self.rv = 0

    def _stored(self, body: Mapping[str, Any]) -> dict[str, Any]:
        self.rv += 1
        self.lease = copy.deepcopy(dict(body))
        self.lease["metadata"]["resourceVersion"] = str(self.rv)
        return copy.deepcopy(self.lease)

    def get(self, name: str) -> dict[str, Any]:
        self.calls.append("get")
        if self.lease is None:
            raise NotFound(f"get: {name} not found", status=404)
        return copy.deepcopy(self.lease)

    def create(self, body: Mapping[str, Any]) -> dict[str, Any]:
        self.calls.append("create")
        return self._stored(body)

    def replace(self, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        self.calls.append("update")
        assert self.lease is not None
        if body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
            raise Conflict(f"update: {name} conflict", status=409)
        return self._stored(body)

    def list(self, *, label_selector: str | None = None) -> tuple[list[dict[str, Any]], str]:
        self.calls.append("list")
        return ([] if self.lease is None else [copy.deepcopy(self.lease)]), str(self.rv)

    def watch(
        self, *, name: str, resource_version: str | None, timeout_seconds: int
    ) -> Iterator[WatchEvent]:
        self.calls.append("watch")
        assert self.lease is not None
        yield WatchEvent("MODIFIED", copy.deepcopy(self.lease))
        yield WatchEvent("BOOKMARK", {"metadata": {"resourceVersion": "99"}})

    def close_watches(self) -> None:
        self.calls.append("close_watches")


def _body(holder: str = "a", token: int = 1) -> dict[str, Any]:
    record = LeaseRecord(holder=holder, duration_seconds=30, fencing_token=token)
    return new_lease("l", "ns", record)


def test_each_call_is_one_request_and_answers_a_decoded_lease() -> None:
    api = CountingAPI()
    leases = LeaseStore(api)
    assert leases.find("l") is None
    created = leases.create(_body())
    assert (created.name, created.resource_version, created.record.holder) == ("l", "1", "a")
    got = leases.get("l")
    assert got == created
    replaced = leases.replace("l", lease_with_record(got.body, LeaseRecord(holder="b")))
    assert (replaced.resource_version, replaced.record.holder) == ("2", "b")
    assert api.calls == ["get", "create", "get", "update"]


def test_errors_pass_through_unchanged_except_a_missing_lease_for_find() -> None:
    api = CountingAPI()
    leases = LeaseStore(api)
    with pytest.raises(NotFound):
        leases.get("l")
    leases.create(_body())
    stale = _body(holder="b")
    stale["metadata"]["resourceVersion"] = "0"
    with pytest.raises(Conflict):
        leases.replace("l", stale)
    assert api.lease is not None and api.lease["spec"]["holderIdentity"] == "a"  # nothing lost


def test_list_and_watch_decode_every_item_and_event() -> None:
    api = CountingAPI()
    LeaseStore(api).create(_body(token=7))
    items, version = list_leases(api, label_selector="k8slease.io/group")
    assert [(v.name, v.fencing_token) for v in items] == [("l", 7)] and version == "1"
    events = list(LeaseStore(api).watch(name="l", resource_version="1", timeout_seconds=5))
    assert [(e.type, e.view.resource_version) for e in events] == [
        ("MODIFIED", "1"),
        ("BOOKMARK", "99"),
    ]
    assert events[0].view.fencing_token == 7
    assert api.calls == ["create", "list", "watch"]


def test_update_writes_the_edits_into_the_view_read_and_keeps_every_other_field() -> None:
    api = CountingAPI()
    leases = LeaseStore(api)
    body = _body()
    body["metadata"]["labels"] = {"team": "x"}
    body["spec"]["preferredHolder"] = "c"  # a field k8slease does not know
    read = leases.create(body)
    tick = datetime(2026, 1, 2, tzinfo=UTC)
    record = LeaseRecord(holder="b", duration_seconds=30, fencing_token=2)
    written = leases.update("l", read, record=record, state=JobState(claimed_tick=tick))
    assert (written.record.holder, written.fencing_token) == ("b", 2)
    assert written.job.claimed_tick == tick
    assert written.body["spec"]["preferredHolder"] == "c"
    assert written.labels == {"team": "x"}
    with pytest.raises(Conflict):  # conditional on the version read: a stale view loses
        leases.update("l", read, record=record)
    assert api.calls == ["create", "update", "update"]


def test_create_new_carries_the_record_labels_and_job_state() -> None:
    api = CountingAPI()
    tick = datetime(2026, 1, 2, tzinfo=UTC)
    created = LeaseStore(api).create_new(
        "l",
        namespace="ns",
        record=LeaseRecord(holder="a", duration_seconds=30, fencing_token=3),
        labels={"k8slease.io/group": "g"},
        state=JobState(claimed_tick=tick),
    )
    assert (created.name, created.fencing_token, created.job.claimed_tick) == ("l", 3, tick)
    assert created.labels == {"k8slease.io/group": "g"}
    assert api.calls == ["create"]

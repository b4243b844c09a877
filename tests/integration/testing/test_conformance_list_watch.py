"""Lists and watches of Leases, as kube-apiserver serves them: the list kind, label and field
selectors, pagination and a list as a Table; watches from a resourceVersion or from the current
state, with a label selector, a timeout, bookmarks, as Tables, and from a version too old (410).

(Part of the conformance tests: helpers in conformance.py, fixtures in conftest.py.)
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client, watch

from tests.integration.testing.conformance import TABLE, lease_body, raw, status_of
from tests.support.bodies import MERGE

pytestmark = pytest.mark.conformance


# --- lists ----------------------------------------------------------------------------------


def test_list_kind_and_selectors(coord: client.CoordinationV1Api, k8s_namespace: str) -> None:
    for name, app in (("one", "x"), ("two", "y"), ("three", "x")):
        body = lease_body(name)
        body["metadata"]["labels"] = {"app": app, "tier": name}
        coord.create_namespaced_lease(k8s_namespace, body)
    everything = coord.list_namespaced_lease(k8s_namespace)
    assert everything.kind == "LeaseList" and everything.api_version == "coordination.k8s.io/v1"
    assert int(everything.metadata.resource_version) > 0

    def names(**kwargs: Any) -> list[str]:
        return sorted(
            i.metadata.name for i in coord.list_namespaced_lease(k8s_namespace, **kwargs).items
        )

    assert names() == ["one", "three", "two"]
    assert names(label_selector="app=x") == ["one", "three"]
    assert names(label_selector="app!=x") == ["two"]
    assert names(label_selector="tier in (one,two),app=x") == ["one"]
    assert names(label_selector="tier notin (one)") == ["three", "two"]
    assert names(label_selector="missing") == []
    assert names(label_selector="!missing") == ["one", "three", "two"]
    assert names(field_selector="metadata.name=two") == ["two"]
    assert names(field_selector="metadata.name!=two") == ["one", "three"]
    across = coord.list_lease_for_all_namespaces(
        field_selector=f"metadata.namespace={k8s_namespace}"
    )
    assert len(across.items) == 3
    with pytest.raises(client.ApiException) as info:
        coord.list_namespaced_lease(k8s_namespace, field_selector="spec.holderIdentity=a")
    assert status_of(info.value)["reason"] == "BadRequest"


def test_list_pagination(coord: client.CoordinationV1Api, k8s_namespace: str) -> None:
    for i in range(5):
        coord.create_namespaced_lease(k8s_namespace, lease_body(f"page-{i}"))
    first = coord.list_namespaced_lease(k8s_namespace, limit=2)
    assert len(first.items) == 2 and first.metadata._continue
    seen = [i.metadata.name for i in first.items]
    token = first.metadata._continue
    while token:
        page = coord.list_namespaced_lease(k8s_namespace, limit=2, _continue=token)
        seen += [i.metadata.name for i in page.items]
        token = page.metadata._continue
    assert sorted(seen) == [f"page-{i}" for i in range(5)]


def test_lease_table(
    k8s_api_client: client.ApiClient, coord: client.CoordinationV1Api, k8s_namespace: str
) -> None:
    coord.create_namespaced_lease(k8s_namespace, lease_body("tab", holderIdentity="me"))
    status, doc = raw(
        k8s_api_client, "GET", f"/apis/coordination.k8s.io/v1/namespaces/{k8s_namespace}/leases",
        headers={"Accept": TABLE},
    )  # fmt: skip
    assert status == 200 and doc["kind"] == "Table"
    assert [c["name"] for c in doc["columnDefinitions"]] == ["Name", "Holder", "Age"]
    assert doc["rows"][0]["cells"][:2] == ["tab", "me"]


# --- watch ----------------------------------------------------------------------------------


def test_watch_from_resource_version_sees_only_later_events(
    coord: client.CoordinationV1Api, k8s_namespace: str
) -> None:
    coord.create_namespaced_lease(k8s_namespace, lease_body("before"))
    rv = coord.list_namespaced_lease(k8s_namespace).metadata.resource_version
    coord.create_namespaced_lease(k8s_namespace, lease_body("after"))
    coord.patch_namespaced_lease(
        "after", k8s_namespace, {"spec": {"holderIdentity": "q"}}, _content_type=MERGE
    )
    coord.delete_namespaced_lease("after", k8s_namespace)
    seen = []
    w = watch.Watch()
    for event in w.stream(
        coord.list_namespaced_lease, k8s_namespace, resource_version=rv, timeout_seconds=5
    ):
        seen.append((event["type"], event["object"].metadata.name))
        if event["type"] == "DELETED":
            w.stop()
    assert seen == [("ADDED", "after"), ("MODIFIED", "after"), ("DELETED", "after")]


def test_watch_without_resource_version_starts_with_current_state(
    coord: client.CoordinationV1Api, k8s_namespace: str
) -> None:
    coord.create_namespaced_lease(k8s_namespace, lease_body("existing"))
    w = watch.Watch()
    seen = []
    created = threading.Event()
    for event in w.stream(coord.list_namespaced_lease, k8s_namespace, timeout_seconds=5):
        seen.append((event["type"], event["object"].metadata.name))
        if not created.is_set():
            created.set()
            coord.create_namespaced_lease(k8s_namespace, lease_body("new"))
        elif event["object"].metadata.name == "new":
            w.stop()
    assert seen == [("ADDED", "existing"), ("ADDED", "new")]


def test_watch_label_selector(coord: client.CoordinationV1Api, k8s_namespace: str) -> None:
    rv = coord.list_namespaced_lease(k8s_namespace).metadata.resource_version
    other = lease_body("other")
    other["metadata"]["labels"] = {"app": "other"}
    coord.create_namespaced_lease(k8s_namespace, other)
    coord.create_namespaced_lease(k8s_namespace, lease_body("mine"))
    w = watch.Watch()
    for event in w.stream(
        coord.list_namespaced_lease, k8s_namespace, resource_version=rv, label_selector="app=demo",
        timeout_seconds=5,
    ):  # fmt: skip
        assert event["object"].metadata.name == "mine"
        w.stop()


def test_watch_timeout_ends_the_stream(coord: client.CoordinationV1Api, k8s_namespace: str) -> None:
    rv = coord.list_namespaced_lease(k8s_namespace).metadata.resource_version
    started = datetime.now(UTC)
    events = list(
        watch.Watch().stream(
            coord.list_namespaced_lease, k8s_namespace, resource_version=rv, timeout_seconds=1
        )
    )
    assert events == []
    assert 0.9 <= (datetime.now(UTC) - started).total_seconds() < 5


def test_watch_bookmarks(coord: client.CoordinationV1Api, k8s_namespace: str) -> None:
    rv = coord.list_namespaced_lease(k8s_namespace).metadata.resource_version
    bookmarks = []
    # kube-apiserver's watch cache sends it 2 s before the deadline from a 1 s ticker; on a
    # loaded machine one watch can close first, so up to three watches get the chance
    for _ in range(3):
        w = watch.Watch()
        for event in w.stream(
            coord.list_namespaced_lease, k8s_namespace, resource_version=rv,
            allow_watch_bookmarks=True, timeout_seconds=6,  # it comes ~2 s before the end
        ):  # fmt: skip
            if event["type"] == "BOOKMARK":
                bookmarks.append(event["raw_object"])
                w.stop()
        if bookmarks:
            break
    assert bookmarks, "a BOOKMARK arrives before the watch's deadline"
    assert bookmarks[0]["kind"] == "Lease"
    assert int(bookmarks[0]["metadata"]["resourceVersion"]) >= int(rv)


def test_watch_as_table(coord: client.CoordinationV1Api, k8s_namespace: str) -> None:
    rv = coord.list_namespaced_lease(k8s_namespace).metadata.resource_version
    coord.create_namespaced_lease(k8s_namespace, lease_body("t1"))
    coord.create_namespaced_lease(k8s_namespace, lease_body("t2"))
    w = watch.Watch()
    tables = []
    for event in w.stream(
        coord.list_namespaced_lease, k8s_namespace, resource_version=rv, timeout_seconds=5,
        deserialize=False, _headers={"Accept": TABLE},
    ):  # fmt: skip
        tables.append(event["object"])
        if len(tables) == 2:
            w.stop()
    assert [t["kind"] for t in tables] == ["Table", "Table"]
    assert [c["name"] for c in tables[0]["columnDefinitions"]] == ["Name", "Holder", "Age"]
    assert [t["rows"][0]["cells"][0] for t in tables] == ["t1", "t2"]


@pytest.mark.not_on_control_plane("a fresh etcd has compacted nothing: a watch from RV 1 replays")
def test_watch_from_too_old_resource_version_is_gone(
    coord: client.CoordinationV1Api, k8s_namespace: str
) -> None:
    with pytest.raises(client.ApiException) as info:
        for _ in watch.Watch().stream(
            coord.list_namespaced_lease, k8s_namespace, resource_version="1", timeout_seconds=5
        ):
            pass
    assert info.value.status == 410
    assert "Expired" in str(info.value.reason) or "too old" in str(info.value.reason)

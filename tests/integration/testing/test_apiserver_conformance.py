"""Kubernetes API conformance of the embedded server, through the official client only.

Every test here talks to ``k8s_apiserver`` through ``kubernetes.client`` and asserts what a
real kube-apiserver does, so the module passes unchanged against a real cluster
(``pytest -m conformance --kubeconfig ~/.kube/kind-config tests/integration/testing``). Nothing here
peeks at the embedded server's internals; those tests live in test_apiserver_embedded.py.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client, watch

from tests.support import bodies
from tests.support.bodies import JSON_PATCH, MERGE, STRATEGIC
from tests.support.bodies import TABLE as TABLE_ONLY

pytestmark = pytest.mark.conformance

#: A Table, or JSON where the server cannot make one.
TABLE = f"{TABLE_ONLY},application/json"


def raw(
    api: client.ApiClient,
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    """A request through the official client's transport, returning (status, parsed JSON)."""
    params = api.param_serialize(
        method=method,
        resource_path=path,
        header_params={"Accept": "application/json", **(headers or {})},
        body=body,
        auth_settings=["BearerToken"],
    )
    response = api.call_api(*params)
    response.read()
    data = response.data.decode()
    return response.status, (json.loads(data) if data.strip().startswith(("{", "[")) else data)


def status_of(exc: client.ApiException) -> dict[str, Any]:
    """The ``kind: Status`` body of an API error."""
    body: dict[str, Any] = json.loads(exc.body)
    assert body["kind"] == "Status"
    assert body["status"] == "Failure"
    assert body["code"] == exc.status
    return body


def lease_body(name: str, **spec: Any) -> dict[str, Any]:
    return bodies.lease_body(name, {"app": "demo"}, **spec)


def widget_crd(group: str) -> dict[str, Any]:
    """A small namespaced CRD with a status subresource, printer columns and a schema."""
    return bodies.widget_crd(group, seen=True)


@pytest.fixture
def coord(k8s_api_client: client.ApiClient) -> client.CoordinationV1Api:
    return client.CoordinationV1Api(k8s_api_client)


@pytest.fixture
def widgets(
    k8s_api_client: client.ApiClient, k8s_crd: Callable[[dict[str, Any]], dict[str, Any]]
) -> Iterator[tuple[client.CustomObjectsApi, str]]:
    """A served Widget CRD (unique group) and a CustomObjectsApi."""
    group = f"t{uuid.uuid4().hex[:8]}.k8slease.io"
    k8s_crd(widget_crd(group))
    yield client.CustomObjectsApi(k8s_api_client), group


def widget(name: str, group: str, **spec: Any) -> dict[str, Any]:
    """A Widget body; custom resources must name their apiVersion and kind (400 otherwise)."""
    return {
        "apiVersion": f"{group}/v1",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"size": 3, **spec},
    }


# --- discovery ----------------------------------------------------------------------------


def test_version_and_core_discovery(k8s_api_client: client.ApiClient) -> None:
    info = client.VersionApi(k8s_api_client).get_code()
    assert info.major == "1" and info.git_version.startswith("v1.")
    assert "v1" in client.CoreApi(k8s_api_client).get_api_versions().versions
    core = {r.name: r for r in client.CoreV1Api(k8s_api_client).get_api_resources().resources}
    assert core["namespaces"].namespaced is False
    assert core["events"].namespaced is True and "watch" in core["events"].verbs
    assert "namespaces/status" in core


def test_group_discovery(k8s_api_client: client.ApiClient) -> None:
    groups = {g.name: g for g in client.ApisApi(k8s_api_client).get_api_versions().groups}
    for name in ("coordination.k8s.io", "apiextensions.k8s.io", "events.k8s.io"):
        assert groups[name].preferred_version.version == "v1"
    leases = client.CoordinationV1Api(k8s_api_client).get_api_resources()
    assert leases.group_version == "coordination.k8s.io/v1"
    lease = next(r for r in leases.resources if r.name == "leases")
    assert lease.kind == "Lease" and lease.namespaced
    assert set(lease.verbs) >= {"create", "get", "list", "watch", "update", "patch", "delete"}


def test_crd_is_discoverable_and_served_at_once(
    k8s_api_client: client.ApiClient,
    widgets: tuple[client.CustomObjectsApi, str],
    k8s_namespace: str,
) -> None:
    api, group = widgets
    groups = {g.name for g in client.ApisApi(k8s_api_client).get_api_versions().groups}
    assert group in groups
    status, doc = raw(k8s_api_client, "GET", f"/apis/{group}/v1")
    assert status == 200
    names = {r["name"]: r for r in doc["resources"]}
    assert names["widgets"]["shortNames"] == ["wdg"] and "widgets/status" in names
    created = api.create_namespaced_custom_object(
        group, "v1", k8s_namespace, "widgets", widget("w", group)
    )
    assert created["kind"] == "Widget" and created["apiVersion"] == f"{group}/v1"


# --- metadata and CRUD ----------------------------------------------------------------------


def test_default_namespace_exists(k8s_api_client: client.ApiClient) -> None:
    ns = client.CoreV1Api(k8s_api_client).read_namespace("default")
    assert ns.status.phase == "Active"


def test_create_sets_server_metadata(coord: client.CoordinationV1Api, k8s_namespace: str) -> None:
    lease = coord.create_namespaced_lease(k8s_namespace, lease_body("meta"))
    meta = lease.metadata
    assert lease.kind == "Lease" and lease.api_version == "coordination.k8s.io/v1"
    assert meta.uid and meta.creation_timestamp is not None and int(meta.resource_version) > 0
    assert meta.namespace == k8s_namespace
    again = coord.read_namespaced_lease("meta", k8s_namespace)
    assert again.metadata.resource_version == meta.resource_version  # reads do not write


def test_generate_name(coord: client.CoordinationV1Api, k8s_namespace: str) -> None:
    body = lease_body("")
    body["metadata"] = {"generateName": "job-"}
    first = coord.create_namespaced_lease(k8s_namespace, body)
    second = coord.create_namespaced_lease(k8s_namespace, body)
    assert first.metadata.name.startswith("job-") and len(first.metadata.name) == 9
    assert first.metadata.name != second.metadata.name
    assert first.metadata.generate_name == "job-"


def test_create_twice_is_already_exists(
    coord: client.CoordinationV1Api, k8s_namespace: str
) -> None:
    coord.create_namespaced_lease(k8s_namespace, lease_body("dup"))
    with pytest.raises(client.ApiException) as info:
        coord.create_namespaced_lease(k8s_namespace, lease_body("dup"))
    body = status_of(info.value)
    assert (info.value.status, body["reason"]) == (409, "AlreadyExists")
    assert body["details"] == {"name": "dup", "group": "coordination.k8s.io", "kind": "leases"}


def test_get_missing_is_not_found(coord: client.CoordinationV1Api, k8s_namespace: str) -> None:
    with pytest.raises(client.ApiException) as info:
        coord.read_namespaced_lease("nope", k8s_namespace)
    body = status_of(info.value)
    assert (info.value.status, body["reason"]) == (404, "NotFound")
    assert body["details"]["name"] == "nope" and body["details"]["kind"] == "leases"
    assert body["message"] == 'leases.coordination.k8s.io "nope" not found'


def test_create_in_missing_namespace_is_not_found(coord: client.CoordinationV1Api) -> None:
    with pytest.raises(client.ApiException) as info:
        coord.create_namespaced_lease(f"missing-{uuid.uuid4().hex[:6]}", lease_body("x"))
    assert status_of(info.value)["reason"] == "NotFound"


def test_update_with_stale_resource_version_conflicts(
    coord: client.CoordinationV1Api, k8s_namespace: str
) -> None:
    lease = coord.create_namespaced_lease(k8s_namespace, lease_body("upd"))
    stale = lease.metadata.resource_version
    lease.spec.holder_identity = "b"
    updated = coord.replace_namespaced_lease("upd", k8s_namespace, lease)
    assert updated.spec.holder_identity == "b"
    assert int(updated.metadata.resource_version) > int(stale)
    lease.spec.holder_identity = "c"
    lease.metadata.resource_version = stale
    with pytest.raises(client.ApiException) as info:
        coord.replace_namespaced_lease("upd", k8s_namespace, lease)
    body = status_of(info.value)
    assert (info.value.status, body["reason"]) == (409, "Conflict")
    assert "the object has been modified" in body["message"]
    assert body["details"]["name"] == "upd"


def test_update_of_a_lease_needs_a_resource_version(
    coord: client.CoordinationV1Api, k8s_namespace: str
) -> None:
    coord.create_namespaced_lease(k8s_namespace, lease_body("uncond"))
    with pytest.raises(client.ApiException) as info:
        coord.replace_namespaced_lease(
            "uncond", k8s_namespace, lease_body("uncond", holderIdentity="z")
        )
    body = status_of(info.value)
    assert (info.value.status, body["reason"]) == (422, "Invalid")
    assert body["details"]["causes"][0]["field"] == "metadata.resourceVersion"


def test_update_of_missing_lease_creates_it(
    coord: client.CoordinationV1Api, k8s_namespace: str
) -> None:
    _, code, _ = coord.replace_namespaced_lease_with_http_info(
        "ghost", k8s_namespace, lease_body("ghost")
    )
    assert code == 201
    assert coord.read_namespaced_lease("ghost", k8s_namespace).metadata.uid


def test_update_of_a_deleted_lease_with_its_uid_is_a_conflict_not_a_create(
    coord: client.CoordinationV1Api, k8s_namespace: str
) -> None:
    """A PUT of a Lease as read before someone deleted it carries the old UID: the real server
    checks it as a precondition and answers 409 instead of creating the Lease anew (which would
    let a claim judged on a stale view bypass its resourceVersion condition). Without a UID the
    same PUT creates it."""
    before = coord.create_namespaced_lease(k8s_namespace, lease_body("gone"))
    coord.delete_namespaced_lease("gone", k8s_namespace)
    stale = lease_body("gone", holderIdentity="late")
    stale["metadata"].update(
        uid=before.metadata.uid, resourceVersion=before.metadata.resource_version
    )
    with pytest.raises(client.ApiException) as info:
        coord.replace_namespaced_lease("gone", k8s_namespace, stale)
    body = status_of(info.value)
    assert (info.value.status, body["reason"]) == (409, "Conflict")
    assert f"UID in precondition: {before.metadata.uid}" in body["message"]
    with pytest.raises(client.ApiException) as missing:
        coord.read_namespaced_lease("gone", k8s_namespace)
    assert missing.value.status == 404
    del stale["metadata"]["uid"]
    _, code, _ = coord.replace_namespaced_lease_with_http_info("gone", k8s_namespace, stale)
    assert code == 201


def test_merge_and_json_and_strategic_patch(
    coord: client.CoordinationV1Api, k8s_namespace: str
) -> None:
    coord.create_namespaced_lease(k8s_namespace, lease_body("p"))
    merged = coord.patch_namespaced_lease(
        "p", k8s_namespace, {"spec": {"holderIdentity": "m"}}, _content_type=MERGE
    )
    assert merged.spec.holder_identity == "m" and merged.spec.lease_duration_seconds == 15
    patched = coord.patch_namespaced_lease(
        "p", k8s_namespace,
        [{"op": "test", "path": "/spec/holderIdentity", "value": "m"},
         {"op": "replace", "path": "/spec/holderIdentity", "value": "j"}],
        _content_type=JSON_PATCH,
    )  # fmt: skip
    assert patched.spec.holder_identity == "j"
    strategic = coord.patch_namespaced_lease(
        "p", k8s_namespace, {"metadata": {"labels": {"extra": "1"}}}, _content_type=STRATEGIC
    )
    assert strategic.metadata.labels == {"app": "demo", "extra": "1"}
    with pytest.raises(client.ApiException) as info:
        coord.patch_namespaced_lease(
            "p", k8s_namespace, [{"op": "test", "path": "/spec/holderIdentity", "value": "x"}],
            _content_type=JSON_PATCH,
        )  # fmt: skip
    assert info.value.status == 422


def test_patch_resource_version_is_a_precondition(
    coord: client.CoordinationV1Api, k8s_namespace: str
) -> None:
    lease = coord.create_namespaced_lease(k8s_namespace, lease_body("pre"))
    rv = lease.metadata.resource_version
    ok = coord.patch_namespaced_lease(
        "pre", k8s_namespace,
        {"metadata": {"resourceVersion": rv}, "spec": {"holderIdentity": "b"}}, _content_type=MERGE,
    )  # fmt: skip
    assert ok.spec.holder_identity == "b"
    with pytest.raises(client.ApiException) as info:
        coord.patch_namespaced_lease(
            "pre", k8s_namespace,
            {"metadata": {"resourceVersion": rv}, "spec": {"holderIdentity": "c"}},
            _content_type=MERGE,
        )  # fmt: skip
    assert status_of(info.value)["reason"] == "Conflict"


def test_delete_with_preconditions(coord: client.CoordinationV1Api, k8s_namespace: str) -> None:
    lease = coord.create_namespaced_lease(k8s_namespace, lease_body("del"))
    with pytest.raises(client.ApiException) as info:
        coord.delete_namespaced_lease(
            "del",
            k8s_namespace,
            body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="wrong")),
        )
    body = status_of(info.value)
    assert body["reason"] == "Conflict" and "does not match the UID in record" in body["message"]
    with pytest.raises(client.ApiException) as info:
        coord.delete_namespaced_lease(
            "del", k8s_namespace,
            body=client.V1DeleteOptions(preconditions=client.V1Preconditions(resource_version="1")),
        )  # fmt: skip
    assert status_of(info.value)["reason"] == "Conflict"
    coord.delete_namespaced_lease(
        "del", k8s_namespace,
        body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=lease.metadata.uid)),
    )  # fmt: skip
    with pytest.raises(client.ApiException) as info:
        coord.read_namespaced_lease("del", k8s_namespace)
    assert info.value.status == 404


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


def test_invalid_names_and_mismatched_urls(
    k8s_api_client: client.ApiClient, coord: client.CoordinationV1Api, k8s_namespace: str
) -> None:
    with pytest.raises(client.ApiException) as info:
        coord.create_namespaced_lease(k8s_namespace, lease_body("Not_A_Name"))
    body = status_of(info.value)
    assert (info.value.status, body["reason"]) == (422, "Invalid")
    assert body["details"]["causes"][0]["field"] == "metadata.name"
    coord.create_namespaced_lease(k8s_namespace, lease_body("named"))
    path = f"/apis/coordination.k8s.io/v1/namespaces/{k8s_namespace}/leases/named"
    status, body = raw(k8s_api_client, "PUT", path, lease_body("other"))
    assert (status, body["reason"]) == (400, "BadRequest")
    wrong_ns = lease_body("named")
    wrong_ns["metadata"]["namespace"] = "default"
    status, body = raw(k8s_api_client, "PUT", path, wrong_ns)
    assert (status, body["reason"]) == (400, "BadRequest")


def test_update_with_another_uid_conflicts(
    coord: client.CoordinationV1Api, k8s_namespace: str
) -> None:
    coord.create_namespaced_lease(k8s_namespace, lease_body("uid"))
    body = lease_body("uid")
    body["metadata"]["uid"] = str(uuid.uuid4())
    with pytest.raises(client.ApiException) as info:
        coord.replace_namespaced_lease("uid", k8s_namespace, body)
    assert "Precondition failed: UID" in status_of(info.value)["message"]


def test_unknown_lease_fields_are_dropped(
    k8s_api_client: client.ApiClient, k8s_namespace: str
) -> None:
    body = lease_body("extra", bogus=1)
    body["status"] = {"x": 1}
    path = f"/apis/coordination.k8s.io/v1/namespaces/{k8s_namespace}/leases"
    status, stored = raw(k8s_api_client, "POST", path, body)
    assert status == 201
    assert "status" not in stored and "bogus" not in stored["spec"]


def test_server_dry_run_writes_nothing(coord: client.CoordinationV1Api, k8s_namespace: str) -> None:
    dry = coord.create_namespaced_lease(k8s_namespace, lease_body("dry"), dry_run="All")
    assert dry.metadata.name == "dry" and dry.metadata.uid
    assert coord.list_namespaced_lease(k8s_namespace).items == []
    coord.create_namespaced_lease(k8s_namespace, lease_body("dry"))
    coord.delete_namespaced_lease("dry", k8s_namespace, dry_run="All")
    patched = coord.patch_namespaced_lease(
        "dry", k8s_namespace, {"spec": {"holderIdentity": "q"}}, dry_run="All", _content_type=MERGE
    )
    assert patched.spec.holder_identity == "q"
    assert coord.read_namespaced_lease("dry", k8s_namespace).spec.holder_identity == "a"


@pytest.mark.not_on_control_plane("no kube-controller-manager: namespaces are not finalized")
def test_namespace_deletion_removes_its_objects(
    k8s_api_client: client.ApiClient, coord: client.CoordinationV1Api
) -> None:
    core = client.CoreV1Api(k8s_api_client)
    name = f"k8slease-gone-{uuid.uuid4().hex[:6]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    coord.create_namespaced_lease(name, lease_body("inside"))
    rv = coord.list_namespaced_lease(name).metadata.resource_version
    deleted = core.delete_namespace(name, _preload_content=False)
    assert deleted.status == 200
    w = watch.Watch()
    for event in w.stream(
        coord.list_namespaced_lease, name, resource_version=rv, timeout_seconds=60
    ):
        if event["type"] == "DELETED":
            w.stop()
    with pytest.raises(client.ApiException) as info:
        coord.read_namespaced_lease("inside", name)
    assert info.value.status == 404


# --- lease validation -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "field"),
    [({"leaseDurationSeconds": 0}, "spec.leaseDurationSeconds"),
     ({"leaseTransitions": -1}, "spec.leaseTransitions")],
)  # fmt: skip
def test_lease_spec_validation(
    k8s_api_client: client.ApiClient, k8s_namespace: str, spec: dict[str, Any], field: str
) -> None:
    status, body = raw(
        k8s_api_client, "POST", f"/apis/coordination.k8s.io/v1/namespaces/{k8s_namespace}/leases",
        lease_body("bad", **spec),
    )  # fmt: skip
    assert (status, body["reason"]) == (422, "Invalid")
    assert body["details"]["kind"] == "Lease"
    assert [c["field"] for c in body["details"]["causes"]] == [field]


def test_lease_micro_time_formats(k8s_api_client: client.ApiClient, k8s_namespace: str) -> None:
    path = f"/apis/coordination.k8s.io/v1/namespaces/{k8s_namespace}/leases"
    status, body = raw(
        k8s_api_client, "POST", path,
        lease_body(
            "t1",
            renewTime="2026-11-30T05:32:13.123456Z",
            acquireTime="2026-11-30T07:32:13.000001+02:00",
        ),
    )  # fmt: skip
    assert status == 201
    assert body["spec"]["renewTime"] == "2026-11-30T05:32:13.123456Z"
    assert body["spec"]["acquireTime"] == "2026-11-30T05:32:13.000001Z"
    for garbage in ("yesterday", "2026-11-30T05:32:13Z", "2026-11-30T05:32:13.123456789Z"):
        status, body = raw(k8s_api_client, "POST", path, lease_body("t2", renewTime=garbage))
        assert (status, body["reason"]) == (400, "BadRequest"), garbage
        assert garbage in body["message"]


def test_client_datetimes_round_trip(coord: client.CoordinationV1Api, k8s_namespace: str) -> None:
    moment = datetime(2026, 11, 30, 5, 32, 13, 123456, tzinfo=UTC)
    body = lease_body("dt")
    body["spec"]["renewTime"] = moment
    lease = coord.create_namespaced_lease(k8s_namespace, client.V1Lease.from_dict(body))
    assert lease.spec.renew_time == moment


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


# --- custom resources -----------------------------------------------------------------------


def test_custom_resource_generation_and_status_subresource(
    widgets: tuple[client.CustomObjectsApi, str], k8s_namespace: str
) -> None:
    api, group = widgets
    args = (group, "v1", k8s_namespace, "widgets")
    created = api.create_namespaced_custom_object(
        *args, {**widget("g", group), "status": {"phase": "Set"}}
    )
    assert created["metadata"]["generation"] == 1
    assert "status" not in created  # status is ignored on the main resource
    obj = api.get_namespaced_custom_object(*args, "g")
    obj["spec"]["size"] = 4
    obj["status"] = {"phase": "Ignored"}
    updated = api.replace_namespaced_custom_object(*args, "g", obj)
    assert updated["metadata"]["generation"] == 2 and "status" not in updated
    with_status = api.patch_namespaced_custom_object_status(
        *args, "g", {"status": {"phase": "Ready"}, "spec": {"size": 9}}, _content_type=MERGE
    )
    assert with_status["status"] == {"phase": "Ready"}
    assert with_status["spec"]["size"] == 4 and with_status["metadata"]["generation"] == 2
    labelled = api.patch_namespaced_custom_object(
        *args,
        "g",
        {"metadata": {"labels": {"l": "1"}}, "status": {"phase": "No"}},
        _content_type=MERGE,
    )
    assert labelled["metadata"]["generation"] == 2 and labelled["status"] == {"phase": "Ready"}
    replaced = api.replace_namespaced_custom_object_status(
        *args, "g", {**labelled, "status": {"phase": "Done"}}
    )
    assert replaced["status"] == {"phase": "Done"}


def test_finalizers_hold_deletion_until_removed(
    widgets: tuple[client.CustomObjectsApi, str], k8s_namespace: str
) -> None:
    api, group = widgets
    args = (group, "v1", k8s_namespace, "widgets")
    body = widget("fin", group)
    body["metadata"]["finalizers"] = ["example.com/hold"]
    api.create_namespaced_custom_object(*args, body)
    api.delete_namespaced_custom_object(*args, "fin")
    held = api.get_namespaced_custom_object(*args, "fin")
    assert held["metadata"]["deletionTimestamp"]
    rv = held["metadata"]["resourceVersion"]
    api.patch_namespaced_custom_object(
        *args, "fin", {"metadata": {"finalizers": None}}, _content_type=MERGE
    )
    w = watch.Watch()
    for event in w.stream(
        api.list_namespaced_custom_object, *args, resource_version=rv, timeout_seconds=10
    ):
        assert event["type"] == "DELETED"
        w.stop()
    with pytest.raises(client.ApiException) as info:
        api.get_namespaced_custom_object(*args, "fin")
    assert info.value.status == 404


def test_custom_resource_strategic_merge_is_unsupported(
    widgets: tuple[client.CustomObjectsApi, str], k8s_namespace: str
) -> None:
    api, group = widgets
    api.create_namespaced_custom_object(group, "v1", k8s_namespace, "widgets", widget("s", group))
    with pytest.raises(client.ApiException) as info:
        api.patch_namespaced_custom_object(
            group,
            "v1",
            k8s_namespace,
            "widgets",
            "s",
            {"spec": {"size": 2}},
            _content_type=STRATEGIC,
        )
    assert (info.value.status, status_of(info.value)["reason"]) == (415, "UnsupportedMediaType")


@pytest.mark.parametrize(
    ("spec", "field", "reason"),
    [
        ({"size": None}, "spec.size", "FieldValueRequired"),
        ({"size": "big"}, "spec.size", "FieldValueTypeInvalid"),
        ({"size": 0}, "spec.size", "FieldValueInvalid"),
        ({"size": 11}, "spec.size", "FieldValueInvalid"),
        ({"color": "green"}, "spec.color", "FieldValueNotSupported"),
        ({"code": "ABC"}, "spec.code", "FieldValueInvalid"),
    ],
)
def test_custom_resource_schema_validation(
    widgets: tuple[client.CustomObjectsApi, str],
    k8s_namespace: str,
    spec: dict[str, Any],
    field: str,
    reason: str,
) -> None:
    api, group = widgets
    body = widget("bad", group, **spec)
    body["spec"] = {k: v for k, v in body["spec"].items() if v is not None}
    with pytest.raises(client.ApiException) as info:
        api.create_namespaced_custom_object(group, "v1", k8s_namespace, "widgets", body)
    status = status_of(info.value)
    assert (info.value.status, status["reason"]) == (422, "Invalid")
    assert status["details"]["kind"] == "Widget" and status["details"]["group"] == group
    assert [(c["field"], c["reason"]) for c in status["details"]["causes"]] == [(field, reason)]


def test_strict_field_validation_rejects_unknown_fields(
    widgets: tuple[client.CustomObjectsApi, str], k8s_namespace: str
) -> None:
    api, group = widgets
    with pytest.raises(client.ApiException) as info:
        api.create_namespaced_custom_object(
            group, "v1", k8s_namespace, "widgets", widget("strict", group, sise=3),
            field_validation="Strict",
        )  # fmt: skip
    body = status_of(info.value)
    assert (info.value.status, body["reason"]) == (400, "BadRequest")
    assert "spec.sise" in body["message"]


def test_custom_resource_unknown_fields_are_pruned(
    widgets: tuple[client.CustomObjectsApi, str], k8s_namespace: str
) -> None:
    api, group = widgets
    created = api.create_namespaced_custom_object(
        group, "v1", k8s_namespace, "widgets", widget("pr", group, unknown="x")
    )
    assert created["spec"] == {"size": 3}


def test_custom_resource_table_uses_printer_columns(
    k8s_api_client: client.ApiClient,
    widgets: tuple[client.CustomObjectsApi, str],
    k8s_namespace: str,
) -> None:
    api, group = widgets
    args = (group, "v1", k8s_namespace, "widgets")
    api.create_namespaced_custom_object(*args, widget("tbl", group, color="red"))
    api.patch_namespaced_custom_object_status(
        *args,
        "tbl",
        {"status": {"phase": "Ready", "seen": "2020-01-01T00:00:00Z"}},
        _content_type=MERGE,
    )
    status, doc = raw(
        k8s_api_client, "GET", f"/apis/{group}/v1/namespaces/{k8s_namespace}/widgets",
        headers={"Accept": TABLE},
    )  # fmt: skip
    assert status == 200 and doc["kind"] == "Table"
    assert [c["name"] for c in doc["columnDefinitions"]] == [
        "Name",
        "Size",
        "Color",
        "Phase",
        "Seen",
    ]
    (row,) = doc["rows"]
    assert row["cells"][:4] == ["tbl", 3, "red", "Ready"]
    assert row["cells"][4].endswith(("y", "d"))  # an age, years ago
    assert row["object"]["metadata"]["name"] == "tbl"


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


# --- events ---------------------------------------------------------------------------------


def test_core_and_events_k8s_io_events(
    k8s_api_client: client.ApiClient, k8s_namespace: str
) -> None:
    core = client.CoreV1Api(k8s_api_client)
    involved = client.V1ObjectReference(kind="Lease", name="x", namespace=k8s_namespace)
    created = core.create_namespaced_event(
        k8s_namespace,
        client.CoreV1Event(
            metadata=client.V1ObjectMeta(generate_name="ev-"), involved_object=involved,
            reason="Elected", message="a won", type="Normal",
        ),
    )  # fmt: skip
    assert created.metadata.name.startswith("ev-")
    found = core.list_namespaced_event(k8s_namespace, field_selector="reason=Elected")
    assert [e.metadata.name for e in found.items] == [created.metadata.name]
    events = client.EventsV1Api(k8s_api_client)
    now = datetime.now(UTC)
    modern = events.create_namespaced_event(
        k8s_namespace,
        client.EventsV1Event(
            metadata=client.V1ObjectMeta(name="modern"), event_time=now, action="Elect",
            reason="Elected", note="b won", type="Normal", reporting_controller="k8slease.io/test",
            reporting_instance="test", regarding=involved,
        ),
    )  # fmt: skip
    assert modern.note == "b won"
    # One resource, two views: each API lists the events written through the other.
    legacy = {e.metadata.name: e for e in core.list_namespaced_event(k8s_namespace).items}
    assert legacy["modern"].message == "b won"
    assert legacy["modern"].involved_object.name == "x"
    assert legacy["modern"].reporting_component == "k8slease.io/test"
    # (raw: a legacy event's eventTime is null, which the client's model refuses)
    status, listed = raw(
        k8s_api_client, "GET", f"/apis/events.k8s.io/v1/namespaces/{k8s_namespace}/events"
    )
    assert status == 200
    viewed = {e["metadata"]["name"]: e for e in listed["items"]}
    assert viewed[created.metadata.name]["note"] == "a won"
    assert viewed[created.metadata.name]["regarding"]["kind"] == "Lease"

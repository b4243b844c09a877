"""Lease CRUD and its metadata, as kube-apiserver answers it: what the server sets on create
(uid, resourceVersion, generateName), 404 and 409 with their ``kind: Status``, updates and
patches (merge, JSON, strategic) with their resourceVersion and UID preconditions, a PUT that
creates, conditional deletes, server-side dry runs and a namespace's deletion.

(Part of the conformance tests: helpers in conformance.py, fixtures in conftest.py.)
"""

from __future__ import annotations

import uuid

import pytest
from kubernetes import client, watch

from tests.integration.testing.conformance import lease_body, status_of
from tests.support.bodies import JSON_PATCH, MERGE, STRATEGIC

pytestmark = pytest.mark.conformance


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


def test_update_with_another_uid_conflicts(
    coord: client.CoordinationV1Api, k8s_namespace: str
) -> None:
    coord.create_namespaced_lease(k8s_namespace, lease_body("uid"))
    body = lease_body("uid")
    body["metadata"]["uid"] = str(uuid.uuid4())
    with pytest.raises(client.ApiException) as info:
        coord.replace_namespaced_lease("uid", k8s_namespace, body)
    assert "Precondition failed: UID" in status_of(info.value)["message"]


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

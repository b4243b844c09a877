"""Custom resources, as kube-apiserver serves them (a Widget CRD per test): generation and the
status subresource, finalizers holding a deletion, strategic merge refused (415), schema
validation (422 with its causes), strict field validation, pruning of unknown fields and the
CRD's printer columns in a Table.

(Part of the conformance tests: helpers in conformance.py, fixtures in conftest.py.)
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client, watch

from tests.integration.testing.conformance import TABLE, raw, status_of, widget
from tests.support.bodies import MERGE, STRATEGIC

pytestmark = pytest.mark.conformance


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


def test_an_object_larger_than_etcd_stores_is_refused_and_kept_as_it_was(
    widgets: tuple[client.CustomObjectsApi, str], k8s_namespace: str
) -> None:
    """etcd stores no object above its ``--max-request-bytes`` (1.5 MiB by default): a write that
    would make one gets etcd's error, a 500 (the API server takes write bodies up to 3 MiB), and
    the object stays as it was."""
    api, group = widgets
    args = (group, "v1", k8s_namespace, "widgets")
    api.create_namespaced_custom_object(*args, widget("big", group))
    stored = api.patch_namespaced_custom_object_status(
        *args, "big", {"status": {"phase": "a" * 1_200_000}}, _content_type=MERGE
    )
    assert len(stored["status"]["phase"]) == 1_200_000
    with pytest.raises(client.ApiException) as refused:
        api.patch_namespaced_custom_object_status(
            *args, "big", {"status": {"phase": "b" * 1_700_000}}, _content_type=MERGE
        )
    assert refused.value.status == 500
    assert "request is too large" in status_of(refused.value)["message"]
    kept = api.get_namespaced_custom_object(*args, "big")
    assert kept["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]


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

"""API discovery, as kube-apiserver serves it: the version, the core and group resource lists
(namespaced or not, verbs, subresources), and a new CRD discoverable and served at once.

(Part of the conformance tests: helpers in conformance.py, fixtures in conftest.py.)
"""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.integration.testing.conformance import raw, widget

pytestmark = pytest.mark.conformance


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

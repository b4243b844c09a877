"""The chart and the plain manifests install into a real kube-apiserver: every object is created
(not dry-run) with strict field validation and no warning, and the CRD is accepted as a
structural schema (Established and NamesAccepted, no NonStructuralSchema condition).

There is no controller-manager: Deployments are stored but start no pods, which is all this
checks. The module runs on a control plane of its own, as it deletes and creates the CRD.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from typing import Any

import kubernetes.client
import kubernetes.watch
import pytest

from charts import render_manifests as rm
from k8slease.testing import ControlPlane
from k8slease.testing.pytest_plugin import wait_established
from tests.support.rest import Rest

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
MANIFEST_FILES = sorted(rm.manifest_files())

#: Values the chart is installed with, beside the plain manifests' own.
VALUE_SETS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "cluster-wide": {"operator": {"clusterWide": True}, "exampleApp": {"enabled": True}},
    "multi-namespace": {
        "operator": {"watchNamespaces": ["{ns}-a", "{ns}-b"]},
        "elector": {
            "bindings": [
                {"serviceAccount": "billing"},
                {"serviceAccount": "reports", "namespace": "{ns}-a"},
            ]
        },
        "exampleApp": {"enabled": True},
    },
}


@pytest.fixture(scope="module")
def plane(k8s_real_apiserver: Any) -> Iterator[ControlPlane]:
    """A control plane of this module's own (the session's one only decides whether the real
    tier runs): these tests delete and create the chart's CRD, which the operator tests on the
    session's server rely on."""
    with ControlPlane() as own:
        yield own


@pytest.fixture(scope="module")
def rest(plane: ControlPlane) -> Iterator[Rest]:
    client = plane.api_client()
    try:
        yield Rest(client)
    finally:
        client.close()


def _delete_crd_and_wait(rest: Rest, name: str) -> None:
    """Delete the CRD ``name`` if it exists, and return once the server has removed it."""
    answer = rest.request("GET", f"{CRD_PATH}/{name}")
    if answer.status == 404:
        return
    version = answer.body["metadata"]["resourceVersion"]
    deleted = rest.request("DELETE", f"{CRD_PATH}/{name}")
    assert deleted.status in (200, 202, 404), deleted
    ext: Any = kubernetes.client.ApiextensionsV1Api(rest.api_client)
    w: Any = kubernetes.watch.Watch()  # type: ignore[no-untyped-call]
    for event in w.stream(
        ext.list_custom_resource_definition,
        field_selector=f"metadata.name={name}",
        resource_version=version,
        timeout_seconds=60,
    ):
        if event["type"] == "DELETED":
            w.stop()
            return
    raise AssertionError(f"CRD {name} still there 60 s after its deletion")


@pytest.fixture(scope="module")
def fresh_crd_name(rest: Rest) -> Iterator[str]:
    """The chart's CRD name, with no such CRD on the server before the test and after it."""
    (crd,) = rm.crd_objects()
    name: str = crd["metadata"]["name"]
    _delete_crd_and_wait(rest, name)
    yield name
    _delete_crd_and_wait(rest, name)


def _create_strictly(rest: Rest, obj: dict[str, Any]) -> dict[str, Any]:
    answer = rest.create(obj, fieldValidation="Strict")
    where = f"{obj['kind']}/{obj['metadata']['name']}"
    assert answer.status == 201, (where, answer.body)
    assert not answer.warnings, (where, answer.warnings)
    created: dict[str, Any] = answer.body
    return created


def _conditions(crd: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (crd.get("status") or {}).get("conditions", [])}


def test_plain_manifests_install_every_object(rest: Rest, fresh_crd_name: str) -> None:
    """``kubectl create -f manifests/`` in file order, object by object; the CRD is structural."""
    created: list[str] = []
    for filename in MANIFEST_FILES:
        for obj in rm.load_documents((rm.MANIFESTS_DIR / filename).read_text()):
            if obj["kind"] == "CustomResourceDefinition":
                _create_strictly(rest, obj)
                wait_established(rest.api_client, fresh_crd_name)
                rest.forget(obj["spec"]["group"] + "/" + obj["spec"]["versions"][0]["name"])
                crd = rest.request("GET", f"{CRD_PATH}/{fresh_crd_name}").body
                conditions = _conditions(crd)
                assert conditions.get("Established") == "True", crd["status"]
                assert conditions.get("NamesAccepted") == "True", crd["status"]
                assert "NonStructuralSchema" not in conditions, crd["status"]
            else:
                _create_strictly(rest, obj)
            read = rest.request("GET", rest.path(obj, name=True))
            assert read.status == 200, read.body
            created.append(obj["kind"])
    assert set(created) >= {
        "Namespace",
        "CustomResourceDefinition",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "Deployment",
        "ScheduledJobGroup",
    }


def test_example_scheduledjobgroups_install(rest: Rest, fresh_crd_name: str) -> None:
    namespace = f"examples-{uuid.uuid4().hex[:6]}"
    _create_strictly(rest, rm.namespace_object() | {"metadata": {"name": namespace}})
    (crd,) = rm.crd_objects()
    if rest.request("GET", f"{CRD_PATH}/{fresh_crd_name}").status == 404:
        _create_strictly(rest, crd)
        wait_established(rest.api_client, fresh_crd_name)
    examples = rm.load_documents(
        (rm.MANIFESTS_DIR / "examples" / "scheduledjobgroups.yaml").read_text()
    )
    assert examples
    for obj in examples:
        obj["metadata"]["namespace"] = namespace
        created = _create_strictly(rest, obj)
        assert created["spec"].get("historyLimit"), "the CRD's defaults are applied"


def _substitute(values: Any, namespace: str) -> Any:
    if isinstance(values, dict):
        return {k: _substitute(v, namespace) for k, v in values.items()}
    if isinstance(values, list):
        return [_substitute(v, namespace) for v in values]
    return values.replace("{ns}", namespace) if isinstance(values, str) else values


@pytest.mark.parametrize("values_name", sorted(VALUE_SETS))
def test_chart_installs_every_rendered_object(
    rest: Rest, fresh_crd_name: str, values_name: str
) -> None:
    """``helm install`` of the chart, as Helm orders it: CRDs, then the templates by kind."""
    namespace = f"chart-{values_name}-{uuid.uuid4().hex[:6]}"
    values = _substitute(copy.deepcopy(VALUE_SETS[values_name]), namespace)
    values["fullnameOverride"] = f"it-{namespace}"
    objects = rm.render_objects(values, namespace=namespace)
    namespaces = {namespace} | {
        o["metadata"]["namespace"] for o in objects if o["metadata"].get("namespace")
    }
    for name in sorted(namespaces):
        _create_strictly(
            rest, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )
    if rest.request("GET", f"{CRD_PATH}/{fresh_crd_name}").status == 404:
        for crd in rm.crd_objects():
            _create_strictly(rest, crd)
        wait_established(rest.api_client, fresh_crd_name)
    objects.sort(
        key=lambda o: (
            rm.KIND_ORDER.index(o["kind"]) if o["kind"] in rm.KIND_ORDER else len(rm.KIND_ORDER)
        )
    )
    for obj in objects:
        stored = _create_strictly(rest, obj)
        read = rest.request("GET", rest.path(obj, name=True))
        assert read.status == 200, read.body
        for field in ("rules", "subjects", "roleRef"):
            assert read.body.get(field) == obj.get(field), (obj["kind"], field)
        assert stored["metadata"]["uid"] == read.body["metadata"]["uid"]

"""The chart's objects applied to an API server: the embedded one by default, or a real cluster
with ``--kubeconfig`` (``make e2e`` runs this module against its kind cluster too).

The CRD is accepted and served; RBAC objects are accepted; the example ScheduledJobGroups are
accepted (with the CRD's defaults applied) and broken ones are rejected by the CRD schema.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

from charts import render_manifests as rm
from k8slease.operator.crd import wait_established
from tests.support.rest import Rest

GROUP_VERSION = "k8slease.io/v1alpha1"
EXAMPLES_FILE = rm.MANIFESTS_DIR / "examples" / "scheduledjobgroups.yaml"


@pytest.fixture(scope="module")
def rest(k8s_apiserver: Any) -> Iterator[Rest]:
    client = k8s_apiserver.api_client()
    try:
        yield Rest(client)
    finally:
        client.close()


@pytest.fixture(scope="module")
def crd(rest: Rest) -> Iterator[dict[str, Any]]:
    """The chart's CRD on the server: created (and deleted afterwards) unless already there,
    as on a cluster where the chart is installed."""
    (manifest,) = rm.crd_objects()
    name = manifest["metadata"]["name"]
    path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    existing = rest.request("GET", f"{path}/{name}")
    created = False
    if existing.status == 404:
        existing = rest.request("POST", path, body=manifest)
        assert existing.status == 201, existing.body
        created = True
    assert existing.status == 200 or created, existing.body
    wait_established(rest.api_client, name)
    rest.forget(GROUP_VERSION)
    yield existing.body
    if created:
        rest.request("DELETE", f"{path}/{name}")


def _render(namespace: str, values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The manifests' objects for ``namespace``; no pods start (replicas 0), and cluster-scoped
    names are unique to the test (fullnameOverride)."""
    merged = copy.deepcopy(rm.manifest_values())
    merged.update(values or {})
    merged["fullnameOverride"] = f"it-{namespace}"
    merged.setdefault("operator", {})["replicas"] = 0
    merged.setdefault("exampleApp", {})["replicas"] = 0
    objects: list[dict[str, Any]] = rm.render_objects(merged, namespace=namespace)
    return objects


def _skip_unless_served(rest: Rest, k8s_apiserver: Any, objects: list[dict[str, Any]]) -> None:
    missing = sorted({f"{o['apiVersion']} {o['kind']}" for o in objects if not rest.served(o)})
    if missing and getattr(k8s_apiserver, "embedded", False):
        pytest.skip(f"the embedded API server does not serve {', '.join(missing)}")
    assert not missing, f"the cluster does not serve {missing}"


def _create_all(rest: Rest, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    created = []
    for obj in objects:
        answer = rest.create(obj, fieldValidation="Strict")
        assert answer.status == 201, (obj["kind"], obj["metadata"]["name"], answer.body)
        created.append(answer.body)
    return created


def test_crd_is_accepted_and_served(rest: Rest, crd: dict[str, Any]) -> None:
    resource = rest.resources(GROUP_VERSION).get("ScheduledJobGroup")
    assert resource is not None, "ScheduledJobGroup is not served after the CRD was applied"
    assert resource["name"] == "scheduledjobgroups"
    assert resource["namespaced"] is True
    assert "sjg" in resource.get("shortNames", [])
    # the real server answers the create before its controller sets conditions (null)
    found = (crd.get("status") or {}).get("conditions") or []
    conditions = {c["type"]: c["status"] for c in found}
    assert conditions.get("Established", "True") == "True"


@pytest.mark.parametrize("scope", ["namespaced", "cluster-wide"])
def test_rbac_objects_are_accepted(
    rest: Rest, k8s_apiserver: Any, k8s_namespace: str, scope: str
) -> None:
    values = {"operator": {"clusterWide": scope == "cluster-wide"}}
    kinds = {"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}
    objects = [o for o in _render(k8s_namespace, values) if o["kind"] in kinds]
    assert objects
    _skip_unless_served(rest, k8s_apiserver, objects)
    created = _create_all(rest, objects)
    try:
        for obj, stored in zip(objects, created, strict=True):
            answer = rest.request("GET", rest.path(obj, name=True))
            assert answer.status == 200, answer.body
            read = answer.body
            assert read.get("rules") == stored.get("rules") == obj.get("rules")
            assert read.get("subjects") == obj.get("subjects")
    finally:
        for obj in objects:
            if obj["kind"].startswith("Cluster"):
                rest.request("DELETE", rest.path(obj, name=True))


def test_service_accounts_and_deployments_are_accepted(
    rest: Rest, k8s_apiserver: Any, k8s_namespace: str, crd: dict[str, Any]
) -> None:
    kinds = {"ServiceAccount", "Deployment"}
    objects = [o for o in _render(k8s_namespace) if o["kind"] in kinds]
    assert {o["kind"] for o in objects} == kinds
    _skip_unless_served(rest, k8s_apiserver, objects)
    _create_all(rest, objects)


def test_rendered_and_example_scheduledjobgroups_are_accepted(
    rest: Rest, crd: dict[str, Any], k8s_namespace: str
) -> None:
    rendered = [o for o in _render(k8s_namespace) if o["kind"] == "ScheduledJobGroup"]
    examples = rm.load_documents(EXAMPLES_FILE.read_text())
    for obj in examples:
        obj["metadata"]["namespace"] = k8s_namespace
    examples = [e for e in examples if e["metadata"]["name"] != rendered[0]["metadata"]["name"]]
    created = _create_all(rest, rendered + examples)
    by_name = {o["metadata"]["name"]: o for o in created}
    # The CRD's defaults are applied by the server.
    assert by_name["reports"]["spec"].get("historyLimit") == 20
    assert by_name["billing"]["spec"]["jobs"][0]["name"] == "nightly-invoices"
    listed = rest.request(
        "GET", f"/apis/{GROUP_VERSION}/namespaces/{k8s_namespace}/scheduledjobgroups"
    )
    assert listed.status == 200
    assert {o["metadata"]["name"] for o in listed.body["items"]} == set(by_name)


def _bad(name: str, spec: dict[str, Any], namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "ScheduledJobGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


BAD_SPECS: dict[str, tuple[dict[str, Any], str]] = {
    "history-too-long": ({"historyLimit": 1000}, "spec.historyLimit"),
    "history-not-a-number": ({"historyLimit": "twenty"}, "spec.historyLimit"),
    "job-without-schedule": ({"jobs": [{"name": "nightly"}]}, "spec.jobs[0].schedule"),
    "four-field-cron": ({"jobs": [{"name": "n", "schedule": "0 2 * *"}]}, "spec.jobs[0].schedule"),
    "negative-grace": (
        {"jobs": [{"name": "n", "schedule": "0 2 * * *", "graceSeconds": -5}]},
        "spec.jobs[0].graceSeconds",
    ),
    "bad-lease-name": ({"leaseName": "Not_A_Name"}, "spec.leaseName"),
}


@pytest.mark.parametrize("case", sorted(BAD_SPECS))
def test_bad_scheduledjobgroup_is_rejected_by_the_schema(
    rest: Rest, crd: dict[str, Any], k8s_namespace: str, case: str
) -> None:
    spec, field = BAD_SPECS[case]
    answer = rest.create(_bad(case, spec, k8s_namespace))
    assert answer.status == 422, answer.body
    assert answer.body.get("reason") == "Invalid"
    assert field in json.dumps(answer.body), answer.body
    stored = rest.request(
        "GET", f"/apis/{GROUP_VERSION}/namespaces/{k8s_namespace}/scheduledjobgroups/{case}"
    )
    assert stored.status == 404, "a rejected object must not be stored"


def test_missing_spec_is_rejected(rest: Rest, crd: dict[str, Any], k8s_namespace: str) -> None:
    obj = _bad("no-spec", {}, k8s_namespace)
    del obj["spec"]
    answer = rest.create(obj)
    assert answer.status == 422, answer.body
    assert "spec" in json.dumps(answer.body)


def test_unknown_field_is_pruned_by_default(
    rest: Rest, crd: dict[str, Any], k8s_namespace: str
) -> None:
    answer = rest.create(_bad("pruned", {"historyLimt": 5}, k8s_namespace))
    assert answer.status == 201, answer.body
    assert answer.body["spec"] == {"historyLimit": 20}, (
        "unknown fields are dropped, defaults applied"
    )


def test_unknown_field_is_rejected_with_strict_field_validation(
    rest: Rest, k8s_apiserver: Any, crd: dict[str, Any], k8s_namespace: str
) -> None:
    """What `kubectl apply` does (it asks for Strict): a misspelt field fails, not vanishes."""
    answer = rest.create(_bad("typo", {"historyLimt": 5}, k8s_namespace), fieldValidation="Strict")
    assert answer.status in (400, 422), answer.body
    assert "historyLimt" in json.dumps(answer.body)

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

GROUP_VERSION = "k8slease.io/v1alpha1"
EXAMPLES_FILE = rm.MANIFESTS_DIR / "examples" / "scheduledjobgroups.yaml"


class Rest:
    """Raw JSON requests through a ``kubernetes.client.ApiClient`` (auth and TLS included)."""

    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client
        self._resources: dict[str, dict[str, dict[str, Any]]] = {}

    def request(
        self, method: str, path: str, body: Any = None, query: dict[str, str] | None = None
    ) -> tuple[int, dict[str, Any]]:
        params = self.api_client.param_serialize(
            method=method,
            resource_path=path,
            query_params=list((query or {}).items()),
            header_params={"Content-Type": "application/json", "Accept": "application/json"},
            body=body,
            auth_settings=["BearerToken"],
        )
        response = self.api_client.call_api(*params, _request_timeout=30)
        response.read()
        data = json.loads(response.data) if response.data else {}
        return int(response.status), data

    def resources(self, api_version: str) -> dict[str, dict[str, Any]]:
        """kind -> APIResource of ``api_version``, from discovery; empty when not served."""
        if api_version not in self._resources:
            path = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
            status, body = self.request("GET", path)
            found = body.get("resources", []) if status == 200 else []
            self._resources[api_version] = {r["kind"]: r for r in found if "/" not in r["name"]}
        return self._resources[api_version]

    def forget(self, api_version: str) -> None:
        self._resources.pop(api_version, None)

    def path(self, obj: dict[str, Any], *, name: bool = False) -> str:
        """The collection (or, with ``name``, the object) path of ``obj``."""
        api_version, kind = obj["apiVersion"], obj["kind"]
        resource = self.resources(api_version)[kind]
        prefix = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        namespace = obj["metadata"].get("namespace")
        if resource["namespaced"]:
            prefix += f"/namespaces/{namespace}"
        path = f"{prefix}/{resource['name']}"
        return f"{path}/{obj['metadata']['name']}" if name else path

    def served(self, obj: dict[str, Any]) -> bool:
        return obj["kind"] in self.resources(obj["apiVersion"])

    def create(self, obj: dict[str, Any], **query: str) -> tuple[int, dict[str, Any]]:
        return self.request("POST", self.path(obj), body=obj, query=query)


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
    status, existing = rest.request("GET", f"{path}/{name}")
    created = False
    if status == 404:
        status, existing = rest.request("POST", path, body=manifest)
        assert status == 201, existing
        created = True
    assert status == 200 or created, existing
    wait_established(rest.api_client, name)
    rest.forget(GROUP_VERSION)
    yield existing
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
        status, body = rest.create(obj, fieldValidation="Strict")
        assert status == 201, (obj["kind"], obj["metadata"]["name"], body)
        created.append(body)
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
            status, read = rest.request("GET", rest.path(obj, name=True))
            assert status == 200, read
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
    status, listed = rest.request(
        "GET", f"/apis/{GROUP_VERSION}/namespaces/{k8s_namespace}/scheduledjobgroups"
    )
    assert status == 200
    assert {o["metadata"]["name"] for o in listed["items"]} == set(by_name)


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
    status, body = rest.create(_bad(case, spec, k8s_namespace))
    assert status == 422, body
    assert body.get("reason") == "Invalid"
    assert field in json.dumps(body), body
    status, _ = rest.request(
        "GET", f"/apis/{GROUP_VERSION}/namespaces/{k8s_namespace}/scheduledjobgroups/{case}"
    )
    assert status == 404, "a rejected object must not be stored"


def test_missing_spec_is_rejected(rest: Rest, crd: dict[str, Any], k8s_namespace: str) -> None:
    obj = _bad("no-spec", {}, k8s_namespace)
    del obj["spec"]
    status, body = rest.create(obj)
    assert status == 422, body
    assert "spec" in json.dumps(body)


def test_unknown_field_is_pruned_by_default(
    rest: Rest, crd: dict[str, Any], k8s_namespace: str
) -> None:
    status, body = rest.create(_bad("pruned", {"historyLimt": 5}, k8s_namespace))
    assert status == 201, body
    assert body["spec"] == {"historyLimit": 20}, "unknown fields are dropped, defaults applied"


def test_unknown_field_is_rejected_with_strict_field_validation(
    rest: Rest, k8s_apiserver: Any, crd: dict[str, Any], k8s_namespace: str
) -> None:
    """What `kubectl apply` does (it asks for Strict): a misspelt field fails, not vanishes."""
    status, body = rest.create(
        _bad("typo", {"historyLimt": 5}, k8s_namespace), fieldValidation="Strict"
    )
    assert status in (400, 422), body
    assert "historyLimt" in json.dumps(body)

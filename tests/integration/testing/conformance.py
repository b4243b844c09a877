"""Helpers of the Kubernetes API conformance tests (the ``test_conformance_*.py`` modules here):
a raw request through the official client, the ``kind: Status`` of an error, and the Lease and
Widget bodies they send. The fixtures ``coord`` and ``widgets`` are in this directory's
conftest.py.

Every conformance test talks to ``k8s_apiserver`` through ``kubernetes.client`` and asserts what
a real kube-apiserver does, so the modules pass unchanged against a real cluster
(``pytest -m conformance --kubeconfig ~/.kube/kind-config tests/integration/testing``). Nothing
there peeks at the embedded server's internals; those tests live in test_apiserver_embedded.py.
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client

from tests.support import bodies
from tests.support.bodies import TABLE as TABLE_ONLY

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


def widget(name: str, group: str, **spec: Any) -> dict[str, Any]:
    """A Widget body; custom resources must name their apiVersion and kind (400 otherwise)."""
    return {
        "apiVersion": f"{group}/v1",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"size": 3, **spec},
    }

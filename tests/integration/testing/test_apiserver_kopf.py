"""kopf runs an operator against each API server: discovery, list+watch, merge patches
of the object and of ``/status``, finalizers on deletion, and core Events."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import kopf
import pytest
from kopf.testing import KopfRunner
from kubernetes import client, watch

from k8slease.operator.crd import wait_established
from k8slease.testing import APIServer
from k8slease.testing.controlplane import audit
from tests.support.bodies import crd_body

GROUP = "kopf.k8slease.io"


def gadget_crd() -> dict[str, Any]:
    return crd_body(
        GROUP,
        "Gadget",
        spec={"type": "object", "properties": {"size": {"type": "integer"}}},
        status={"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    )


def until(
    condition: Callable[[dict[str, Any]], bool], func: Any, *args: Any, **kwargs: Any
) -> bool:
    """Watch ``func`` until an event satisfies ``condition`` (False after 20 s)."""
    w = watch.Watch()
    for event in w.stream(func, *args, timeout_seconds=20, **kwargs):
        if condition(event):
            w.stop()
            return True
    return False


def build_operator(server: APIServer) -> kopf.OperatorRegistry:
    """A tiny operator: on create it reports the size in status; on delete it says goodbye."""
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        info: kopf.ConnectionInfo | None = kopf.login_with_kubeconfig(**kwargs)  # $KUBECONFIG
        return info

    @kopf.on.create(GROUP, "v1", "gadgets", registry=registry)
    def created(spec: Any, body: Any, patch: Any, **_: Any) -> None:
        patch.status["observedSize"] = spec["size"]
        kopf.info(body, reason="Seen", message="gadget seen")

    @kopf.on.delete(GROUP, "v1", "gadgets", registry=registry)
    def deleted(**_: Any) -> None:
        return None

    return registry


@pytest.fixture
def kopf_default_registry() -> Iterator[None]:
    """Put kopf's default registry back afterwards. kopf's ``run`` command, which
    ``KopfRunner`` runs in this process, makes the runner's registry the default: without this,
    the handlers that modules register at import (``k8slease.operator.handlers``) vanish from
    it for every test that runs later in the same process."""
    previous = kopf.get_default_registry()
    yield
    kopf.set_default_registry(previous)


@pytest.mark.usefixtures("kopf_default_registry")
def test_kopf_operator_runs_against_the_server(
    k8s_fresh_apiserver: APIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = k8s_fresh_apiserver
    monkeypatch.setenv("KUBECONFIG", str(server.kubeconfig))  # TLS and credentials, as users do
    settings = kopf.OperatorSettings()
    settings.peering.standalone = True
    settings.watching.server_timeout = 10
    with server.api_client() as api_client:
        client.ApiextensionsV1Api(api_client).create_custom_resource_definition(gadget_crd())
        wait_established(api_client, f"gadgets.{GROUP}")
        objects = client.CustomObjectsApi(api_client)
        core = client.CoreV1Api(api_client)
        args = (GROUP, "v1", "default", "gadgets")
        runner = KopfRunner(
            ["run", "--standalone", "--namespace=default"],
            registry=build_operator(server), settings=settings, timeout=30,
        )  # fmt: skip
        with runner:
            objects.create_namespaced_custom_object(
                *args,
                {
                    "apiVersion": f"{GROUP}/v1",
                    "kind": "Gadget",
                    "metadata": {"name": "g"},
                    "spec": {"size": 7},
                },
            )
            assert until(
                lambda e: (e["object"].get("status") or {}).get("observedSize") == 7,
                objects.list_namespaced_custom_object,
                *args,
            ), "kopf patched the status"
            finalizers = objects.get_namespaced_custom_object(*args, "g")["metadata"].get(
                "finalizers"
            )
            assert finalizers, "kopf put its finalizer on the object"
            assert until(
                lambda e: e["object"].message == "gadget seen",
                core.list_namespaced_event,
                "default",
                field_selector="involvedObject.name=g",
            ), "kopf posted an Event"
            rv = objects.list_namespaced_custom_object(*args)["metadata"]["resourceVersion"]
            objects.delete_namespaced_custom_object(*args, "g")
            assert until(
                lambda e: e["type"] == "DELETED",
                objects.list_namespaced_custom_object,
                *args,
                resource_version=rv,
            ), "kopf released its finalizer"
            with pytest.raises(client.ApiException) as info:
                objects.get_namespaced_custom_object(*args, "g")
            assert info.value.status == 404
    assert runner.exit_code == 0, runner.output
    assert runner.exception is None
    if server.embedded:
        assert server.stats.count("patch", f"gadgets.{GROUP}") >= 2
    else:
        assert audit.count(audit.events(server.audit_log), "patch", "gadgets") >= 2

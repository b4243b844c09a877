"""The ScheduledJobGroup CRD, read from its one definition.

``crd.yaml`` next to this module is a symlink to ``charts/k8slease/crds/scheduledjobgroups.yaml``
(the chart installs that file; the plain manifests are rendered from the chart). Tests, the demo
and the benchmark install the CRD through :func:`install_crd`.
"""

from __future__ import annotations

import math
from importlib import resources
from typing import Any

import yaml
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from k8slease.names import CRD_GROUP, CRD_PLURAL

CRD_NAME = f"{CRD_PLURAL}.{CRD_GROUP}"


def crd_text() -> str:
    """The CRD's YAML, as packaged (the chart's file)."""
    return resources.files("k8slease.operator").joinpath("crd.yaml").read_text(encoding="utf-8")


def crd_manifest() -> dict[str, Any]:
    """The CRD as a dict, loaded from the package (the chart's file)."""
    manifest: dict[str, Any] = yaml.safe_load(crd_text())
    return manifest


def install_crd(
    api_client: client.ApiClient, *, timeout: float = 30.0, upgrade: bool = False
) -> None:
    """Create the CRD unless it exists, and wait until it is Established.

    With ``upgrade``, an existing CRD is replaced by the packaged one (its resourceVersion kept,
    so a concurrent change makes the call fail instead of being overwritten).
    """
    api = client.ApiextensionsV1Api(api_client)
    manifest: Any = crd_manifest()
    try:
        api.create_custom_resource_definition(manifest)
    except ApiException as exc:
        if exc.status != 409:
            raise
        if upgrade:
            current: Any = api.read_custom_resource_definition(CRD_NAME)
            manifest["metadata"]["resourceVersion"] = current.metadata.resource_version
            api.replace_custom_resource_definition(CRD_NAME, manifest)
    wait_established(api_client, CRD_NAME, timeout=timeout)


def wait_established(api_client: client.ApiClient, name: str, *, timeout: float = 30.0) -> None:
    """Block until the CRD ``name`` has ``Established=True``, watching (not polling) for it."""
    api = client.ApiextensionsV1Api(api_client)
    stream: Any = watch.Watch()  # type: ignore[no-untyped-call]
    for event in stream.stream(
        api.list_custom_resource_definition,
        field_selector=f"metadata.name={name}",
        timeout_seconds=max(1, math.ceil(timeout)),
    ):
        conditions = (event["raw_object"].get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
            stream.stop()
            return
    raise TimeoutError(f"CRD {name} not established within {timeout} s")

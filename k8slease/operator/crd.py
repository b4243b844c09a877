"""The ScheduledJobGroup CRD, read from its one definition.

``crd.yaml`` next to this module is a symlink to ``charts/k8slease/crds/scheduledjobgroups.yaml``
(the chart installs that file; the plain manifests are rendered from the chart). Tests, the demo
and the benchmark install the CRD through :func:`install_crd`.
"""

from __future__ import annotations

import time
from importlib import resources
from typing import Any

import yaml
from kubernetes import client
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
    deadline = time.monotonic() + timeout
    while True:
        crd = api.read_custom_resource_definition(CRD_NAME)
        conditions = (crd.status.conditions if crd.status else None) or []
        if any(c.type == "Established" and c.status == "True" for c in conditions):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"CRD {CRD_NAME} not established within {timeout} s")
        time.sleep(0.1)

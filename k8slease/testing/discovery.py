"""Discovery documents: ``/version``, ``/api``, ``/api/v1``, ``/apis``, ``/apis/<g>[/<v>]``.

These are the legacy (unaggregated) documents; kubectl asks for aggregated discovery first
and falls back to these when the answer is plain ``application/json``, as it does against
any server without aggregated discovery.
"""

from __future__ import annotations

from typing import Any

from .resources import ALL_VERBS, Registry, ResourceType

JSON = dict[str, Any]

KUBE_MINOR = "32"


def version() -> JSON:
    """``/version``."""
    return {
        "major": "1",
        "minor": KUBE_MINOR,
        "gitVersion": f"v1.{KUBE_MINOR}.0-k8slease",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.23.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


def api_versions(address: str) -> JSON:
    """``/api``: the core group's versions."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
    }


def _api_resources(rt: ResourceType) -> list[JSON]:
    main: JSON = {
        "name": rt.plural,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": list(ALL_VERBS),
    }
    if rt.short_names:
        main["shortNames"] = list(rt.short_names)
    if rt.categories:
        main["categories"] = list(rt.categories)
    found = [main]
    if rt.status_subresource:
        found.append(
            {
                "name": f"{rt.plural}/status",
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": ["get", "patch", "update"],
            }
        )
    return found


def resource_list(registry: Registry, group: str, version: str) -> JSON | None:
    """``/api/v1`` or ``/apis/<g>/<v>``: an APIResourceList (None if nothing is served)."""
    types = sorted(registry.in_group_version(group, version), key=lambda rt: rt.plural)
    if not types:
        return None
    resources = [entry for rt in types for entry in _api_resources(rt)]
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


def api_group(registry: Registry, group: str) -> JSON | None:
    """``/apis/<g>``: an APIGroup (None if the group is not served)."""
    versions = registry.group_versions().get(group)
    if not versions:
        return None
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": entries,
        "preferredVersion": entries[0],
    }


def api_group_list(registry: Registry) -> JSON:
    """``/apis``: every served group."""
    groups = []
    for group in sorted(registry.group_versions()):
        doc = api_group(registry, group)
        if doc is not None:
            doc.pop("kind")
            doc.pop("apiVersion")
            groups.append(doc)
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

"""The resource types the server serves: built-ins plus whatever created CRDs define.

A :class:`ResourceType` is one (group, version, plural). Versions of a CRD share one storage
key, as they share one etcd prefix on a real cluster.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .validation import SchemaValidator

JSON = dict[str, Any]

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
NAME_FIELDS = frozenset({"metadata.name", "metadata.namespace"})
EVENT_FIELDS = NAME_FIELDS | frozenset(
    {
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
        "regarding.kind",
        "regarding.name",
        "regarding.namespace",
    }
)


@dataclass
class ResourceType:
    """One served resource: its names, scope, subresources and (for CRs) schema."""

    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    status_subresource: bool = False
    custom: bool = False
    tracks_generation: bool = False
    allow_create_on_update: bool = False
    #: PUT without ``metadata.resourceVersion`` allowed (False: 422, as for Leases, CRDs, CRs).
    unconditional_update: bool = True
    schema: JSON | None = None
    printer_columns: list[JSON] = field(default_factory=list)
    field_selectors: frozenset[str] = NAME_FIELDS
    shared_storage: str | None = None

    @property
    def api_version(self) -> str:
        """``group/version``, or just ``version`` for the core group."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> str:
        """Storage key, shared by all versions of a resource (and by both Event APIs)."""
        return self.shared_storage or f"{self.group}/{self.plural}"

    @property
    def group_resource(self) -> str:
        """``plural.group`` (``plural`` in the core group), as in messages and stats."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def list_kind(self) -> str:
        """Kind of the list object, e.g. ``LeaseList``."""
        return f"{self.kind}List"

    @cached_property
    def validator(self) -> SchemaValidator:
        """Schema validator of a custom resource version (built once, on first use)."""
        return SchemaValidator(self.schema)


def builtin_types() -> list[ResourceType]:
    """The built-in resources k8slease uses."""
    return [
        ResourceType(
            "", "v1", "namespaces", "namespace", "Namespace", False, ("ns",),
            status_subresource=True,
        ),
        ResourceType(
            "", "v1", "events", "event", "Event", True, ("ev",),
            allow_create_on_update=True, field_selectors=EVENT_FIELDS,
        ),
        ResourceType(
            "events.k8s.io", "v1", "events", "event", "Event", True, ("ev",),
            allow_create_on_update=True, field_selectors=EVENT_FIELDS, shared_storage="/events",
        ),
        ResourceType(
            "coordination.k8s.io", "v1", "leases", "lease", "Lease", True,
            allow_create_on_update=True, unconditional_update=False,
        ),
        ResourceType(
            "apiextensions.k8s.io", "v1", "customresourcedefinitions",
            "customresourcedefinition", "CustomResourceDefinition", False, ("crd", "crds"),
            categories=("api-extensions",), status_subresource=True, tracks_generation=True,
            unconditional_update=False,
        ),
        # Stored as given (no validation, no controllers acting on them), so that a chart's
        # manifests can be applied whole.
        ResourceType(
            "", "v1", "serviceaccounts", "serviceaccount", "ServiceAccount", True, ("sa",)
        ),
        ResourceType("", "v1", "configmaps", "configmap", "ConfigMap", True, ("cm",)),
        # Pods as objects only (nothing runs them): the operator reads the journals in their
        # status (its status subresource is written as a kubelet would)
        ResourceType(
            "", "v1", "pods", "pod", "Pod", True, ("po",),
            categories=("all",), status_subresource=True,
        ),
        ResourceType(
            "apps", "v1", "deployments", "deployment", "Deployment", True, ("deploy",),
            categories=("all",), status_subresource=True, tracks_generation=True,
        ),
        ResourceType("rbac.authorization.k8s.io", "v1", "roles", "role", "Role", True),
        ResourceType(
            "rbac.authorization.k8s.io", "v1", "rolebindings", "rolebinding", "RoleBinding", True
        ),
        ResourceType(
            "rbac.authorization.k8s.io", "v1", "clusterroles", "clusterrole", "ClusterRole", False
        ),
        ResourceType(
            "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "clusterrolebinding",
            "ClusterRoleBinding", False,
        ),
    ]  # fmt: skip


def types_from_crd(crd: JSON) -> list[ResourceType]:
    """The served versions of a CRD as resource types."""
    spec = crd.get("spec", {})
    names = spec.get("names", {})
    found = []
    for version in spec.get("versions", []):
        if not version.get("served", True):
            continue
        subresources = version.get("subresources") or spec.get("subresources") or {}
        schema = (version.get("schema") or spec.get("validation") or {}).get("openAPIV3Schema")
        columns = version.get("additionalPrinterColumns") or spec.get(
            "additionalPrinterColumns", []
        )
        found.append(
            ResourceType(
                group=spec["group"],
                version=version["name"],
                plural=names["plural"],
                singular=names.get("singular") or names["kind"].lower(),
                kind=names["kind"],
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                short_names=tuple(names.get("shortNames", ())),
                categories=tuple(names.get("categories", ())),
                status_subresource="status" in subresources,
                custom=True,
                tracks_generation=True,
                unconditional_update=False,
                schema=schema,
                printer_columns=list(columns),
            )
        )
    return found


class Registry:
    """Resource types by (group, version, plural), updated as CRDs come and go."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._types: dict[tuple[str, str, str], ResourceType] = {}
        self._crd_types: dict[str, list[ResourceType]] = {}
        for rt in builtin_types():
            self._types[(rt.group, rt.version, rt.plural)] = rt

    def find(self, group: str, version: str, plural: str) -> ResourceType | None:
        """The type served at ``/apis/group/version/plural`` (or None)."""
        return self._types.get((group, version, plural))

    def all(self) -> list[ResourceType]:
        """Every served type."""
        with self._lock:
            return list(self._types.values())

    def group_versions(self) -> dict[str, list[str]]:
        """group -> served versions, preferred (first defined) first; core group excluded."""
        result: dict[str, list[str]] = {}
        for rt in self.all():
            if rt.group and rt.version not in result.setdefault(rt.group, []):
                result[rt.group].append(rt.version)
        return result

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        """Types served under one group/version."""
        return [rt for rt in self.all() if rt.group == group and rt.version == version]

    def set_crd(self, name: str, types: list[ResourceType]) -> None:
        """Serve (or re-serve, after an update) the versions a CRD defines."""
        with self._lock:
            for rt in self._crd_types.pop(name, []):
                self._types.pop((rt.group, rt.version, rt.plural), None)
            self._crd_types[name] = types
            for rt in types:
                self._types[(rt.group, rt.version, rt.plural)] = rt

    def crd_types(self, name: str) -> list[ResourceType]:
        """The types a CRD currently serves."""
        with self._lock:
            return list(self._crd_types.get(name, []))

    def remove_crd(self, name: str) -> list[ResourceType]:
        """Stop serving a deleted CRD; returns the types it had."""
        with self._lock:
            types = self._crd_types.pop(name, [])
            for rt in types:
                self._types.pop((rt.group, rt.version, rt.plural), None)
            return types

"""Request bodies and content types shared by the API-server tests: the conformance tests
(tests/integration/testing), the kopf test and the differential sequences
(tests/support/sequence_requests.py) build their Leases and CRDs here, so what one tier checks is
the object another tier sends."""

from __future__ import annotations

from typing import Any

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
#: A Table, as kubectl asks for one (no fallback: the server must answer a Table).
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def lease_body(name: str, labels: dict[str, str], **spec: Any) -> dict[str, Any]:
    """A coordination.k8s.io/v1 Lease held by ``a`` for 15 s, with ``spec`` on top."""
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "labels": labels},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, **spec},
    }


def crd_body(
    group: str,
    kind: str,
    *,
    spec: dict[str, Any],
    status: dict[str, Any],
    columns: list[dict[str, Any]] | None = None,
    short_names: list[str] | None = None,
    list_kind: bool = False,
) -> dict[str, Any]:
    """A namespaced CustomResourceDefinition ``<kind>s.<group>`` with one served and stored
    version ``v1``, a status subresource, and ``spec`` / ``status`` as the schemas of those two
    fields (``columns``: printer columns; ``list_kind``: ``<Kind>List`` declared)."""
    singular = kind.lower()
    names: dict[str, Any] = {"plural": f"{singular}s", "singular": singular, "kind": kind}
    if list_kind:
        names["listKind"] = f"{kind}List"
    if short_names:
        names["shortNames"] = short_names
    version: dict[str, Any] = {
        "name": "v1",
        "served": True,
        "storage": True,
        "subresources": {"status": {}},
    }
    if columns:
        version["additionalPrinterColumns"] = columns
    version["schema"] = {
        "openAPIV3Schema": {"type": "object", "properties": {"spec": spec, "status": status}}
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{singular}s.{group}"},
        "spec": {"group": group, "scope": "Namespaced", "names": names, "versions": [version]},
    }


def widget_crd(
    group: str, *, color_default: str | None = None, seen: bool = False, list_kind: bool = False
) -> dict[str, Any]:
    """The Widget CRD: ``spec.size`` (1..10, required), ``spec.color`` (red or blue, defaulted to
    ``color_default`` if given), ``spec.code`` (a pattern), ``status.phase``, printer columns
    Size, Color, Phase; with ``seen``, also a date-time ``status.seen`` and its column."""
    color: dict[str, Any] = {"type": "string", "enum": ["red", "blue"]}
    if color_default is not None:
        color["default"] = color_default
    status: dict[str, Any] = {"phase": {"type": "string"}}
    columns = [
        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
        {"name": "Color", "type": "string", "jsonPath": ".spec.color"},
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    ]
    if seen:
        status["seen"] = {"type": "string", "format": "date-time"}
        columns.append({"name": "Seen", "type": "date", "jsonPath": ".status.seen"})
    return crd_body(
        group,
        "Widget",
        spec={
            "type": "object",
            "required": ["size"],
            "properties": {
                "size": {"type": "integer", "minimum": 1, "maximum": 10},
                "color": color,
                "code": {"type": "string", "pattern": "^[a-z]+$"},
            },
        },
        status={"type": "object", "properties": status},
        columns=columns,
        short_names=["wdg"],
        list_kind=list_kind,
    )

"""Server-side ``Table`` responses (``Accept: application/json;as=Table``), used by kubectl get.

Built-in types get the columns the real server prints for them; custom resources get their
CRD's ``additionalPrinterColumns`` (or ``Age`` when there are none), converted cell by cell
as the apiextensions table convertor does.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from .resources import ResourceType

JSON = dict[str, Any]

NAME_COLUMN = {
    "name": "Name",
    "type": "string",
    "format": "name",
    "description": "Name must be unique within a namespace. Is required when creating resources, "
    "although some resources may allow a client to request the generation of an appropriate name "
    "automatically. Name is primarily intended for creation idempotence and configuration "
    "definition. Cannot be updated.",
    "priority": 0,
}


def _col(name: str, type_: str, description: str, priority: int = 0, fmt: str = "") -> JSON:
    return {
        "name": name,
        "type": type_,
        "format": fmt,
        "description": description,
        "priority": priority,
    }


_AGE_DESCRIPTION = (
    "CreationTimestamp is a timestamp representing the server time when this object was created."
)
#: A CRD's default Age column is a ``date`` (the client renders it); built-in printers render
#: the age themselves and declare a ``string``.
AGE = _col("Age", "date", _AGE_DESCRIPTION)
BUILTIN_AGE = _col("Age", "string", _AGE_DESCRIPTION)


def human_duration(seconds: float) -> str:
    """Go's ``duration.HumanDuration``: ``5s``, ``3m20s``, ``4h``, ``2d3h``, ``1y``."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def age(timestamp: Any, now: datetime | None = None) -> str:
    """Human-readable age of an RFC 3339 timestamp (``<unknown>`` if absent)."""
    if not timestamp:
        return "<unknown>"
    try:
        moment = datetime.fromisoformat(str(timestamp).replace("Z", "+00:00"))
    except ValueError:
        return "<invalid>"
    now = now or datetime.now(UTC)
    return human_duration((now - moment).total_seconds())


def json_path(obj: Any, path: str) -> Any:
    """Evaluate a simple JSONPath (``.a.b``, ``.a[0].b``, ``{.a}``) as printer columns use."""
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    value = obj
    for name, index in re.findall(r"\.([^.\[\]]+)|\[(\d+)\]", path):
        if name:
            value = value.get(name) if isinstance(value, dict) else None
        else:
            i = int(index)
            value = value[i] if isinstance(value, list) and i < len(value) else None
        if value is None:
            return None
    return value


def _cell(type_: str, value: Any) -> Any:
    if value is None:
        return None
    if type_ == "string":
        if isinstance(value, str):
            return value
        return (
            json.dumps(value, separators=(",", ":"))
            if isinstance(value, dict | list)
            else str(value).lower()
            if isinstance(value, bool)
            else str(value)
        )
    if type_ == "integer":
        return (
            int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
        )
    if type_ == "number":
        return value if isinstance(value, int | float) and not isinstance(value, bool) else None
    if type_ == "boolean":
        return value if isinstance(value, bool) else None
    if type_ == "date":
        return age(value) if isinstance(value, str) else None
    return None


def _event_object(obj: JSON) -> str:
    involved = obj.get("involvedObject") or obj.get("regarding") or {}
    return f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}"


def _event_last_seen(obj: JSON) -> str:
    stamp = (
        obj.get("lastTimestamp")
        or (obj.get("series") or {}).get("lastObservedTime")
        or obj.get("eventTime")
        or obj["metadata"].get("creationTimestamp")
    )
    return age(stamp)


def _event_first_seen(obj: JSON) -> str:
    stamp = (
        obj.get("firstTimestamp")
        or obj.get("eventTime")
        or obj["metadata"].get("creationTimestamp")
    )
    return age(stamp)


def _event_source(obj: JSON) -> str:
    source = obj.get("source") or {}
    component = source.get("component") or obj.get("reportingComponent") or ""
    instance = source.get("host") or obj.get("reportingInstance") or ""
    return f"{component}, {instance}" if instance else component


def _crd_versions(obj: JSON) -> str:
    versions = (obj.get("spec") or {}).get("versions") or []
    return ",".join(v.get("name", "") + ("(storage)" if v.get("storage") else "") for v in versions)


def _crd_established(obj: JSON) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def columns_for(rt: ResourceType) -> list[JSON]:
    """Column definitions for a resource's Table."""
    if rt.custom:
        if not rt.printer_columns:
            return [NAME_COLUMN, AGE]
        cols = [NAME_COLUMN]
        for pc in rt.printer_columns:
            desc = pc.get("description") or (
                f"Custom resource definition column (in JSONPath format): {pc.get('jsonPath', '')}"
            )
            cols.append(
                _col(
                    pc["name"],
                    pc.get("type", "string"),
                    desc,
                    pc.get("priority", 0),
                    pc.get("format", ""),
                )
            )
        return cols
    if rt.plural == "leases":
        return [NAME_COLUMN, _col("Holder", "string", "The holder of the lease"), BUILTIN_AGE]
    if rt.plural == "namespaces":
        return [NAME_COLUMN, _col("Status", "string", "The status of the namespace"), BUILTIN_AGE]
    if rt.plural == "events":
        return [
            _col("Last Seen", "string", "Time since the most recent occurrence"),
            _col("Type", "string", "Type of this event (Normal, Warning)"),
            _col("Reason", "string", "Short, machine understandable string"),
            _col("Object", "string", "The object this Event is about"),
            _col("Subobject", "string", "The part of the object this Event is about", 1),
            _col("Source", "string", "The component and host that reported the Event", 1),
            _col(
                "Message", "string", "A human-readable description of the status of this operation."
            ),
            _col("First Seen", "string", "Time since the first occurrence", 1),
            _col("Count", "string", "How many times this Event occurred", 1),
            {**NAME_COLUMN, "priority": 1},
        ]
    if rt.plural == "customresourcedefinitions":
        return [
            NAME_COLUMN,
            _col("Scope", "string", "Namespaced or Cluster"),
            _col("Versions", "string", "The versions served, the storage version marked"),
            _col("Created At", "date", "Time when this object was created"),
            _col("Group", "string", "The API group", 1),
            _col("Kind", "string", "The kind", 1),
            _col("ShortNames", "string", "The short names", 1),
            _col("Established", "boolean", "Whether the CRD is served", 1),
        ]
    return [NAME_COLUMN, _col("Created At", "date", "Time when this object was created")]


def cells_for(rt: ResourceType, obj: JSON) -> list[Any]:
    """One row's cells, matching :func:`columns_for`."""
    meta = obj.get("metadata", {})
    name = meta.get("name")
    if rt.custom:
        if not rt.printer_columns:
            return [name, age(meta.get("creationTimestamp"))]
        return [name] + [
            _cell(pc.get("type", "string"), json_path(obj, pc.get("jsonPath", "")))
            for pc in rt.printer_columns
        ]
    if rt.plural == "leases":
        return [
            name,
            (obj.get("spec") or {}).get("holderIdentity", ""),
            age(meta.get("creationTimestamp")),
        ]
    if rt.plural == "namespaces":
        return [
            name,
            (obj.get("status") or {}).get("phase", ""),
            age(meta.get("creationTimestamp")),
        ]
    if rt.plural == "events":
        return [
            _event_last_seen(obj),
            obj.get("type", ""),
            obj.get("reason", ""),
            _event_object(obj),
            (obj.get("involvedObject") or obj.get("regarding") or {}).get("fieldPath", ""),
            _event_source(obj),
            obj.get("message") or obj.get("note") or "",
            _event_first_seen(obj),
            obj.get("count") or 1,
            name,
        ]
    if rt.plural == "customresourcedefinitions":
        spec = obj.get("spec") or {}
        names = spec.get("names") or {}
        return [
            name,
            spec.get("scope", ""),
            _crd_versions(obj),
            meta.get("creationTimestamp"),
            spec.get("group", ""),
            names.get("kind", ""),
            ",".join(names.get("shortNames") or []),
            _crd_established(obj),
        ]
    return [name, meta.get("creationTimestamp")]


def partial(obj: JSON) -> JSON:
    """The row's ``object`` for ``includeObject=Metadata`` (the default)."""
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata", {}),
    }


def table(rt: ResourceType, items: list[JSON], list_meta: JSON, include: str = "Metadata") -> JSON:
    """A ``meta.k8s.io/v1`` Table of ``items``."""
    rows = []
    for obj in items:
        row: JSON = {"cells": cells_for(rt, obj)}
        if include == "Object":
            row["object"] = obj
        elif include == "None":
            row["object"] = None
        else:
            row["object"] = partial(obj)
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": columns_for(rt),
        "rows": rows,
    }

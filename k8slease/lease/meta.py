"""Where a Lease belongs: its name and the k8slease labels (group, role, job) in its metadata.

Reads never raise on a Lease edited into nonsense: a missing or wrongly typed field reads as
empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from k8slease.names import LABEL_GROUP


def labels_of(lease: Mapping[str, Any]) -> Mapping[str, Any]:
    metadata = lease.get("metadata")
    if isinstance(metadata, Mapping):
        labels = metadata.get("labels")
        if isinstance(labels, Mapping):
            return labels
    return {}


def lease_name_of(lease: Mapping[str, Any]) -> str:
    metadata = lease.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    return name if isinstance(name, str) else ""


def group_of(lease: Mapping[str, Any]) -> str:
    """The ``k8slease.io/group`` label of a Lease, or an empty string."""
    value = labels_of(lease).get(LABEL_GROUP)
    return value if isinstance(value, str) else ""

"""Where a Lease belongs: its name and the k8slease labels (group, role, job) in its metadata.

Reads never raise on a Lease edited into nonsense: a missing or wrongly typed field reads as
empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from k8slease.names import LABEL_GROUP


def labels_of(lease: Mapping[str, Any]) -> Mapping[str, Any]:
    """``metadata.labels`` (empty when missing or not a map)."""
    return _metadata_map(lease, "labels")


def annotations_of(lease: Mapping[str, Any]) -> Mapping[str, Any]:
    """``metadata.annotations`` (empty when missing or not a map)."""
    return _metadata_map(lease, "annotations")


def with_annotations(lease: Mapping[str, Any], added: Mapping[str, str]) -> dict[str, Any]:
    """A copy of ``lease`` (its metadata copied, the rest shared) with ``added`` set among its
    annotations; the others are kept."""
    metadata = _metadata(lease)
    annotations = {**annotations_of(lease), **added}
    return {**lease, "metadata": {**metadata, "annotations": annotations}}


def _metadata_map(lease: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    found = _metadata(lease).get(key)
    return found if isinstance(found, Mapping) else {}


def lease_name_of(lease: Mapping[str, Any]) -> str:
    """``metadata.name`` (empty when missing)."""
    name = _metadata(lease).get("name")
    return name if isinstance(name, str) else ""


def group_of(lease: Mapping[str, Any]) -> str:
    """The ``k8slease.io/group`` label of a Lease, or an empty string."""
    value = labels_of(lease).get(LABEL_GROUP)
    return value if isinstance(value, str) else ""


def resource_version(lease: Mapping[str, Any]) -> str:
    """The Lease's ``metadata.resourceVersion``, or an empty string when it has none."""
    value = _metadata(lease).get("resourceVersion")
    return value if isinstance(value, str) else ""


def version_number(resource_version: str) -> int | None:
    """``resource_version`` as a number to order by, or ``None`` when it is not comparable.

    Kubernetes 1.35 made resourceVersions of one resource comparable (KEP-5504, client-go's
    ``resourceversion.CompareResourceVersion``): a positive decimal integer without leading
    zeros, the later write the larger. Anything else (a server of another kind, a garbled
    value) is opaque, as it was before, and orders nothing.
    """
    if not resource_version.isascii() or not resource_version.isdigit():
        return None
    if resource_version.startswith("0"):
        return None
    return int(resource_version)


def _metadata(lease: Mapping[str, Any]) -> Mapping[str, Any]:
    metadata = lease.get("metadata")
    return metadata if isinstance(metadata, Mapping) else {}

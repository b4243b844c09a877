"""Status patches of a ScheduledJobGroup: what is worth a write, and the merge patch to send."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from k8slease.operator.history import MINOR_CANDIDATE_FIELDS, MINOR_FIELDS, MINOR_JOB_FIELDS


def significant(status: Mapping[str, Any]) -> dict[str, Any]:
    """``status`` without the fields that move with every renewal or tick."""
    view = _without(status, MINOR_FIELDS)
    for key, minor in (("candidates", MINOR_CANDIDATE_FIELDS), ("jobs", MINOR_JOB_FIELDS)):
        items = status.get(key)
        if isinstance(items, list):
            view[key] = [_without(item, minor) for item in items if isinstance(item, Mapping)]
    return view


def _without(data: Mapping[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in fields}


def merge_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON merge patch (RFC 7386) of the top-level status fields that turn ``old`` into ``new``.

    Nested objects are sent whole, so lists and maps in ``status`` never keep stale entries: a
    change of one job sends ``jobs`` whole. The patch holds no more than ``new`` (and a ``null``
    per field ``old`` had and ``new`` has not), so it stays within the status's byte budget.
    """
    patch: dict[str, Any] = {k: v for k, v in new.items() if old.get(k) != v}
    for key in old:
        if key not in new:
            patch[key] = None
    return patch

"""Status patches of a ScheduledJobGroup: what is worth a write, and the merge patch to send."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from k8slease.operator.history import MINOR_CANDIDATE_FIELDS, MINOR_FIELDS, MINOR_JOB_FIELDS


def significant(status: Mapping[str, Any]) -> dict[str, Any]:
    """``status`` without the fields that move with every renewal or tick."""
    view = {k: v for k, v in status.items() if k not in MINOR_FIELDS}
    candidates = status.get("candidates")
    if isinstance(candidates, list):
        view["candidates"] = [
            {k: v for k, v in c.items() if k not in MINOR_CANDIDATE_FIELDS}
            for c in candidates
            if isinstance(c, Mapping)
        ]
    jobs = status.get("jobs")
    if isinstance(jobs, list):
        view["jobs"] = [
            {k: v for k, v in j.items() if k not in MINOR_JOB_FIELDS}
            for j in jobs
            if isinstance(j, Mapping)
        ]
    return view


def merge_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON merge patch (RFC 7386) of the top-level status fields that turn ``old`` into ``new``.

    Nested objects are sent whole, so lists and maps in ``status`` never keep stale entries.
    """
    patch: dict[str, Any] = {k: v for k, v in new.items() if old.get(k) != v}
    for key in old:
        if key not in new:
            patch[key] = None
    return patch

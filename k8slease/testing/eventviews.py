"""Core ``v1`` Events and ``events.k8s.io/v1`` Events are two views of one stored resource.

On a real cluster an Event written through either API is listed and watched through both,
with fields renamed between them. Events are stored here in the core shape and converted on
the way in and out, so ``kubectl get events`` shows events a component posted through
``events.k8s.io`` and vice versa.
"""

from __future__ import annotations

from typing import Any

JSON = dict[str, Any]

#: core v1 field -> events.k8s.io/v1 field (fields with the same name are not listed).
_RENAMED = {
    "involvedObject": "regarding",
    "message": "note",
    "reportingComponent": "reportingController",
    "source": "deprecatedSource",
    "firstTimestamp": "deprecatedFirstTimestamp",
    "lastTimestamp": "deprecatedLastTimestamp",
    "count": "deprecatedCount",
}
_BACK = {new: old for old, new in _RENAMED.items()}
_EMPTY: tuple[object, ...] = ("", None, {}, 0)


def to_events_k8s_io(core: JSON) -> JSON:
    """A stored (core) Event as ``events.k8s.io/v1`` shows it."""
    out: JSON = {"kind": "Event", "apiVersion": "events.k8s.io/v1"}
    for key, value in core.items():
        if key in ("kind", "apiVersion") or value in _EMPTY:
            continue
        out[_RENAMED.get(key, key)] = value
    out.setdefault("eventTime", None)  # not omitempty in Go: legacy events show null
    return out


def to_core(event: JSON) -> JSON:
    """An ``events.k8s.io/v1`` Event in the stored (core ``v1``) shape."""
    out: JSON = {"kind": "Event", "apiVersion": "v1"}
    for key, value in event.items():
        if key in ("kind", "apiVersion"):
            continue
        out[_BACK.get(key, key)] = value
    return out

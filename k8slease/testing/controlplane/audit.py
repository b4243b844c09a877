"""Counting requests in a ``ControlPlane(audit=True)`` audit log (per object, namespace, verb).

The log has one JSON event per request (stage ``ResponseComplete``): ``verb`` (``get``,
``list``, ``watch``, ``create``, ``update``, ``patch``, ``delete``, ``deletecollection``),
``objectRef`` (``resource``, ``subresource``, ``namespace``, ``name``, ``apiGroup``),
``user.username`` and ``responseStatus.code``. ``/metrics`` has no namespace or name.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def size(path: Path) -> int:
    """The log's current length: pass it as ``since`` to read only later events."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def events(path: Path, since: int = 0) -> list[dict[str, Any]]:
    """The complete events logged after byte offset ``since``.

    ``since`` may fall inside a line: kube-apiserver writes each event with one ``write``, but
    the file's size grows page by page while it is copied in, so a :func:`size` taken then is
    mid-line. That line (an event completed before ``since`` was taken) is not counted.
    """
    start = max(since - 1, 0)  # the byte before: a newline there means ``since`` starts a line
    try:
        with path.open("rb") as handle:
            handle.seek(start)
            data = handle.read()
    except FileNotFoundError:
        return []
    lines = data.split(b"\n")
    if since > 0:
        lines = lines[1:]  # b"" after that newline, or the tail of a line begun before ``since``
    return [json.loads(line) for line in lines[:-1] if line.strip()]  # last: partial or empty


def count(
    found: list[dict[str, Any]],
    verb: str | None = None,
    resource: str | None = None,
    *,
    namespace: str | None = None,
    subresource: str | None = None,
) -> int:
    """How many events match; ``resource`` may be ``plural/subresource`` (``x/status``)."""
    if resource is not None and "/" in resource:
        resource, subresource = resource.split("/", 1)
    total = 0
    for event in found:
        ref = event.get("objectRef") or {}
        if verb is not None and event.get("verb") != verb:
            continue
        if resource is not None and ref.get("resource") != resource:
            continue
        if subresource is not None and ref.get("subresource") != subresource:
            continue
        if namespace is not None and ref.get("namespace") != namespace:
            continue
        total += 1
    return total

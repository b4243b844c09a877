"""Request bodies as the real server's strict JSON decoder sees them: which fields are repeated.

Python's ``json`` keeps the last of two equal keys silently; kube-apiserver does too, but warns
about it (``fieldValidation=Warn``, the default) or refuses the body (``Strict``).
"""

from __future__ import annotations

import json
from typing import Any


def parse_with_duplicates(raw: bytes) -> tuple[Any, tuple[str, ...]]:
    """The parsed JSON and the dotted paths of keys that an object in it has more than once.

    Raises ``ValueError`` when ``raw`` is not JSON.
    """
    repeated: dict[int, list[str]] = {}

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) != len(pairs):
            seen: set[str] = set()
            twice: list[str] = []
            for key, _ in pairs:
                if key in seen and key not in twice:
                    twice.append(key)
                seen.add(key)
            repeated[id(obj)] = twice
        return obj

    body = json.loads(raw, object_pairs_hook=pairs_hook)
    return body, tuple(_paths(body, repeated, "")) if repeated else ()


def _paths(value: Any, repeated: dict[int, list[str]], path: str) -> list[str]:
    found: list[str] = []
    if isinstance(value, dict):
        found += [f"{path}.{key}" if path else key for key in repeated.get(id(value), [])]
        for key, item in value.items():
            found += _paths(item, repeated, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for item in value:
            found += _paths(item, repeated, path)
    return found

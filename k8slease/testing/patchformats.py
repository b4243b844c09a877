"""The three patch formats of ``PATCH`` requests: JSON merge, JSON patch, strategic merge.

Strategic merge is accepted for built-in types only (as on a real server, where custom
resources answer 415); it is applied here as a JSON merge patch that merges the lists our
built-in types declare mergeable (finalizers, ownerReferences, conditions) and understands
the directives kubectl sends (``$patch``, ``$setElementOrder``, ``$retainKeys``,
``$deleteFromPrimitiveList``).
"""

from __future__ import annotations

from typing import Any

from .statusbody import StatusError, bad_request, unsupported_media_type

JSON = dict[str, Any]

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"


def deepcopy(value: Any) -> Any:
    """A fast deep copy for JSON values."""
    if isinstance(value, dict):
        return {k: deepcopy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [deepcopy(v) for v in value]
    return value


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


#: Lists that strategic merge merges instead of replacing, in the types we serve:
#: field name -> merge key (None: a list of primitives, merged as a set).
MERGE_LISTS: dict[str, str | None] = {
    "finalizers": None,
    "ownerReferences": "uid",
    "conditions": "type",
}


def _merge_list(key: str | None, target: list[Any], patch: list[Any]) -> list[Any]:
    if key is None:
        return [*target, *(v for v in patch if v not in target)]
    result = [deepcopy(item) for item in target]
    for item in patch:
        if not isinstance(item, dict):
            continue
        index = next(
            (
                i
                for i, old in enumerate(result)
                if isinstance(old, dict) and old.get(key) == item.get(key)
            ),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                del result[index]
        elif index is None:
            result.append(deepcopy(item))
        else:
            result[index] = strategic_merge_patch(result[index], item)
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Strategic merge for our built-ins: merge patch, plus merged lists (finalizers,
    ownerReferences, conditions) and the ``$patch``/``$deleteFromPrimitiveList`` directives."""
    if not isinstance(patch, dict):
        return deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: deepcopy(v) for k, v in patch.items() if not k.startswith("$")}
    if patch.get("$patch") == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(result.get(field), list) and isinstance(value, list):
                result[field] = [v for v in result[field] if v not in value]
            continue
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        elif key in MERGE_LISTS and isinstance(value, list) and isinstance(result.get(key), list):
            result[key] = _merge_list(MERGE_LISTS[key], result[key], value)
        else:
            merged = strategic_merge_patch(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise bad_request(f"invalid JSON pointer: {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str]) -> tuple[Any, str]:
    node = doc
    for part in parts[:-1]:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise StatusError(
                422,
                "Invalid",
                f"the server rejected our request due to an error in our request: "
                f"doc is missing path: /{'/'.join(parts)}",
            )
    return node, parts[-1]


def _get(doc: Any, parts: list[str]) -> Any:
    if not parts:
        return doc
    parent, last = _parent(doc, parts)
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent[int(last)]
    raise StatusError(
        422,
        "Invalid",
        f"the server rejected our request due to an error in our request: "
        f"doc is missing key: /{'/'.join(parts)}",
    )


def _remove(doc: Any, parts: list[str]) -> Any:
    value = _get(doc, parts)
    parent, last = _parent(doc, parts)
    if isinstance(parent, dict):
        del parent[last]
    else:
        del parent[int(last)]
    return value


def _add(doc: Any, parts: list[str], value: Any) -> Any:
    if not parts:
        return value
    parent, last = _parent(doc, parts)
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        index = len(parent) if last == "-" else int(last) if last.isdigit() else -1
        if not 0 <= index <= len(parent):
            raise StatusError(422, "Invalid", f"index out of bounds: {last}")
        parent.insert(index, value)
    else:
        raise StatusError(422, "Invalid", f"cannot add to a scalar at /{'/'.join(parts)}")
    return doc


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902: add, remove, replace, move, copy, test."""
    if not isinstance(operations, list):
        raise bad_request("json patch must be a list of operations")
    doc = deepcopy(target)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op:
            raise bad_request(f"invalid json patch operation: {op!r}")
        kind, parts = op["op"], _pointer(op.get("path", ""))
        if kind == "add":
            doc = _add(doc, parts, deepcopy(op.get("value")))
        elif kind == "remove":
            _remove(doc, parts)
        elif kind == "replace":
            _get(doc, parts)
            if parts:
                _remove(doc, parts)
            doc = _add(doc, parts, deepcopy(op.get("value")))
        elif kind == "move":
            value = _remove(doc, _pointer(op["from"]))
            doc = _add(doc, parts, value)
        elif kind == "copy":
            doc = _add(doc, parts, deepcopy(_get(doc, _pointer(op["from"]))))
        elif kind == "test":
            if _get(doc, parts) != op.get("value"):
                raise StatusError(
                    422,
                    "Invalid",
                    f"the server rejected our request due to an error in our "
                    f"request: testing value {op.get('path')} failed",
                    {},
                )
        else:
            raise bad_request(f"unexpected json patch operation {kind!r}")
    return doc


def apply_patch(content_type: str, target: JSON, patch: Any, builtin: bool) -> Any:
    """Apply a patch of the given media type; 415 for types the resource does not accept."""
    media = content_type.split(";")[0].strip().lower()
    if media == MERGE:
        return merge_patch(target, patch)
    if media == JSON_PATCH:
        return json_patch(target, patch)
    if media == STRATEGIC and builtin:
        return strategic_merge_patch(target, patch)
    if media == APPLY:
        raise StatusError(
            415,
            "UnsupportedMediaType",
            "server-side apply is not supported by the k8slease embedded API server; "
            "use client-side apply (kubectl apply --server-side=false)",
            {},
        )
    accepted = [JSON_PATCH, MERGE, APPLY]
    if builtin:
        accepted.insert(2, STRATEGIC)
    error = unsupported_media_type(media, accepted)
    if media not in (STRATEGIC, APPLY):
        error.details = {}  # a media type that is no patch at all: the real answer has details
    raise error

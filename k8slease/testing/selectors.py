"""Label and field selectors, parsed as the real server parses them.

Label selectors support ``=``, ``==``, ``!=``, ``in (...)``, ``notin (...)``, ``key`` and
``!key``. Field selectors support ``=``, ``==`` and ``!=`` on the fields a resource allows
(``metadata.name``/``metadata.namespace`` everywhere, more for events).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .statusbody import bad_request

JSON = dict[str, Any]
Predicate = Callable[[JSON], bool]

_SET_RE = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_./-]+)\s*(?:(notin|in)\s*\(([^)]*)\))?\s*$")
_EQ_RE = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s*(==|=|!=)\s*([A-Za-z0-9_./-]*)\s*$")


def _split(selector: str) -> list[str]:
    """Split on commas that are not inside ``( )``."""
    parts, depth, current = [], 0, ""
    for ch in selector:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [p for p in parts if p.strip()]


def _label_equals(key: str, allowed: set[str], inside: bool) -> Callable[[dict[str, str]], bool]:
    """``key in (allowed)`` (``inside``) or ``key notin (allowed)``; ``=``/``!=`` alike."""

    def check(labels: dict[str, str]) -> bool:
        return (labels.get(key) in allowed) == inside

    return check


def _label_exists(key: str, present: bool) -> Callable[[dict[str, str]], bool]:
    """``key`` (``present``) or ``!key``."""

    def check(labels: dict[str, str]) -> bool:
        return (key in labels) == present

    return check


def label_selector(selector: str | None) -> Predicate | None:
    """A predicate on an object's labels, or None for "everything"."""
    if not selector:
        return None
    checks: list[Callable[[dict[str, str]], bool]] = []
    for term in _split(selector):
        eq = _EQ_RE.match(term)
        if eq:
            key, op, value = eq.groups()
            checks.append(_label_equals(key, {value}, op != "!="))
            continue
        match = _SET_RE.match(term)
        if not match:
            raise bad_request(f"unable to parse requirement: invalid label selector {term!r}")
        negated, key, op, values = match.groups()
        if op:
            allowed = {v.strip() for v in values.split(",") if v.strip()}
            checks.append(_label_equals(key, allowed, op == "in"))
        else:
            checks.append(_label_exists(key, not negated))

    def accepts(obj: JSON) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        return all(check(labels) for check in checks)

    return accepts


def _get_path(obj: JSON, path: str) -> str:
    if path.startswith("regarding."):  # events.k8s.io's name for the stored involvedObject
        path = "involvedObject." + path.split(".", 1)[1]
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if isinstance(value, dict) and path == "source":
        value = value.get("component")
    return "" if value is None else str(value)


def _field_equals(path: str, value: str, equal: bool) -> Predicate:
    def check(obj: JSON) -> bool:
        return (_get_path(obj, path) == value) == equal

    return check


def field_selector(selector: str | None, allowed: frozenset[str]) -> Predicate | None:
    """A predicate on an object's fields, or None. Unknown fields answer 400 as for real."""
    if not selector:
        return None
    checks: list[Callable[[JSON], bool]] = []
    for term in _split(selector):
        eq = _EQ_RE.match(term)
        if not eq:
            raise bad_request(f"invalid selector: '{selector}'; can't understand '{term}'")
        path, op, value = eq.groups()
        if path not in allowed:
            raise bad_request(f"field label not supported: {path}")
        checks.append(_field_equals(path, value, op != "!="))
    return lambda obj: all(check(obj) for check in checks)


def combine(*predicates: Predicate | None) -> Predicate:
    """All of the given predicates (None ones ignored)."""
    active = [p for p in predicates if p is not None]
    if not active:
        return lambda obj: True
    if len(active) == 1:
        return active[0]
    return lambda obj: all(p(obj) for p in active)

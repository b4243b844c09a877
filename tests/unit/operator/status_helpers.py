"""The status fold of group ``billing`` as the status unit tests drive it, and readers of what it
renders: the conditions by type, the reasons of the notices it queues."""

from __future__ import annotations

from typing import Any

from k8slease.operator.fold import GroupFold
from k8slease.operator.groupspec import parse_spec
from k8slease.operator.history import Notice
from tests.unit.operator.operator_helpers import at, group_object

SPEC = parse_spec(group_object("billing"))


def fold() -> GroupFold:
    return GroupFold("ns", "billing", first_seen=at(0))


def conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


def reasons(notices: list[Notice]) -> list[str]:
    return [n.reason for n in notices]

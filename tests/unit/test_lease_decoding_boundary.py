"""A Lease is decoded only inside ``k8slease/lease/``: the wings above read decoded views.

Read from the source with :mod:`ast`, like the import-direction test. Outside ``lease/`` (and
``testing/``, the embedded API server, which stores raw objects) no module may name a Lease
decoder (``LeaseView.decode``, the record and job-state decoders), nor send a Lease request
straight to a transport (``<...>transport.get/create/replace/list/watch``, which answer raw
dicts): :class:`~k8slease.lease.store.LeaseStore` and ``list_leases`` do both in ``lease/``. A
body delivered by kopf is decoded by ``received_lease``, allowed in ``operator/`` only.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "k8slease"

#: functions of ``lease/`` that turn a Lease body into typed values
DECODERS = frozenset({"record_from_lease", "job_state_from_lease", "as_view"})
#: the decoder entry point for bodies that did not come through a LeaseStore, and where it may be
#: called: the operator's kopf handlers
RECEIVED = "received_lease"
RECEIVED_ALLOWED = ("operator",)
#: transport methods that answer raw Lease dicts
RAW_REQUESTS = frozenset({"get", "create", "replace", "list", "watch"})


def _wing(path: Path) -> str:
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else "root"


def _names_transport(node: ast.expr) -> bool:
    """``transport``, ``self.transport``, ``lock.transport``, ``self._transport`` ..."""
    if isinstance(node, ast.Name):
        return node.id.lstrip("_") == "transport"
    if isinstance(node, ast.Attribute):
        return node.attr.lstrip("_") == "transport"
    return False


def violations(source: str, wing: str) -> list[str]:
    """Where ``source`` (a module of ``wing``) decodes a Lease or reads a raw one."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Attribute):
            value = node.value
            if node.attr == "decode" and isinstance(value, ast.Name) and value.id == "LeaseView":
                found.append(f"{line}: LeaseView.decode")
            if node.attr in DECODERS:
                found.append(f"{line}: {node.attr}")
            if node.attr == RECEIVED and wing not in RECEIVED_ALLOWED:
                found.append(f"{line}: {RECEIVED}")
        elif isinstance(node, ast.Name):
            if node.id in DECODERS:
                found.append(f"{line}: {node.id}")
            if node.id == RECEIVED and wing not in RECEIVED_ALLOWED:
                found.append(f"{line}: {RECEIVED}")
        elif isinstance(node, ast.alias):
            name = node.name.rsplit(".", 1)[-1]
            if name in DECODERS or (name == RECEIVED and wing not in RECEIVED_ALLOWED):
                found.append(f"{line}: imports {name}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            func = node.func
            if func.attr in RAW_REQUESTS and _names_transport(func.value):
                found.append(f"{line}: transport.{func.attr}() answers a raw Lease")
    return found


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if _wing(p) not in ("lease", "testing"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_lease_is_decoded_outside_lease(path: Path) -> None:
    found = violations(path.read_text(), _wing(path))
    assert not found, f"{path.relative_to(PACKAGE.parent)} decodes a Lease itself: {found}"


@pytest.mark.parametrize(
    ("source", "wing"),
    [
        ("view = LeaseView.decode(body)", "jobs"),
        ("views = map(LeaseView.decode, items)", "cli"),
        ("from k8slease.lease.record import record_from_lease", "election"),
        ("state = jobrecord.job_state_from_lease(body)", "jobs"),
        ("view = received_lease(body)", "jobs"),
        ("body = self.transport.get(self.name)", "jobs"),
        ("body = lock.transport.replace(lock.name, body)", "jobs"),
        ("items, _ = transport.list(label_selector=s)", "cli"),
    ],
)
def test_the_check_sees_each_kind_of_decoding(source: str, wing: str) -> None:
    assert violations(source, wing)


@pytest.mark.parametrize(
    ("source", "wing"),
    [
        ("view = self.leases.get(self.name)", "jobs"),
        ("view = received_lease(body)", "operator"),
        ("text = raw.decode('utf-8')", "kube"),
        ("transport.delete(name)", "jobs"),
        ("timeout = self.transport.request_timeout", "jobs"),
    ],
)
def test_the_check_lets_decoded_reads_pass(source: str, wing: str) -> None:
    assert not violations(source, wing)

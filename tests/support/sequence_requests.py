"""What the differential sequences' requests are built from: paths, bodies and values.

The REST paths of the Leases and Widgets in a sequence's namespace (``s.ns``), their bodies, the
Widget CRD both servers are given, and the resourceVersion read from an answer. The sequences
are in ``lease_sequences.py`` and ``server_sequences.py``; ``sequences.py`` lists them.
"""

from __future__ import annotations

from typing import Any

from tests.realserver.differential import Session
from tests.support import bodies
from tests.support.bodies import lease_body

COORD = "/apis/coordination.k8s.io/v1"
WIDGET_GROUP = "diff.k8slease.io"
T0 = "2024-01-02T03:04:05.000000Z"


def leases(s: Session, name: str = "") -> str:
    base = f"{COORD}/namespaces/{s.ns}/leases"
    return f"{base}/{name}" if name else base


def widgets(s: Session, name: str = "", sub: str = "") -> str:
    base = f"/apis/{WIDGET_GROUP}/v1/namespaces/{s.ns}/widgets"
    path = f"{base}/{name}" if name else base
    return f"{path}/{sub}" if sub else path


def lease(name: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return lease_body(name, labels or {"app": "diff"}, **spec)


def widget(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{WIDGET_GROUP}/v1",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"size": 3, **spec},
    }


def widget_crd() -> dict[str, Any]:
    """A namespaced CRD with a status subresource, printer columns, defaults and a schema."""
    return bodies.widget_crd(WIDGET_GROUP, color_default="red", list_kind=True)


def rv(body: Any) -> str:
    """The resourceVersion of an answer's object or list."""
    return str(body["metadata"]["resourceVersion"])

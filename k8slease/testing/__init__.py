"""An embedded Kubernetes API server for tests, demos and users' own tests.

``APIServer`` speaks the real Kubernetes REST contract for namespaces, events, leases,
CustomResourceDefinitions and the custom resources they define, so the official client,
kopf and kubectl work against it unmodified. This package imports nothing from the rest of
k8slease: it is an API server in its own right.

``ControlPlane`` is the real thing for the same tests: etcd and kube-apiserver built from
their upstream Go modules and run as local processes (see :mod:`.controlplane`; standard library
only).

The embedded server's dependencies (aiohttp, jsonschema, PyYAML) come with the ``testing`` extra
(``pip install 'k8slease[testing]'``). The names below are imported on first use, so that the
pytest plugin, which pytest loads through the package's entry point wherever k8slease is
installed, does not need them until a test asks for the embedded server.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .controlplane import ControlPlane
    from .faults import Fault, Faults, Request, Stats
    from .server import APIServer

__all__ = ["APIServer", "ControlPlane", "Fault", "Faults", "Request", "Stats"]

_HOMES = {
    "APIServer": ".server",
    "ControlPlane": ".controlplane",
    "Fault": ".faults",
    "Faults": ".faults",
    "Request": ".faults",
    "Stats": ".faults",
}

#: The error raised when the server's own dependencies are not installed.
EXTRA_HINT = "the embedded API server needs the testing extra: pip install 'k8slease[testing]'"


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        module = importlib.import_module(home, __name__)
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(f"{EXTRA_HINT} ({exc})", name=exc.name) from exc
    value = getattr(module, name)
    globals()[name] = value
    return value

"""An embedded Kubernetes API server for tests, demos and users' own tests.

``APIServer`` speaks the real Kubernetes REST contract for namespaces, events, leases,
CustomResourceDefinitions and the custom resources they define, so the official client,
kopf and kubectl work against it unmodified. This package imports nothing from the rest of
k8slease: it is an API server in its own right.
"""

from .faults import Fault, Faults, Request, Stats
from .server import APIServer

__all__ = ["APIServer", "Fault", "Faults", "Request", "Stats"]

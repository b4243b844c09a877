"""An embedded Kubernetes API server for tests, demos and users' own tests.

``APIServer`` speaks the real Kubernetes REST contract for namespaces, events, leases,
CustomResourceDefinitions and the custom resources they define, so the official client,
kopf and kubectl work against it unmodified. This package imports nothing from the rest of
k8slease: it is an API server in its own right.

``ControlPlane`` is the real thing for the same tests: etcd and kube-apiserver built from
their upstream Go modules and run as local processes (see :mod:`.controlplane`).
"""

from .controlplane import ControlPlane
from .faults import Fault, Faults, Request, Stats
from .server import APIServer

__all__ = ["APIServer", "ControlPlane", "Fault", "Faults", "Request", "Stats"]

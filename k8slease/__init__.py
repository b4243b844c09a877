"""k8slease: run scheduled jobs once, not once per replica, on Kubernetes."""

from __future__ import annotations

from k8slease.errors import (
    AlreadyExists,
    ConfigError,
    Conflict,
    Forbidden,
    Invalid,
    K8sLeaseError,
    NotFound,
    TransportError,
    Unavailable,
)
from k8slease.record import LeaseRecord

__version__ = "0.1.0"

__all__ = [
    "AlreadyExists",
    "ConfigError",
    "Conflict",
    "Forbidden",
    "Invalid",
    "K8sLeaseError",
    "LeaseRecord",
    "NotFound",
    "TransportError",
    "Unavailable",
    "__version__",
]

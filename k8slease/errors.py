"""Exceptions k8slease raises.

Transport errors map the Kubernetes API's answers to the few outcomes the algorithms act on;
everything else is a configuration error raised before any I/O happens.
"""

from __future__ import annotations


class K8sLeaseError(Exception):
    """Base class of every error k8slease raises."""


class ConfigError(K8sLeaseError, ValueError):
    """Invalid configuration, raised by constructors before anything runs."""


class TransportError(K8sLeaseError):
    """The API server did not do what was asked. ``status`` is the HTTP code when there was one."""

    def __init__(self, message: str, *, status: int | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


class NotFound(TransportError):
    """404: the object does not exist."""


class AlreadyExists(TransportError):
    """409 AlreadyExists on create: someone else created the object first."""


class Conflict(TransportError):
    """409 Conflict on update: the resourceVersion we wrote against is stale; someone else won."""


class Forbidden(TransportError):
    """401/403: RBAC does not allow the call. Retrying will not help until someone fixes RBAC."""


class Invalid(TransportError):
    """422 or 400: the server rejected the body."""


class Unavailable(TransportError):
    """5xx, 429, a timeout, a dropped connection or an answer that is not a Kubernetes object."""

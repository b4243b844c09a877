"""Log a persistent request error once, with what to do about it, then only count repeats.

A replica in a namespace that does not exist, or without RBAC for Leases, fails the same way
every retry. :class:`RepeatedErrors` logs the first failure of a kind (operation and error class)
as a warning that says what to fix, repeats of it at debug level with a running count, and one
``request.recovered`` line (with the count) once the operation succeeds again.
"""

from __future__ import annotations

import threading
from typing import Any

from k8slease.errors import Forbidden, NotFound, TransportError


def hint(op: str, error: TransportError, *, namespace: str) -> str:
    """What an operator should do about ``error`` (an empty string for transient errors)."""
    if isinstance(error, Forbidden):
        if error.status == 401:
            return "the API server refused the credentials: check the kubeconfig or token"
        return (
            f"RBAC: the ServiceAccount needs get, list, watch, create and update on"
            f" coordination.k8s.io leases in namespace {namespace!r}; a group's narrowed Role"
            f" (chart: elector.bindings[].group) allows get and update only on the Leases it"
            f" names: list the job under elector.bindings[].jobs (docs/operations.md#rbac)"
        )
    if isinstance(error, NotFound) and op in ("create", "watch", "list"):
        return (
            f"namespace {namespace!r} does not exist: create it, or pass namespace= (or set"
            f" POD_NAMESPACE)"
        )
    return ""


class RepeatedErrors:
    """Per-operation failure counts of one requester; logs each kind of failure once."""

    def __init__(self, log: Any, *, namespace: str) -> None:
        self._log = log
        self._namespace = namespace
        self._lock = threading.Lock()
        self._kind: dict[str, str] = {}
        self._count: dict[str, int] = {}

    def failed(self, op: str, error: TransportError) -> int:
        """Report a failure of ``op``; returns how many in a row ``op`` has failed."""
        kind = type(error).__name__
        with self._lock:
            first = self._kind.get(op) != kind
            self._kind[op] = kind
            count = self._count[op] = self._count.get(op, 0) + 1
        reason = kind.lower()
        if first:
            todo = hint(op, error, namespace=self._namespace)
            extra = {"hint": todo} if todo else {}
            self._log.warning(
                "request.failed", op=op, reason=reason, error=str(error), failures=count, **extra
            )
        else:
            self._log.debug("request.failed_again", op=op, reason=reason, failures=count)
        return count

    def succeeded(self, op: str) -> None:
        """``op`` worked: log the recovery if it had been failing, and reset its count."""
        with self._lock:
            count = self._count.pop(op, 0)
            self._kind.pop(op, None)
        if count:
            self._log.info("request.recovered", op=op, failures=count)

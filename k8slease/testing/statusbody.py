"""``kind: Status`` error bodies, as the real API server builds them.

Every failure the embedded server answers is a :class:`StatusError` carrying the exact
``reason``/``code``/``details`` a kube-apiserver would send, so clients that branch on
``reason`` (the official client, kopf, kubectl) take the same path as against a real cluster.
"""

from __future__ import annotations

import json
from typing import Any

JSON = dict[str, Any]

#: HTTP code -> Status reason for codes we answer (and for injected faults).
REASONS: dict[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Gone",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class StatusError(Exception):
    """A failure answered as a ``kind: Status`` body with the given HTTP code."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: JSON | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def body(self) -> JSON:
        """The ``Status`` object sent to the client."""
        status: JSON = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "code": self.code,
        }
        if self.reason:
            status["reason"] = self.reason
        if self.details is not None:
            status["details"] = self.details
        return status


def _details(name: str, group: str, kind: str) -> JSON:
    details: JSON = {"name": name} if name else {}
    details["kind"] = kind
    if group:
        details["group"] = group
    return details


def _qualified(plural: str, group: str) -> str:
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, group: str, name: str) -> StatusError:
    """404 for a missing object: ``leases.coordination.k8s.io "x" not found``."""
    return _about_object(404, "NotFound", plural, group, name, "not found")


def already_exists(plural: str, group: str, name: str) -> StatusError:
    """409 AlreadyExists for a create whose name is taken."""
    return _about_object(409, "AlreadyExists", plural, group, name, "already exists")


def _about_object(
    code: int, reason: str, plural: str, group: str, name: str, what: str
) -> StatusError:
    """``<plural>.<group> "<name>" <what>``, with the object's details."""
    return StatusError(
        code, reason, f'{_qualified(plural, group)} "{name}" {what}', _details(name, group, plural)
    )


def conflict(plural: str, group: str, name: str, why: str | None = None) -> StatusError:
    """409 Conflict: a stale resourceVersion or a failed precondition."""
    why = why or (
        "the object has been modified; please apply your changes to the latest version and "
        "try again"
    )
    return StatusError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(plural, group)} "{name}": {why}',
        _details(name, group, plural),
    )


def precondition_failed(kind: str, group: str, name: str, why: str) -> StatusError:
    """409 Conflict for a failed delete precondition; the real server names the *kind* here
    (``Lease.coordination.k8s.io``), not the resource."""
    return StatusError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(kind, group)} "{name}": {why}',
        _details(name, group, kind),
    )


def invalid(kind: str, group: str, name: str, causes: list[JSON]) -> StatusError:
    """422 Invalid with one cause per offending field, message formatted like the real one."""
    parts = [
        c["message"] if not c.get("field") else f"{c['field']}: {c['message']}" for c in causes
    ]
    summary = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    details = _details(name, group, kind)
    details["causes"] = causes
    qualified = f"{kind}.{group}" if group else kind
    return StatusError(422, "Invalid", f'{qualified} "{name}" is invalid: {summary}', details)


def invalid_option(options_kind: str, field: str, message: str) -> StatusError:
    """422 for a bad query option (``dryRun``, ``fieldValidation``): the real server validates
    the request's ``CreateOptions``/``UpdateOptions``/``PatchOptions``/``DeleteOptions``."""
    return invalid(options_kind, "meta.k8s.io", "", [
        {"reason": "FieldValueNotSupported", "message": message, "field": field}
    ])  # fmt: skip


def patch_invalid(patched: str, why: str) -> StatusError:
    """422 for a patch whose result cannot be decoded (a malformed time, a field Strict field
    validation refuses): the real server reports the patched object as an invalid ``patch``."""
    message = f"Invalid value: {json.dumps(patched)}: {why}"
    return StatusError(
        422,
        "Invalid",
        f' "" is invalid: patch: {message}',
        {"causes": [{"reason": "FieldValueInvalid", "message": message, "field": "patch"}]},
    )


def bad_request(message: str, details: JSON | None = None) -> StatusError:
    """400 BadRequest."""
    return StatusError(400, "BadRequest", message, details)


def method_not_allowed(
    message: str = "the server does not allow this method on the requested resource",
) -> StatusError:
    """405 MethodNotAllowed."""
    return StatusError(405, "MethodNotAllowed", message, {})


def unsupported_media_type(content_type: str, accepted: list[str]) -> StatusError:
    """415 for a patch type the resource does not accept."""
    return StatusError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: "
        f"{', '.join(accepted)}",
    )


def gone(message: str) -> StatusError:
    """410 Gone / Expired: a watch or list from a resourceVersion older than the window."""
    return StatusError(410, "Expired", message)


def too_large() -> StatusError:
    """etcd refused the write: the object is larger than its ``--max-request-bytes`` (1.5 MiB by
    default). kube-apiserver passes etcd's error on as it is: a 500 without a reason."""
    return StatusError(500, "", "etcdserver: request is too large")


def injected(code: int, message: str | None = None, retry_after: int | None = None) -> StatusError:
    """An error answered by fault injection (500, 429, 503, ...).

    With ``retry_after`` the answer carries ``Retry-After`` and ``details.retryAfterSeconds``
    as the real server's throttling does; note that urllib3 (under the official client)
    then retries 429/503 by itself.
    """
    reason = REASONS.get(code, "InternalError")
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
    details: JSON = {"retryAfterSeconds": retry_after} if retry_after is not None else {}
    return StatusError(code, reason, message or f"injected fault: {reason}", details, headers)


def success(plural: str, group: str, name: str, uid: str) -> JSON:
    """The ``Status: Success`` body answered by a delete that removed the object at once."""
    details = _details(name, group, plural)
    details["uid"] = uid
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    }

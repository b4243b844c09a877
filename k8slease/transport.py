"""The only place that calls the Kubernetes API for Leases.

:class:`LeaseTransport` speaks plain JSON dicts (so fields k8slease does not know survive a
round-trip) and maps every HTTP outcome to one of a few exceptions from :mod:`k8slease.errors`:
``NotFound``, ``AlreadyExists``, ``Conflict``, ``Forbidden``, ``Invalid`` and ``Unavailable``
(5xx, 429, timeouts, dropped connections, answers that are not a Lease). Every request carries a
timeout so that a hung API server cannot stall a renewal past its deadline.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from k8slease.errors import (
    AlreadyExists,
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    TransportError,
    Unavailable,
)


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One event of a Lease watch: ``type`` is ADDED, MODIFIED, DELETED or BOOKMARK."""

    type: str
    lease: dict[str, Any]


def _status_reason(exc: ApiException) -> tuple[str, str]:
    body = exc.body
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    try:
        status = json.loads(body) if body else {}
    except (TypeError, ValueError):
        status = {}
    if not isinstance(status, dict):
        status = {}
    return str(status.get("reason") or ""), str(status.get("message") or exc.reason or "")


def map_api_exception(exc: ApiException, *, verb: str) -> TransportError:
    """Translate a client exception into the k8slease exception the algorithms act on."""
    code = int(exc.status or 0)
    reason, message = _status_reason(exc)
    text = f"{verb}: HTTP {code} {reason or exc.reason}: {message}".rstrip(": ")
    if code == 404:
        return NotFound(text, status=code, reason=reason)
    if code == 409:
        if reason == "AlreadyExists" or verb == "create":
            return AlreadyExists(text, status=code, reason=reason)
        return Conflict(text, status=code, reason=reason)
    if code in (401, 403):
        return Forbidden(text, status=code, reason=reason)
    if code in (400, 422):
        return Invalid(text, status=code, reason=reason)
    return Unavailable(text, status=code or None, reason=reason)


def _decode(raw: Any, *, verb: str, kind: str = "Lease") -> dict[str, Any]:
    data = getattr(raw, "data", raw)
    try:
        body = json.loads(data)
    except (TypeError, ValueError):
        raise Unavailable(f"{verb}: the API server answered something that is not JSON") from None
    if not isinstance(body, dict) or body.get("kind") not in (kind, None) or "metadata" not in body:
        raise Unavailable(f"{verb}: the API server answered something that is not a {kind}")
    return body


class LeaseTransport:
    """Lease calls in one namespace, each with a timeout, errors mapped to k8slease exceptions.

    ``request_timeout`` (seconds, default 10) bounds every request; keep it below the elector's
    renew deadline.
    """

    def __init__(
        self,
        api_client: client.ApiClient,
        namespace: str,
        *,
        request_timeout: float = 10.0,
    ) -> None:
        if request_timeout <= 0:
            raise ValueError("request_timeout must be > 0")
        self.namespace = namespace
        self.request_timeout = request_timeout
        self.api_client = api_client
        self._api = client.CoordinationV1Api(api_client)

    def _call(self, verb: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(
                *args, _preload_content=False, _request_timeout=self.request_timeout, **kwargs
            )
        except ApiException as exc:
            raise map_api_exception(exc, verb=verb) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise Unavailable(f"{verb}: {type(exc).__name__}: {exc}") from None

    def get(self, name: str) -> dict[str, Any]:
        """Read one Lease. Raises ``NotFound`` when it does not exist."""
        raw = self._call("get", self._api.read_namespaced_lease, name, self.namespace)
        return _decode(raw, verb="get")

    def create(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Create a Lease. Raises ``AlreadyExists`` when someone else created it first."""
        raw = self._call("create", self._api.create_namespaced_lease, self.namespace, dict(body))
        return _decode(raw, verb="create")

    def replace(self, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """PUT a Lease, conditional on the ``metadata.resourceVersion`` in ``body``.

        Raises ``Conflict`` when that resourceVersion is stale, ``NotFound`` when the Lease is gone.
        """
        raw = self._call(
            "update", self._api.replace_namespaced_lease, name, self.namespace, dict(body)
        )
        return _decode(raw, verb="update")

    def delete(self, name: str) -> None:
        """Delete a Lease; a Lease that is already gone is not an error."""
        try:
            self._call("delete", self._api.delete_namespaced_lease, name, self.namespace)
        except NotFound:
            return

    def list(self, *, label_selector: str | None = None) -> tuple[list[dict[str, Any]], str]:
        """List Leases; returns the items and the list's resourceVersion (to start a watch from)."""
        kwargs: dict[str, Any] = {}
        if label_selector:
            kwargs["label_selector"] = label_selector
        raw = self._call("list", self._api.list_namespaced_lease, self.namespace, **kwargs)
        body = _decode(raw, verb="list", kind="LeaseList")
        items = body.get("items") or []
        if not isinstance(items, list):
            raise Unavailable("list: items is not a list")
        rv = body.get("metadata", {}).get("resourceVersion", "")
        return [item for item in items if isinstance(item, dict)], str(rv or "")

    def watch(
        self,
        *,
        name: str | None = None,
        label_selector: str | None = None,
        resource_version: str | None = None,
        timeout_seconds: int = 300,
    ) -> Iterator[WatchEvent]:
        """Stream Lease events after ``resource_version`` until the server ends the watch.

        Raises ``Unavailable`` when the stream breaks and ``TransportError`` with status 410 when
        ``resource_version`` is too old (the caller should list again).
        """
        params: dict[str, Any] = {
            "watch": True,
            "allow_watch_bookmarks": True,
            "timeout_seconds": timeout_seconds,
        }
        if name:
            params["field_selector"] = f"metadata.name={name}"
        if label_selector:
            params["label_selector"] = label_selector
        if resource_version:
            params["resource_version"] = resource_version
        try:
            response: Any = self._api.list_namespaced_lease(
                self.namespace,
                _preload_content=False,
                _request_timeout=(self.request_timeout, timeout_seconds + self.request_timeout),
                **params,
            )
        except ApiException as exc:
            raise map_api_exception(exc, verb="watch") from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise Unavailable(f"watch: {type(exc).__name__}: {exc}") from None
        try:
            yield from _watch_lines(response)
        finally:
            response.release_conn()


def _watch_lines(response: Any) -> Iterator[WatchEvent]:
    buffer = b""
    try:
        for chunk in response.stream(4096, decode_content=False):
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                event = _parse_watch_line(line)
                if event is not None:
                    yield event
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise Unavailable(f"watch: stream broke: {type(exc).__name__}: {exc}") from None
    if buffer.strip():
        event = _parse_watch_line(buffer)
        if event is not None:
            yield event


def _parse_watch_line(line: bytes) -> WatchEvent | None:
    if not line.strip():
        return None
    try:
        data = json.loads(line)
    except ValueError:
        raise Unavailable("watch: the API server sent a line that is not JSON") from None
    if not isinstance(data, dict) or not isinstance(data.get("object"), dict):
        raise Unavailable("watch: the API server sent an event without an object")
    kind = str(data.get("type") or "")
    obj = data["object"]
    if kind == "ERROR":
        code = obj.get("code")
        reason = str(obj.get("reason") or "")
        message = f"watch: {reason or 'error'}: {obj.get('message', '')}"
        if code == 410:
            raise TransportError(message, status=410, reason=reason or "Expired")
        raise Unavailable(message, status=code if isinstance(code, int) else None, reason=reason)
    return WatchEvent(type=kind, lease=obj)

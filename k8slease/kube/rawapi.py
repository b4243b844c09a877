"""Requests to the Kubernetes API as plain JSON, with errors mapped to k8slease exceptions.

``kubernetes`` 37 is generated with pydantic models: a dict body passed to a typed method is
converted to a model first, which drops fields the model does not know and renders a MicroTime
whose fraction is zero without its fraction (``...T00:00:00+00:00``), which a real API server
rejects. :func:`send` keeps the client's configuration (server, credentials, TLS) and connection
pool but sends the body as the JSON it is. Every outcome maps to ``NotFound``, ``AlreadyExists``,
``Conflict``, ``Forbidden``, ``Invalid`` or ``Unavailable`` (5xx, 429, timeouts, dropped
connections, answers that are not the expected object).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.client.rest import RESTResponse

from k8slease.errors import (
    AlreadyExists,
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    TransportError,
    Unavailable,
)


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
    try:
        body = json.loads(raw)
    except (TypeError, ValueError):
        raise Unavailable(f"{verb}: the API server answered something that is not JSON") from None
    if not isinstance(body, dict) or body.get("kind") not in (kind, None) or "metadata" not in body:
        raise Unavailable(f"{verb}: the API server answered something that is not a {kind}")
    return body


def send(
    api_client: client.ApiClient,
    verb: str,
    method: str,
    path: str,
    *,
    body: Mapping[str, Any] | None = None,
    query: list[tuple[str, str]] | None = None,
    timeout: float | tuple[float, float] | urllib3.Timeout,
) -> Any:
    """Send one request; returns the urllib3 response (unread) of a 2xx answer.

    ``verb`` names the operation in error messages (and tells a create's 409 from an update's).
    """
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    try:
        request = api_client.param_serialize(
            method=method,
            resource_path=path,
            query_params=query or [],
            header_params=headers,
            body=dict(body) if body is not None else None,
            auth_settings=["BearerToken"],
        )
        response: Any = _request_once(api_client, *request[:4], timeout=timeout)
    except ApiException as exc:
        raise map_api_exception(exc, verb=verb) from None
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise Unavailable(f"{verb}: {type(exc).__name__}: {exc}") from None
    if not 200 <= response.status <= 299:
        with contextlib.suppress(urllib3.exceptions.HTTPError, OSError):
            response.read()
        error = ApiException(status=response.status, reason=response.reason)
        error.body = response.data
        raise map_api_exception(error, verb=verb)
    return response


def _request_once(
    api_client: client.ApiClient,
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: Any,
    *,
    timeout: float | tuple[float, float] | urllib3.Timeout,
) -> RESTResponse:
    """One HTTP request on the client's connection pool, without urllib3's own retries.

    ``ApiClient.call_api`` lets urllib3 retry a read that timed out (three times by default), so
    one request could last four times its timeout; here a float ``timeout`` bounds the whole
    request and a ``(connect, read)`` pair bounds each phase, once; a ``urllib3.Timeout`` is
    used as it is (a request budget: ``total`` with a shorter ``connect``).
    """
    if isinstance(timeout, urllib3.Timeout):
        bound = timeout
    elif isinstance(timeout, tuple):
        bound = urllib3.Timeout(connect=timeout[0], read=timeout[1])
    else:
        bound = urllib3.Timeout(total=timeout)
    raw = api_client.rest_client.pool_manager.request(
        method,
        url,
        body=None if body is None else json.dumps(body),
        headers=dict(headers),
        timeout=bound,
        retries=False,
        preload_content=False,
    )
    return RESTResponse(raw)


def send_json(
    api_client: client.ApiClient, verb: str, method: str, path: str, *, kind: str, **kwargs: Any
) -> dict[str, Any]:
    """:func:`send`, then read the answer as a ``kind`` object (``Unavailable`` if it is not)."""
    response = send(api_client, verb, method, path, **kwargs)
    try:
        response.read()
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise Unavailable(f"{verb}: {type(exc).__name__}: {exc}") from None
    return _decode(response.data, verb=verb, kind=kind)

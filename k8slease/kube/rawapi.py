"""Requests to the Kubernetes API as plain JSON, with errors mapped to k8slease exceptions.

``kubernetes`` 37 is generated with pydantic models: a dict body passed to a typed method is
converted to a model first, which drops fields the model does not know and renders a MicroTime
whose fraction is zero without its fraction (``...T00:00:00+00:00``), which a real API server
rejects. :func:`send` keeps the client's configuration (server, credentials, TLS) and connection
pool but sends the body as the JSON it is. Every outcome maps to ``NotFound``, ``AlreadyExists``,
``Conflict``, ``Forbidden``, ``Invalid`` or ``Unavailable`` (5xx, 429, timeouts, dropped
connections, answers that are not the expected object).

An answer is not trusted for its status code alone: :func:`loads_answer` turns bytes that do not
parse (nested deeper than the interpreter's recursion limit included) into ``Unavailable``, and
:func:`object_problem` names what a 2xx object answer lacks that the API server always sends
(``metadata.name`` and ``metadata.resourceVersion``), so nothing is concluded from garbage;
:func:`identity_problem` names an object that is not the one asked for (another name, another
namespace). A body is read up to a bound (:mod:`k8slease.kube.bodyread`): one object's answer
at most :data:`~k8slease.kube.bodyread.MAX_OBJECT_BYTES`, a list's
:data:`~k8slease.kube.bodyread.MAX_LIST_BYTES`.
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
from k8slease.kube.bodyread import (
    MAX_LIST_BYTES,
    MAX_OBJECT_BYTES,
    TooLarge,
    read_at_most,
    too_large,
)
from k8slease.shown import shown

#: how parsing hostile bytes fails: malformed JSON, bytes that are no Unicode, an integer of more
#: digits than Python converts (all ValueError), nesting deeper than the recursion limit
_NOT_JSON = (TypeError, ValueError, RecursionError)


def loads_answer(raw: Any, *, failure: str) -> Any:
    """``raw`` parsed as JSON; ``Unavailable(failure)`` when it is not JSON (however it fails)."""
    try:
        return json.loads(raw)
    except _NOT_JSON:
        raise Unavailable(failure) from None


def object_problem(body: Any, *, kind: str = "Lease") -> str | None:
    """What keeps ``body`` from being a ``kind`` object as the API server returns one, or
    ``None``. The API server always sends a mapping ``metadata`` with a non-empty string
    ``name`` and ``resourceVersion``, and ``kind`` (except on a list's items) and ``spec`` (when
    present) as the kind's; the content of ``spec`` is the reader's to judge (a hand edit can
    put anything the schema accepts there)."""
    if not isinstance(body, dict):
        return f"something that is not a {kind}"
    if body.get("kind") not in (kind, None):
        return f"an object whose kind is {_shown(body.get('kind'))}, not {kind}"
    metadata = body.get("metadata")
    if not isinstance(metadata, Mapping):
        return (
            f"a {kind} without metadata"
            if metadata is None
            else f"a {kind} whose metadata is {_shown(metadata)}, not a mapping"
        )
    for field in ("resourceVersion", "name"):
        value = metadata.get(field)
        if not isinstance(value, str) or not value:
            return f"a {kind} without metadata.{field}"
    if not isinstance(metadata.get("namespace", ""), str):
        return f"a {kind} whose metadata.namespace is {_shown(metadata['namespace'])}, not a string"
    if not isinstance(body.get("spec", {}), Mapping):
        return f"a {kind} whose spec is {_shown(body.get('spec'))}, not a mapping"
    return None


def identity_problem(
    body: Mapping[str, Any], *, kind: str = "Lease", namespace: str | None, name: str | None = None
) -> str | None:
    """What makes ``body`` (an object :func:`object_problem` accepted) another object than the
    ``kind`` ``name`` in ``namespace`` that was asked for, or ``None``: another
    ``metadata.name`` (when ``name`` is given: a list or a watch of many objects has none), or
    another ``metadata.namespace`` when the object names one."""
    metadata = body["metadata"]
    answered_name, answered_namespace = metadata["name"], metadata.get("namespace")
    other_namespace = namespace is not None and answered_namespace not in (None, namespace)
    if name is not None and (answered_name != name or other_namespace):
        answered = _ref(answered_namespace, answered_name)
        return f"the {kind} {answered} instead of {_ref(namespace, name)}"
    if other_namespace:
        return f"a {kind} in namespace {_ref(None, answered_namespace)}, not {namespace!r}"
    return None


def _ref(namespace: str | None, name: str) -> str:
    """``'namespace/name'`` (``'name'`` without a namespace), quoted, escaped and cut short."""
    return "'" + shown(name if namespace is None else f"{namespace}/{name}") + "'"


def _shown(value: Any) -> str:
    """A string cut short, anything else by its JSON type (never the repr of a deep nesting)."""
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:37] + "...")
    return _JSON_TYPES.get(type(value), type(value).__name__)


_JSON_TYPES = {
    list: "an array",
    dict: "an object",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "a boolean",
    type(None): "null",
}


def _status_reason(exc: ApiException) -> tuple[str, str]:
    body = exc.body
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    try:
        status = json.loads(body) if body else {}
    except _NOT_JSON:
        status = {}
    if not isinstance(status, dict):
        status = {}
    reason, message = status.get("reason"), status.get("message")
    return (
        reason if isinstance(reason, str) else "",
        message if isinstance(message, str) and message else str(exc.reason or ""),
    )


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


def _decode(
    raw: Any,
    *,
    verb: str,
    kind: str = "Lease",
    namespace: str | None = None,
    name: str | None = None,
) -> dict[str, Any]:
    """A 2xx answer's body as a ``kind`` object, a list (``...List``: its ``metadata`` and every
    item checked) or a ``Status``; ``Unavailable`` naming what is wrong with anything else. Given
    ``namespace`` (and ``name``), an object (a list's items) must be that one
    (:func:`identity_problem`)."""
    body = loads_answer(raw, failure=f"{verb}: the API server answered something that is not JSON")
    if kind == "Status":
        problem = _status_problem(body)
    elif kind.endswith("List"):
        problem = _list_problem(body, kind, namespace)
    else:
        problem = object_problem(body, kind=kind) or identity_problem(
            body, kind=kind, namespace=namespace, name=name
        )
    if problem is not None:
        raise Unavailable(f"{verb}: the API server answered {problem}")
    return dict(body)


def _status_problem(body: Any) -> str | None:
    if not isinstance(body, dict) or body.get("kind") not in ("Status", None):
        return "something that is not a Status"
    if not isinstance(body.get("metadata"), Mapping):
        return "a Status without metadata"
    return None


def _list_problem(body: Any, kind: str, namespace: str | None) -> str | None:
    if not isinstance(body, dict) or body.get("kind") not in (kind, None):
        return f"something that is not a {kind}"
    metadata = body.get("metadata")
    if not isinstance(metadata, Mapping):
        return f"a {kind} without metadata"
    version = metadata.get("resourceVersion")
    if not isinstance(version, str) or not version:
        return f"a {kind} without metadata.resourceVersion"
    items = body.get("items")
    if items is None:  # an empty list, as Go renders a nil slice
        return None
    if not isinstance(items, list):
        return f"a {kind} whose items are not a list"
    item_kind = kind.removesuffix("List")
    for index, item in enumerate(items):
        problem = object_problem(item, kind=item_kind) or identity_problem(
            item, kind=item_kind, namespace=namespace
        )
        if problem is not None:
            return f"a {kind} whose item {index} is {problem}"
    return None


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
        error = ApiException(status=response.status, reason=response.reason)
        # the body (bytes: _status_reason decodes them) names the reason, when it can be read
        # within the bound; the status code alone maps the error
        with contextlib.suppress(urllib3.exceptions.HTTPError, OSError, TooLarge):
            read: Any = read_at_most(response.response, MAX_OBJECT_BYTES)
            error.body = read
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
    api_client: client.ApiClient,
    verb: str,
    method: str,
    path: str,
    *,
    kind: str,
    namespace: str | None = None,
    name: str | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """:func:`send`, then read the answer (up to its bound: a list's or one object's) as a
    ``kind`` object, and given ``namespace`` (and ``name``) as that one (``Unavailable`` if it is
    not: :func:`_decode`)."""
    response = send(api_client, verb, method, path, **kwargs)
    listed = kind.endswith("List")
    try:
        raw = read_at_most(response.response, MAX_LIST_BYTES if listed else MAX_OBJECT_BYTES)
    except TooLarge as exc:
        raise too_large(verb, exc, what=f"a {kind}" if listed else f"one {kind}") from None
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise Unavailable(f"{verb}: {type(exc).__name__}: {exc}") from None
    return _decode(raw, verb=verb, kind=kind, namespace=namespace, name=name)

"""The only place that calls the Kubernetes API for Leases.

:class:`LeaseTransport` speaks plain JSON dicts through :mod:`k8slease.kube.rawapi` (so fields
k8slease does not know survive a round-trip) and raises the exceptions it maps every HTTP outcome
to: ``NotFound``, ``AlreadyExists``, ``Conflict``, ``Forbidden``, ``Invalid`` and ``Unavailable``
(5xx, 429, timeouts, dropped connections, answers that are not a Lease, answers that are another
Lease than the one asked for, answers larger than the bound of :mod:`k8slease.kube.bodyread`).
Every request carries a timeout: the caller's request budget (:mod:`k8slease.lease.budget`; a
renew may take the time left before its deadline) or, outside one, ``request_timeout``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote

import urllib3
from kubernetes import client

from k8slease.errors import NotFound, TransportError, Unavailable
from k8slease.kube.bodyread import MAX_OBJECT_BYTES, abandon, mib
from k8slease.kube.rawapi import identity_problem, loads_answer, object_problem, send, send_json
from k8slease.lease.budget import current_budget


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One event of a Lease watch: ``type`` is ADDED, MODIFIED, DELETED or BOOKMARK."""

    type: str
    lease: dict[str, Any]


class LeaseAPI(Protocol):
    """The Lease calls an elector makes; :class:`LeaseTransport` has them, tests fake them."""

    def get(self, name: str) -> dict[str, Any]: ...

    def create(self, body: Mapping[str, Any]) -> dict[str, Any]: ...

    def replace(self, name: str, body: Mapping[str, Any]) -> dict[str, Any]: ...

    def watch(
        self, *, name: str, resource_version: str | None, timeout_seconds: int
    ) -> Iterator[WatchEvent]: ...

    def close_watches(self) -> None: ...


class LeaseTransport:
    """Lease calls in one namespace, each with a timeout, errors mapped to k8slease exceptions.

    ``request_timeout`` (seconds, default 10) bounds every request sent outside a request budget
    (:func:`~k8slease.lease.budget.request_budget`), which callers with something at stake set.
    Bodies are sent as the JSON they are: the client's typed models are bypassed
    (they would drop fields they do not know and re-render MicroTime without its fraction), while
    its configuration (server, credentials, TLS) and connection pool are used as they are.
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
        self._base = f"/apis/coordination.k8s.io/v1/namespaces/{quote(namespace, safe='')}/leases"
        self._watches_lock = threading.Lock()
        self._open_watches: set[Any] = set()
        self._watches_closed = False

    def _path(self, name: str | None = None) -> str:
        return self._base if name is None else f"{self._base}/{quote(name, safe='')}"

    def _timeout(self) -> float | urllib3.Timeout:
        """The caller's request budget (:mod:`k8slease.lease.budget`), else ``request_timeout``."""
        budget = current_budget()
        if budget is None:
            return self.request_timeout
        return urllib3.Timeout(connect=budget.connect, total=budget.total)

    def _send(self, verb: str, method: str, path: str, **kwargs: Any) -> Any:
        kwargs.setdefault("timeout", self._timeout())
        return send(self.api_client, verb, method, path, **kwargs)

    def _json(
        self, verb: str, method: str, path: str, *, kind: str = "Lease", **kwargs: Any
    ) -> dict[str, Any]:
        """The answer as a ``kind`` in this namespace (``name``: that one), else ``Unavailable``."""
        kwargs.setdefault("timeout", self._timeout())
        return send_json(
            self.api_client, verb, method, path, kind=kind, namespace=self.namespace, **kwargs
        )

    def get(self, name: str) -> dict[str, Any]:
        """Read one Lease. Raises ``NotFound`` when it does not exist, ``Unavailable`` when the
        answer is another Lease (another name or namespace)."""
        return self._json("get", "GET", self._path(name), name=name)

    def create(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Create a Lease. Raises ``AlreadyExists`` when someone else created it first."""
        return self._json("create", "POST", self._path(), body=body, name=_name_in(body))

    def replace(self, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """PUT a Lease, conditional on the ``metadata.resourceVersion`` in ``body``.

        Raises ``Conflict`` when that resourceVersion is stale, ``NotFound`` when the Lease is gone.
        """
        return self._json("update", "PUT", self._path(name), body=body, name=name)

    def delete(self, name: str) -> None:
        """Delete a Lease; a Lease that is already gone is not an error."""
        try:
            self._json("delete", "DELETE", self._path(name), kind="Status")
        except NotFound:
            return

    def list(self, *, label_selector: str | None = None) -> tuple[list[dict[str, Any]], str]:
        """List Leases; returns the items and the list's resourceVersion (to start a watch from)."""
        query = [("labelSelector", label_selector)] if label_selector else []
        # checked by the decoder: items a list (or null) of Leases of this namespace,
        # metadata.resourceVersion set
        body = self._json("list", "GET", self._path(), kind="LeaseList", query=query)
        return list(body.get("items") or []), str(body["metadata"]["resourceVersion"])

    def watch(
        self,
        *,
        name: str | None = None,
        label_selector: str | None = None,
        resource_version: str | None = None,
        timeout_seconds: int = 300,
    ) -> Iterator[WatchEvent]:
        """Stream Lease events after ``resource_version`` until the server ends the watch.

        Raises ``Unavailable`` when the stream breaks or sends what is not an event of this
        namespace's Leases (of ``name``'s, when given), and ``TransportError`` with status 410 when
        ``resource_version`` is too old (the caller should list again).
        """
        query = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(int(timeout_seconds))),
        ]
        if name:
            query.append(("fieldSelector", f"metadata.name={name}"))
        if label_selector:
            query.append(("labelSelector", label_selector))
        if resource_version:
            query.append(("resourceVersion", resource_version))
        response = self._send(
            "watch",
            "GET",
            self._path(),
            query=query,
            timeout=(self.request_timeout, timeout_seconds + self.request_timeout),
        )
        raw = response.response
        with self._watches_lock:
            self._open_watches.add(raw)
            closed = self._watches_closed
        try:
            if closed:
                raise Unavailable("watch: this transport's watches were closed")
            yield from _watch_lines(raw, namespace=self.namespace, name=name or None)
        finally:
            with self._watches_lock:
                self._open_watches.discard(raw)
            raw.release_conn()

    def close_watches(self) -> None:
        """End every open watch stream of this transport now, from any thread; refuse new ones.

        A reader blocked on a stream sees it end at once (as ``Unavailable``) instead of after
        ``timeout_seconds``: this is how an elector stops promptly.
        """
        with self._watches_lock:
            self._watches_closed = True
            responses = list(self._open_watches)
        for raw in responses:
            # ValueError: urllib3 has no socket to shut down (the stream already ended)
            with contextlib.suppress(
                urllib3.exceptions.HTTPError, OSError, AttributeError, ValueError
            ):
                raw.shutdown()


def _watch_lines(
    response: Any, *, namespace: str | None = None, name: str | None = None
) -> Iterator[WatchEvent]:
    """The stream's events, one a line, each a Lease in ``namespace`` (named ``name``, when
    given). A line's chunks are joined once, when it ends: a line of many megabytes (an object
    edited large, or garbage) costs time in proportion to its size. A line (one event: one
    object) longer than :data:`~k8slease.kube.bodyread.MAX_OBJECT_BYTES` ends the stream as
    ``Unavailable``, the rest unread."""
    pending: list[bytes] = []
    size = 0  # of the pending line
    for chunk in _stream_chunks(response):
        if b"\n" not in chunk:
            pending.append(chunk)
            size += len(chunk)
            _check_line_size(response, size)
            continue
        *lines, rest = b"".join([*pending, chunk]).split(b"\n")
        pending, size = [rest], len(rest)
        for line in lines:
            _check_line_size(response, len(line))
            event = _parse_watch_line(line, namespace=namespace, name=name)
            if event is not None:
                yield event
    tail = b"".join(pending)
    if tail.strip():
        event = _parse_watch_line(tail, namespace=namespace, name=name)
        if event is not None:
            yield event


def _check_line_size(response: Any, size: int) -> None:
    """``Unavailable`` (the stream closed) when a line has passed the bound of one object."""
    if size > MAX_OBJECT_BYTES:
        abandon(response)
        raise Unavailable(
            f"watch: the API server sent a line longer than the {mib(MAX_OBJECT_BYTES)} "
            "k8slease reads for one event; the rest was not read"
        )


def _stream_chunks(response: Any) -> Iterator[bytes]:
    """The stream's bytes as they arrive; a broken stream raises ``Unavailable``.

    Besides urllib3's and the socket's errors, a read on a stream that
    :meth:`LeaseTransport.close_watches` shut down from another thread raises ``ValueError``
    (ssl: "Read on closed or unwrapped SSL socket") or ``AttributeError`` (urllib3 let go of
    the socket): the end that close promises, not a crash of the reader.
    """
    chunks = response.stream(4096, decode_content=False)
    while True:
        try:
            chunk = next(chunks)
        except StopIteration:
            return
        except (urllib3.exceptions.HTTPError, OSError, ValueError, AttributeError) as exc:
            raise Unavailable(f"watch: stream broke: {type(exc).__name__}: {exc}") from None
        yield chunk


def _parse_watch_line(
    line: bytes, *, namespace: str | None = None, name: str | None = None
) -> WatchEvent | None:
    """One line of a watch stream as its event; ``Unavailable`` naming what is wrong with a line
    that is not one: an ADDED, MODIFIED or DELETED object must be a Lease as the API server
    sends it (``object_problem``) in ``namespace`` (named ``name``, when given:
    ``identity_problem``), a BOOKMARK must carry a resourceVersion."""
    if not line.strip():
        return None
    data = loads_answer(line, failure="watch: the API server sent a line that is not JSON")
    if not isinstance(data, dict) or not isinstance(data.get("object"), dict):
        raise Unavailable("watch: the API server sent an event without an object")
    kind = str(data.get("type") or "")
    obj = data["object"]
    if kind == "ERROR":
        code = obj.get("code")
        reason = obj.get("reason")
        reason = reason if isinstance(reason, str) else ""
        text = obj.get("message")
        message = f"watch: {reason or 'error'}: {text if isinstance(text, str) else ''}"
        if code == 410:
            raise TransportError(message, status=410, reason=reason or "Expired")
        raise Unavailable(message, status=code if isinstance(code, int) else None, reason=reason)
    if kind == "BOOKMARK":
        problem = _bookmark_problem(obj)
    else:
        problem = object_problem(obj) or identity_problem(obj, namespace=namespace, name=name)
    if problem is not None:
        raise Unavailable(f"watch: the API server sent an event of type {kind!r} with {problem}")
    return WatchEvent(type=kind, lease=obj)


def _bookmark_problem(obj: Mapping[str, Any]) -> str | None:
    """A BOOKMARK's object is a Lease with only ``metadata.resourceVersion`` (and annotations)."""
    metadata = obj.get("metadata")
    version = metadata.get("resourceVersion") if isinstance(metadata, Mapping) else None
    if not isinstance(version, str) or not version:
        return "a Lease without metadata.resourceVersion"
    return None


def _name_in(body: Mapping[str, Any]) -> str | None:
    """The ``metadata.name`` of a body to create (``None``: none to compare the answer with)."""
    metadata = body.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    return name if isinstance(name, str) and name else None

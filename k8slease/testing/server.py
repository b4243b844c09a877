"""``APIServer``: the embedded Kubernetes API server, served by aiohttp in its own thread.

It maps the Kubernetes REST paths onto :class:`~.api.ResourceAPI`, streams watches, answers
discovery and ``Table`` requests, applies fault injection, counts requests, and exposes a
small control API under ``/_k8slease/`` (outside ``/api``) for other processes.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import ssl
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web

from . import discovery, guard, tls
from . import statusbody as st
from .api import ResourceAPI, view
from .faults import Faults, Request, Stats
from .jsonbody import parse_with_duplicates
from .kubeconfig import write_kubeconfig
from .launch import StartStop
from .objectstore import Event, ExpiredError, Store, Watcher
from .resources import Registry, ResourceType
from .selectors import Predicate, combine, field_selector, label_selector
from .statusbody import StatusError
from .tables import table

if TYPE_CHECKING:
    import kubernetes.client

JSON = dict[str, Any]
CONTROL_PREFIX = "/_k8slease/"
tls_pki = tls.process_pki
INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_NOT_FOUND = StatusError(404, "NotFound", "the server could not find the requested resource", {})


#: Wire formats of a real API server that this one does not speak (client-go sends built-in
#: types as protobuf unless told ``ContentType = "application/json"``).
_BINARY_MEDIA_TYPES = frozenset({"application/vnd.kubernetes.protobuf", "application/cbor"})


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _json_response(
    obj: Any, code: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    return web.Response(
        body=_dumps(obj), status=code, content_type="application/json", headers=headers
    )


def _error_response(error: StatusError) -> web.Response:
    return _json_response(error.body(), error.code, error.headers)


def _flag(value: str | None) -> bool:
    return value in ("true", "1", "True")


#: The options object the real server decodes a write's query into (named in its errors).
_OPTIONS = {
    "create": "CreateOptions",
    "update": "UpdateOptions",
    "patch": "PatchOptions",
    "delete": "DeleteOptions",
    "deletecollection": "DeleteOptions",
}


class _Route:
    """A parsed resource request."""

    __slots__ = ("name", "namespace", "rt", "sub", "verb")

    def __init__(
        self, rt: ResourceType, namespace: str | None, name: str, sub: str, verb: str
    ) -> None:
        self.rt, self.namespace, self.name, self.sub, self.verb = rt, namespace, name, sub, verb

    @property
    def resource(self) -> str:
        """``plural[.group][/sub]`` for stats."""
        return self.rt.group_resource + (f"/{self.sub}" if self.sub else "")


class APIServer(StartStop):
    """An in-process Kubernetes API server on 127.0.0.1, for tests, demos and benchmarks.

    Use it as a context manager (or :meth:`start`/:meth:`stop`)::

        with APIServer() as server:
            api = kubernetes.client.CoordinationV1Api(server.api_client())

    Requests must be addressed to a loopback host, come from no foreign ``Origin`` and carry
    the bearer token :attr:`token` that the server writes into its kubeconfig (see
    :mod:`.guard`); ``auth=False`` accepts requests without the token (the other checks stay).
    It serves HTTPS with a per-process throw-away CA written into the kubeconfig (:mod:`.tls`),
    because kubectl and client-go send a kubeconfig's token to ``https`` servers only;
    ``tls=False`` (or no ``openssl`` command) serves plain ``http``.

    ``history_size`` is the watch window (older resourceVersions answer 410 Expired);
    ``bookmark_interval`` is how often watches with ``allowWatchBookmarks`` get a BOOKMARK
    (the real server: about a minute, and 2 s before a ``timeoutSeconds`` deadline).
    """

    #: Distinguishes it from a real cluster in fixtures (``ExternalCluster.embedded`` is False).
    embedded = True

    def __init__(
        self,
        port: int = 0,
        *,
        kubeconfig: str | Path | None = None,
        history_size: int = 1000,
        bookmark_interval: float = 60.0,
        log_size: int = 10000,
        auth: bool = True,
        token: str | None = None,
        tls: bool = True,
    ) -> None:
        self.host = "127.0.0.1"
        self.port = port
        #: The CA and serving certificate (None: plain http, without openssl or with tls=False).
        self.pki = tls_pki() if tls else None
        #: The bearer token written into the kubeconfig; every request but the public health and
        #: version paths must carry it, unless ``auth`` is False (any token, or none, passes).
        self.token = token if token is not None else guard.new_token()
        self.auth = auth
        self.store = Store(history_size)
        self.registry = Registry()
        self.api = ResourceAPI(self.store, self.registry)
        self.faults = Faults()
        self.stats = Stats(log_size)
        self.bookmark_interval = bookmark_interval
        self._kubeconfig_path = kubeconfig
        self._kubeconfig: Path | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        for name in INITIAL_NAMESPACES:
            self.api.create(
                self._namespaces,
                "",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
            )

    # --- lifecycle ---------------------------------------------------------------------------

    @property
    def _namespaces(self) -> ResourceType:
        rt = self.registry.find("", "v1", "namespaces")
        assert rt is not None
        return rt

    @property
    def url(self) -> str:
        """``https://127.0.0.1:<port>`` (``http://`` without TLS; valid once started)."""
        return f"{'https' if self.pki else 'http'}://{self.host}:{self.port}"

    def ssl_context(self) -> ssl.SSLContext | None:
        """A client SSL context trusting the server's CA, for raw HTTP clients (None: http)."""
        return tls.client_context(self.pki) if self.pki else None

    @property
    def kubeconfig(self) -> Path:
        """Path of the kubeconfig file written at start (for kubectl, kopf, clients)."""
        if self._kubeconfig is None:
            raise RuntimeError("the API server is not started")
        return self._kubeconfig

    @property
    def resource_version(self) -> int:
        """The current global resourceVersion."""
        return self.store.resource_version

    def start(self) -> APIServer:
        """Serve in a background thread; returns once requests are answered."""
        if self._thread is not None:
            return self
        self._ready.clear()
        self._failure = None
        self._thread = threading.Thread(target=self._serve, name="k8slease-apiserver", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._failure is not None:
            self._thread.join()
            self._thread = None
            raise RuntimeError(
                f"the API server failed to start: {self._failure}"
            ) from self._failure
        ca_data = base64.b64encode(self.pki.ca.cert.read_bytes()).decode() if self.pki else None
        try:
            self._kubeconfig = write_kubeconfig(
                self.url, self._kubeconfig_path, token=self.token, ca_data=ca_data
            )
        except BaseException:
            self.stop()  # no server left serving without its kubeconfig
            raise
        return self

    def _remove_kubeconfig(self) -> None:
        """Delete a kubeconfig we wrote to a temporary directory (not one the caller chose)."""
        written, self._kubeconfig = self._kubeconfig, None
        if written is not None and self._kubeconfig_path is None:
            shutil.rmtree(written.parent, ignore_errors=True)

    def stop(self) -> None:
        """End open watches, stop serving and join the thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        self.faults.resume()
        future = asyncio.run_coroutine_threadsafe(self._shutdown(), loop)
        try:
            future.result(timeout=10)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)
            self._thread = None
            self._loop = None
            self._remove_kubeconfig()

    def api_client(self) -> kubernetes.client.ApiClient:
        """A new ``kubernetes.client.ApiClient`` for this server (close it when done)."""
        import kubernetes.client

        config = kubernetes.client.Configuration()
        config.host = self.url
        config.api_key = {"authorization": f"Bearer {self.token}"}
        if self.pki is not None:
            config.ssl_ca_cert = str(self.pki.ca.cert)
        return kubernetes.client.ApiClient(config)

    def headers(self) -> dict[str, str]:
        """The ``Authorization`` header a raw HTTP client must send (the kubeconfig's token)."""
        return {"Authorization": f"Bearer {self.token}"}

    def _serve(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        try:
            loop.run_until_complete(self._startup())
        except BaseException as exc:  # reported to start()
            self._failure = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    async def _startup(self) -> None:
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(
            app, handle_signals=False, access_log=None, handler_cancellation=True,
            shutdown_timeout=1.0,
        )  # fmt: skip
        await self._runner.setup()
        context = tls.server_context(self.pki) if self.pki else None
        site = web.TCPSite(
            self._runner, self.host, self.port, reuse_address=True, ssl_context=context
        )
        await site.start()
        sockets = self._runner.addresses
        self.port = int(sockets[0][1])
        self.faults.bind(asyncio.get_running_loop(), self._drop_watches, self._stall_watches)

    async def _shutdown(self) -> None:
        for watcher in self.store.watchers():
            watcher.close()
        if self._runner is not None:
            await self._runner.cleanup()

    def _drop_now(self, resource: str | None) -> int:
        """(Server thread) break open watches of ``resource`` (a plural, optionally
        ``plural.group``), or all; returns how many."""
        count = 0
        for watcher in self.store.watchers():
            group, _, plural = watcher.resource.partition("/")
            if resource is None or resource in (plural, f"{plural}.{group}"):
                watcher.close(drop=True)
                count += 1
        return count

    def _stall_now(self, resource: str | None) -> int:
        """(Server thread) silence open watches of ``resource``, or all; returns how many."""
        count = 0
        for watcher in self.store.watchers():
            group, _, plural = watcher.resource.partition("/")
            if resource is None or resource in (plural, f"{plural}.{group}"):
                watcher.stalled = True
                count += 1
        return count

    def _drop_watches(self, resource: str | None) -> int:
        """Break open watches (from any thread but the server's own)."""
        return self._on_loop("drop_watches", self._drop_now, resource)

    def _stall_watches(self, resource: str | None) -> int:
        """Silence open watches (from any thread but the server's own)."""
        return self._on_loop("stall_watches", self._stall_now, resource)

    def _on_loop(self, what: str, act: Callable[[str | None], int], resource: str | None) -> int:
        loop = self._loop
        if loop is None:
            return 0
        if threading.current_thread() is self._thread:
            raise RuntimeError(f"{what}() must be called from outside the server thread")

        async def run() -> int:
            return act(resource)

        return asyncio.run_coroutine_threadsafe(run(), loop).result(timeout=10)

    # --- request handling ----------------------------------------------------------------------

    def _admit(self, request: web.Request, path: str) -> None:
        """Refuse a request from outside (foreign Host or Origin) or without the token."""
        guard.check_host(request.headers.get("Host"))
        guard.check_origin(request.headers.get("Origin"))
        if self.auth and path not in guard.PUBLIC_PATHS:
            guard.check_token(request.headers.get("Authorization"), self.token)
        if path.startswith(CONTROL_PREFIX):
            guard.check_control_body(request.method, request.headers.get("Content-Type"))

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        try:
            self._admit(request, path)
        except StatusError as error:
            return _error_response(error)
        if path.startswith(CONTROL_PREFIX):
            return await self._control(request, path[len(CONTROL_PREFIX) :])
        started = time.perf_counter()
        route: _Route | None = None
        code = 500
        try:
            route = self._route(request)
            await self.faults.wait_resumed()
            response: web.StreamResponse
            if route is None:
                response = self._discovery(request, path)
            else:
                rules = self.faults.take(
                    route.verb, route.rt.plural, route.rt.group, route.sub,
                    route.namespace or "", route.name,
                )  # fmt: skip
                delay = sum(rule.latency for rule in rules)
                if delay:
                    await asyncio.sleep(delay)
                for rule in rules:
                    if rule.status:
                        raise st.injected(rule.status, rule.message, rule.retry_after)
                drop_after = min(
                    (r.drop_after for r in rules if r.drop_after is not None), default=None
                )
                stall_after = min(
                    (r.stall_after for r in rules if r.stall_after is not None), default=None
                )
                response = await self._serve_route(request, route, drop_after, stall_after)
            code = response.status
            return response
        except StatusError as error:
            code = error.code
            return _error_response(error)
        except asyncio.CancelledError:
            code = 200 if route is not None and route.verb == "watch" else 499
            raise  # the client went away (a watch it closed, or a held request)
        finally:
            if route is not None:
                self.stats.record(
                    Request(
                        route.verb, route.resource, route.namespace or "", route.name, code,
                        time.perf_counter() - started,
                    )
                )  # fmt: skip

    def _route(self, request: web.Request) -> _Route | None:
        """Parse a resource path; None for discovery and other non-resource paths."""
        segs = request.path.strip("/").split("/")
        if segs[0] == "api" and len(segs) >= 3:
            group, version, rest = "", segs[1], segs[2:]
        elif segs[0] == "apis" and len(segs) >= 4:
            group, version, rest = segs[1], segs[2], segs[3:]
        else:
            return None
        namespace: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
            namespace, rest = rest[1], rest[2:]
        if len(rest) > 3:
            raise _NOT_FOUND
        plural, name = rest[0], rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        rt = self.registry.find(group, version, plural)
        if rt is None or (sub and (sub != "status" or not rt.status_subresource)):
            raise _NOT_FOUND
        if (not rt.namespaced and namespace is not None) or (
            rt.namespaced and namespace is None and name
        ):
            raise _NOT_FOUND
        method = request.method
        if method == "GET":
            verb = "get" if name else "watch" if _flag(request.query.get("watch")) else "list"
        elif method == "POST" and not name:
            verb = "create"
        elif method == "PUT" and name:
            verb = "update"
        elif method == "PATCH" and name:
            verb = "patch"
        elif method == "DELETE":
            verb = "delete" if name else "deletecollection"
        else:
            raise st.method_not_allowed()
        return _Route(rt, namespace, name, sub, verb)

    async def _body_and_duplicates(self, request: web.Request) -> tuple[Any, tuple[str, ...]]:
        """The request body and the paths of the fields it has twice (JSON bodies only)."""
        raw = await request.read()
        if raw:
            try:
                return parse_with_duplicates(raw)
            except ValueError:
                pass  # not JSON: _body explains (or reads YAML)
        return await self._body(request), ()

    async def _body(self, request: web.Request) -> Any:
        raw = await request.read()
        if not raw:
            return None
        media = request.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if media in _BINARY_MEDIA_TYPES:
            raise st.unsupported_media_type(media, ["application/json", "application/yaml"])
        try:
            return json.loads(raw)
        except ValueError as exc:
            ctype = request.headers.get("Content-Type", "")
            if "yaml" in ctype:
                import yaml

                try:
                    return yaml.safe_load(raw)
                except yaml.YAMLError:
                    pass
            raise st.bad_request(f"error decoding body: {exc}") from None

    async def _serve_route(
        self,
        request: web.Request,
        route: _Route,
        drop_after: float | None,
        stall_after: float | None = None,
    ) -> web.StreamResponse:
        api, rt, verb = self.api, route.rt, route.verb
        namespace = route.namespace or ""
        query = request.query
        if verb == "get":
            obj = api.get(rt, namespace, route.name)
            if "as=Table" in request.headers.get("Accept", ""):
                meta = {"resourceVersion": obj["metadata"].get("resourceVersion", "")}
                return _json_response(
                    table(rt, [obj], meta, query.get("includeObject", "Metadata"))
                )
            return _json_response(obj)
        if verb in ("list", "watch", "deletecollection"):
            accepts = combine(
                label_selector(query.get("labelSelector")),
                field_selector(query.get("fieldSelector"), rt.field_selectors),
            )
            if verb == "watch":
                return await self._watch(request, route, accepts, drop_after, stall_after)
            if verb == "deletecollection":
                return _json_response(api.delete_collection(rt, route.namespace, accepts))
            limit = int(query["limit"]) if query.get("limit", "").isdigit() else None
            items, meta = api.list(rt, route.namespace, accepts, limit, query.get("continue"))
            if "as=Table" in request.headers.get("Accept", ""):
                return _json_response(
                    table(rt, items, meta, query.get("includeObject", "Metadata"))
                )
            if rt.custom:
                meta.setdefault("continue", "")
            return _json_response(
                {
                    "kind": rt.list_kind,
                    "apiVersion": rt.api_version,
                    "metadata": meta,
                    "items": [api.list_item(rt, item) for item in items],
                }
            )
        body, duplicates = await self._body_and_duplicates(request)
        options = _OPTIONS[verb]
        dry_run = query.get("dryRun")
        if dry_run and dry_run != "All":
            raise st.invalid_option(
                options, "dryRun", f'Unsupported value: ["{dry_run}"]: supported values: "All"'
            )
        validation = query.get("fieldValidation", "") if verb != "delete" else ""
        if validation not in ("", "Ignore", "Warn", "Strict"):
            raise st.invalid_option(
                options, "fieldValidation",
                f'Unsupported value: "{validation}": supported values: "", "Ignore", "Strict", '
                '"Warn"',
            )  # fmt: skip
        api = api.variant(
            dry_run=bool(dry_run), strict=validation == "Strict",
            warn=validation in ("", "Warn") and verb != "delete", duplicates=duplicates,
        )  # fmt: skip
        if verb == "create":
            response = _json_response(api.create(rt, namespace, body), 201)
        elif verb == "update":
            code, obj = api.update(rt, namespace, route.name, route.sub, body)
            response = _json_response(obj, code)
        elif verb == "patch":
            ctype = request.headers.get("Content-Type", "application/json")
            response = _json_response(api.patch(rt, namespace, route.name, route.sub, ctype, body))
        else:
            code, obj = api.delete(rt, namespace, route.name, body)
            response = _json_response(obj, code)
        for warning in api.warnings:
            response.headers.add("Warning", f"299 - {json.dumps(warning)}")
        return response

    def _discovery(self, request: web.Request, path: str) -> web.Response:
        if request.method != "GET":
            raise st.method_not_allowed()
        segs = [s for s in path.split("/") if s]
        doc: JSON | None = None
        if path in ("/healthz", "/livez", "/readyz"):
            return web.Response(text="ok")
        if segs == ["version"]:
            doc = discovery.version()
        elif segs == ["api"]:
            doc = discovery.api_versions(f"{self.host}:{self.port}")
        elif len(segs) == 2 and segs[0] == "api":
            doc = discovery.resource_list(self.registry, "", segs[1])
        elif segs == ["apis"]:
            doc = discovery.api_group_list(self.registry)
        elif len(segs) == 2 and segs[0] == "apis":
            doc = discovery.api_group(self.registry, segs[1])
        elif len(segs) == 3 and segs[0] == "apis":
            doc = discovery.resource_list(self.registry, segs[1], segs[2])
        if doc is None:
            raise _NOT_FOUND
        return _json_response(doc)

    # --- watch ---------------------------------------------------------------------------------

    async def _watch(
        self,
        request: web.Request,
        route: _Route,
        accepts: Predicate,
        drop_after: float | None,
        stall_after: float | None = None,
    ) -> web.StreamResponse:
        rt, namespace = route.rt, route.namespace
        query = request.query
        rv_param = query.get("resourceVersion", "")
        timeout = query.get("timeoutSeconds", "")
        bookmarks = _flag(query.get("allowWatchBookmarks"))
        send_initial = _flag(query.get("sendInitialEvents"))
        as_table = "as=Table" in request.headers.get("Accept", "")
        first_table = True

        def line(event_type: str, obj: JSON) -> bytes:
            nonlocal first_table
            shown = view(rt, obj)
            if as_table and event_type != "BOOKMARK":
                meta = {"resourceVersion": shown["metadata"].get("resourceVersion", "")}
                shown = table(rt, [shown], meta, query.get("includeObject", "Metadata"))
                if not first_table:
                    shown["columnDefinitions"] = None  # headers come with the first event
                first_table = False
            return _dumps({"type": event_type, "object": shown}) + b"\n"

        def bookmark(**annotations: str) -> bytes:
            meta: JSON = {"resourceVersion": str(self.store.resource_version)}
            if annotations:
                meta["annotations"] = annotations
            marker = {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta}
            return _dumps({"type": "BOOKMARK", "object": marker}) + b"\n"

        def matches(obj: JSON) -> bool:
            if namespace is not None and obj["metadata"].get("namespace") != namespace:
                return False
            return bool(accepts(obj))

        watcher = Watcher(rt.key, matches)
        initial: list[Event] = []
        expired: StatusError | None = None
        if rv_param in ("", "0") or send_initial:
            initial = [
                Event(0, "ADDED", rt.key, obj) for obj in self.store.objects(rt.key, namespace)
                if accepts(obj)
            ]  # fmt: skip
            self.store.watch(watcher, None)
        else:
            try:
                since = int(rv_param)
            except ValueError:
                # What kube-apiserver answers here (a list answers 400 BadRequest instead).
                raise st.StatusError(
                    500, "", f'resourceVersion: Invalid value: "{rv_param}": strconv.ParseUint: '
                    f'parsing "{rv_param}": invalid syntax',
                ) from None  # fmt: skip
            try:
                initial = self.store.watch(watcher, since)
            except ExpiredError as exc:
                expired = st.gone(str(exc))
        response = web.StreamResponse(status=200)
        response.content_type = "application/json"
        response.enable_chunked_encoding()
        try:
            await response.prepare(request)
            if expired is not None:
                await response.write(_dumps({"type": "ERROR", "object": expired.body()}) + b"\n")
                return response
            loop = asyncio.get_running_loop()
            now = loop.time()
            deadline = now + float(timeout) if timeout else None
            drop_at = now + drop_after if drop_after is not None else None
            stall_at = now + stall_after if stall_after is not None else None
            next_bookmark = self._next_bookmark(now, deadline) if bookmarks else None

            def silent() -> bool:
                # a stalled stream says nothing more: no event, no bookmark, no end
                if stall_at is not None and loop.time() >= stall_at:
                    watcher.stalled = True
                return watcher.stalled

            for past in initial:
                if not silent():
                    await response.write(line(past.type, past.obj))
            if send_initial and bookmarks and not silent():
                await response.write(bookmark(**{"k8s.io/initial-events-end": "true"}))
            while True:
                moments = [m for m in (deadline, drop_at, next_bookmark, stall_at) if m is not None]
                if watcher.stalled:
                    moments = [m for m in (drop_at,) if m is not None]
                wait = max(0.0, min(moments) - loop.time()) if moments else None
                try:
                    event: Event | None = await asyncio.wait_for(watcher.queue.get(), wait)
                except TimeoutError:
                    now = loop.time()
                    if drop_at is not None and now >= drop_at:
                        watcher.dropped = True
                        break
                    if silent():
                        continue
                    if deadline is not None and now >= deadline:
                        break
                    if next_bookmark is not None and now >= next_bookmark:
                        await response.write(bookmark())
                        next_bookmark = self._next_bookmark(now, deadline, after_deadline=True)
                    continue
                if event is None:
                    # ended (server stopping) or dropped; a stalled stream is broken, not ended
                    watcher.dropped = watcher.dropped or watcher.stalled
                    break
                if not silent():
                    await response.write(line(event.type, event.obj))
        except ConnectionResetError:
            return response  # the client went away mid-write: nothing left to tell it
        finally:
            self.store.unwatch(watcher)
        if watcher.dropped and request.transport is not None:
            request.transport.abort()
            return response
        await response.write_eof()
        return response

    def _next_bookmark(
        self, now: float, deadline: float | None, after_deadline: bool = False
    ) -> float | None:
        """Next BOOKMARK time: every ``bookmark_interval`` and 2 s before the deadline."""
        candidate = now + self.bookmark_interval
        if deadline is not None and not after_deadline:
            candidate = min(candidate, max(now, deadline - 2.0))
        if deadline is not None and candidate >= deadline:
            return None
        return candidate

    # --- control API ---------------------------------------------------------------------------

    async def _control(self, request: web.Request, what: str) -> web.Response:
        """``/_k8slease/{stats,faults,pause,resume,drop-watches,stall-watches}`` for other
        processes."""
        method = request.method
        try:
            if what == "stats":
                if method == "DELETE":
                    self.stats.reset()
                return _json_response(
                    {
                        "counts": self.stats.snapshot(),
                        "total": self.stats.count(),
                        "resourceVersion": self.store.resource_version,
                        "watches": sum(1 for _ in self.store.watchers()),
                    }
                )
            if what == "faults":
                if method == "POST":
                    spec = await self._body(request) or {}
                    if not isinstance(spec, dict):
                        raise st.bad_request("a fault is a JSON object")
                    fault = self.faults.add(**spec)
                    return _json_response(fault.to_json(), 201)
                if method == "DELETE":
                    self.faults.clear()
                return _json_response({"faults": [f.to_json() for f in self.faults.rules()]})
            if what.startswith("faults/") and method == "DELETE":
                self.faults.remove(int(what.split("/", 1)[1]))
                return _json_response({"faults": [f.to_json() for f in self.faults.rules()]})
            if what == "pause" and method == "POST":
                self.faults.pause()
                return _json_response({"paused": True})
            if what == "resume" and method == "POST":
                self.faults.resume()
                return _json_response({"paused": False})
            if what == "drop-watches" and method == "POST":
                count = self._drop_now(request.query.get("resource"))
                return _json_response({"dropped": count})
            if what == "stall-watches" and method == "POST":
                count = self._stall_now(request.query.get("resource"))
                return _json_response({"stalled": count})
        except (TypeError, ValueError) as exc:
            return _error_response(st.bad_request(str(exc)))
        except StatusError as error:
            return _error_response(error)
        return _error_response(_NOT_FOUND)

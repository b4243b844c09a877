"""A tiny HTTP health endpoint for liveness probes, the way client-go's healthz adaptor is used.

``/healthz`` answers 200 while ``check()`` is true and 503 otherwise: with
``Jobs.healthy`` or ``LeaderElector.healthy`` as the check, a replica that believes it leads but
has not renewed its Lease in time is restarted by the kubelet instead of lingering. ``/readyz``
answers the same way from ``ready()``: with ``Jobs.ready`` or ``LeaderElector.ready``, 200 once
the election runs and hears from the API server, 503 before that and while it cannot reach it.
Without a ``ready`` callable, ``/readyz`` answers 200 while serving. Standard library only; one
daemon thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import structlog

log = structlog.get_logger("k8slease.health")


class HealthServer:
    """Serves ``/healthz`` (from ``check``) and ``/readyz`` (from ``ready``) on ``host:port``
    (port 0: any free)."""

    def __init__(
        self,
        check: Callable[[], bool],
        *,
        ready: Callable[[], bool] | None = None,
        host: str = "0.0.0.0",
        port: int = 8080,
    ) -> None:
        self.check = check
        self.ready = ready

        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                if path == "/healthz":
                    ok = outer._ask(outer.check, "health.check_failed")
                    self._answer(200 if ok else 503, b"ok\n" if ok else b"unhealthy\n")
                elif path == "/readyz":
                    ready = outer.ready
                    ok = ready is None or outer._ask(ready, "health.ready_failed")
                    self._answer(200 if ok else 503, b"ok\n" if ok else b"not ready\n")
                else:
                    self._answer(404, b"not found\n")

            def _answer(self, code: int, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return None  # probes every few seconds would flood the logs

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="k8slease-health", daemon=True
        )

    @staticmethod
    def _ask(probe: Callable[[], bool], failure: str) -> bool:
        try:
            return bool(probe())
        except Exception:
            log.exception(failure)
            return False

    @property
    def port(self) -> int:
        """The port actually bound (useful with port 0)."""
        return int(self._server.server_address[1])

    def start(self) -> HealthServer:
        self._thread.start()
        log.info("health.serving", port=self.port)
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

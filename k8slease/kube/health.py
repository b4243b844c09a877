"""A tiny HTTP health endpoint for liveness probes, the way client-go's healthz adaptor is used.

``/healthz`` answers 200 while ``check()`` is true and 503 otherwise: with
``Jobs.healthy`` or ``LeaderElector.healthy`` as the check, a replica that believes it leads but
has not renewed its Lease in time is restarted by the kubelet instead of lingering. ``/readyz``
answers the same way from ``ready()``: with ``Jobs.ready`` or ``LeaderElector.ready``, 200 once
the election runs and hears from the API server, 503 before that and while it cannot reach it.
Without a ``ready`` callable, ``/readyz`` answers 200 while serving. ``/metrics`` serves the
Prometheus metrics (:mod:`k8slease.metrics`) of ``registry`` (default: prometheus-client's default
registry) when prometheus-client is installed (the ``[metrics]`` extra), else it answers 501 saying
so. Standard library only otherwise; one
daemon thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from k8slease.errors import ConfigError
from k8slease.kube.options import port as check_port
from k8slease.logs import get_logger

log = get_logger("k8slease.health")


NO_PROMETHEUS = (
    b"prometheus-client is not installed: pip install 'k8slease[metrics]' to serve /metrics\n"
)


def render_metrics(registry: Any = None) -> tuple[int, str, bytes]:
    """``(status, content type, body)`` of ``/metrics``: the exposition format, or 501."""
    try:
        import prometheus_client
    except ImportError:
        return 501, "text/plain; charset=utf-8", NO_PROMETHEUS
    chosen = registry if registry is not None else prometheus_client.REGISTRY
    return 200, prometheus_client.CONTENT_TYPE_LATEST, prometheus_client.generate_latest(chosen)


class HealthServer:
    """Serves ``/healthz`` (from ``check``), ``/readyz`` (from ``ready``) and ``/metrics`` (from
    ``registry``, a prometheus-client ``CollectorRegistry``; default: its default registry) on
    ``host:port``
    (port 0: any free)."""

    def __init__(
        self,
        check: Callable[[], bool],
        *,
        ready: Callable[[], bool] | None = None,
        host: str = "0.0.0.0",
        port: int = 8080,
        registry: Any = None,
    ) -> None:
        if not callable(check):
            raise ConfigError(f"check must be a callable returning a bool, got {check!r}")
        if not isinstance(host, str) or not host:
            raise ConfigError(f"host must be an address to bind, such as '0.0.0.0', got {host!r}")
        port = check_port("port", port)
        self.check = check
        self.registry = registry
        if ready is not None and not callable(ready):
            raise ConfigError(f"ready must be a callable returning a bool, got {ready!r}")
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
                elif path == "/metrics":
                    status, content_type, body = render_metrics(outer.registry)
                    self._answer(status, body, content_type)
                else:
                    self._answer(404, b"not found\n")

            def _answer(
                self, code: int, body: bytes, content_type: str = "text/plain; charset=utf-8"
            ) -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
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

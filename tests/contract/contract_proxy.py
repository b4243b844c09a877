"""A loopback TCP proxy in front of an API server, which a test can cut off and restore.

The contract matrix points a child's kubeconfig at it to make "the API server unreachable" the
same way on the embedded server and on the real control plane (TLS passes through untouched:
the server's certificate names 127.0.0.1, whatever the port). While cut, every open connection
is closed and every new one is closed at once, as a dead server or a network partition would.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import yaml

from tests.support.relay import relay


class CuttableProxy:
    """Forwards ``127.0.0.1:<port>`` to ``target_port``; :meth:`cut` and :meth:`restore`."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._cut = False
        self._closed = False
        threading.Thread(target=self._accept, name="contract-proxy", daemon=True).start()

    def cut(self) -> None:
        with self._lock:
            self._cut = True
            sockets, self._open = self._open, set()
        for sock in sockets:
            _close(sock)

    def restore(self) -> None:
        with self._lock:
            self._cut = False

    def close(self) -> None:
        self._closed = True
        self.cut()
        _close(self._listener)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                cut = self._cut
            if cut:
                _close(client)
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                _close(client)
                continue
            upstream.settimeout(None)
            with self._lock:
                self._open.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(
                    target=_pump, args=(a, b), name="contract-proxy", daemon=True
                ).start()

    def kubeconfig_through(self, kubeconfig: Path, out: Path) -> Path:
        """A copy of ``kubeconfig`` whose clusters point at this proxy (credentials kept)."""
        document: dict[str, Any] = yaml.safe_load(kubeconfig.read_text())
        for cluster in document.get("clusters") or []:
            parts = urlsplit(cluster["cluster"]["server"])
            cluster["cluster"]["server"] = urlunsplit(
                parts._replace(netloc=f"{parts.hostname}:{self.port}")
            )
        out.write_text(yaml.safe_dump(document))
        return out


def server_port(kubeconfig: Path) -> int:
    """The port of the (first) cluster's server in ``kubeconfig``."""
    document: dict[str, Any] = yaml.safe_load(kubeconfig.read_text())
    port = urlsplit(document["clusters"][0]["cluster"]["server"]).port
    assert port is not None
    return port


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        relay(source, sink)
    finally:
        _close(source)
        _close(sink)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()

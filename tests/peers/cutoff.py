"""A TCP relay to the API server that a test can cut: one replica loses the server, others not.

:class:`CutoffRelay` listens on 127.0.0.1 and relays every connection to the server's address;
:meth:`~CutoffRelay.cut` closes every relayed connection and stops listening, as a network
partition between one replica and the API server would (its requests then fail at once).
:func:`relayed_kubeconfig` writes a copy of a kubeconfig that points at the relay.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import yaml

from tests.support.relay import relay


class CutoffRelay:
    """Relays 127.0.0.1:``port`` to ``host``:``target_port`` until :meth:`cut`."""

    def __init__(self, host: str, target_port: int) -> None:
        self._target = (host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._cut = False
        threading.Thread(target=self._accept, name="cutoff-accept", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # cut
            try:
                upstream = socket.create_connection(self._target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                if self._cut:
                    client.close()
                    upstream.close()
                    return
                self._sockets |= {client, upstream}
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            relay(source, sink)
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        """Close every relayed connection and refuse new ones, from now on."""
        with self._lock:
            self._cut = True
            sockets, self._sockets = self._sockets, set()
        self._listener.close()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


def relayed_kubeconfig(kubeconfig: Path, target: Path) -> tuple[CutoffRelay, Path]:
    """A relay to the (current) server of ``kubeconfig`` and a copy of it at ``target`` that
    goes through the relay (TLS, when used, passes through untouched)."""
    document = yaml.safe_load(kubeconfig.read_text())
    context_name = document["current-context"]
    context = next(c for c in document["contexts"] if c["name"] == context_name)["context"]
    cluster = next(c for c in document["clusters"] if c["name"] == context["cluster"])["cluster"]
    url = urlsplit(cluster["server"])
    default_port = 443 if url.scheme == "https" else 80
    relay = CutoffRelay(url.hostname or "127.0.0.1", url.port or default_port)
    cluster["server"] = urlunsplit(url._replace(netloc=f"127.0.0.1:{relay.port}"))
    if url.scheme == "https" and url.hostname not in ("127.0.0.1", "localhost"):
        cluster.setdefault("tls-server-name", url.hostname)
    target.write_text(yaml.safe_dump(document))
    return relay, target

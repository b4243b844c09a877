"""A plain-HTTP reverse proxy in front of an embedded API server (``tls=False, auth=False``) that
answers the requests a rule picks itself (a status and body of the test's choosing: garbage
behind a 200, sent with its length, or streamed chunked from an iterable, however long) and
forwards the others as they are, watch streams included."""

from __future__ import annotations

import http.client
import threading
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from kubernetes import client

#: (method, path with query) -> the (status, body) to answer instead, or None to forward; a
#: body of bytes is sent with its Content-Length, an iterable of chunks chunked as it is iterated
Rule = Callable[[str, str], tuple[int, bytes | Iterable[bytes]] | None]


class GarbageProxy:
    """Forwards to ``upstream_url`` except what :attr:`rule` answers; counts those answers."""

    def __init__(self, upstream_url: str) -> None:
        parts = urlsplit(upstream_url)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.rule: Rule = lambda method, path: None
        self.answered: list[tuple[str, str]] = []
        #: bytes of the chunked answers written before they ended or the client closed them (the
        #: sockets' buffers hold some that the client never read)
        self.streamed = 0
        self.changed = threading.Condition()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def api_client(self) -> client.ApiClient:
        config = client.Configuration()
        config.host = self.url
        return client.ApiClient(config)

    def wait_answered(self, count: int, timeout: float) -> bool:
        """Whether the rule has answered ``count`` requests within ``timeout`` seconds."""
        with self.changed:
            return self.changed.wait_for(lambda: len(self.answered) >= count, timeout)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


def _handler(proxy: GarbageProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return None

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            answer = proxy.rule(self.command, self.path)
            if answer is None:
                self._forward(body)
                return
            status, data = answer
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            try:
                if isinstance(data, bytes):
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                else:
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    self._chunked(data, count=True)
            except OSError:  # the client closed the connection before the end
                self.close_connection = True
            with proxy.changed:
                proxy.answered.append((self.command, self.path))
                proxy.changed.notify_all()

        def _chunked(self, chunks: Iterable[bytes], *, count: bool = False) -> None:
            """Write ``chunks`` in chunked encoding, then its end."""
            for chunk in chunks:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
                if count:
                    proxy.streamed += len(chunk)
            self.wfile.write(b"0\r\n\r\n")

        def _forward(self, body: bytes | None) -> None:
            upstream = http.client.HTTPConnection(*proxy.upstream, timeout=600)
            headers = {
                k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")
            }
            try:
                upstream.request(self.command, self.path, body=body, headers=headers)
                response = upstream.getresponse()
                self.send_response(response.status)
                for key, value in response.getheaders():
                    if key.lower() not in ("transfer-encoding", "content-length", "connection"):
                        self.send_header(key, value)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self._chunked(iter(lambda: response.read1(65536), b""))
            except OSError:
                self.close_connection = True
            finally:
                upstream.close()

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _serve

    return Handler

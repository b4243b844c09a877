"""The delaying TCP proxy: a slow but answering server for the chaos scenario (issue 22)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from k8slease.testing.slowproxy import DelayProxy


@pytest.fixture
def echo() -> Iterator[int]:
    """A loopback echo server, a thread per connection."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def echo_one(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(4096):
                conn.sendall(data)

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=echo_one, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    yield port
    listener.close()


def _round_trip(port: int, payload: bytes) -> tuple[bytes, float]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        started = time.monotonic()
        conn.sendall(payload)
        got = b""
        while len(got) < len(payload):
            got += conn.recv(4096)
        return got, time.monotonic() - started


def test_requests_are_forwarded_in_order_and_delayed_while_slow(echo: int) -> None:
    with DelayProxy(("127.0.0.1", echo)) as proxy:
        got, fast = _round_trip(proxy.port, b"hello")
        assert got == b"hello" and fast < 0.3
        proxy.slow(0.4, duration=30)
        got, slow = _round_trip(proxy.port, b"x" * 100_000)
        assert got == b"x" * 100_000
        assert 0.4 <= slow < 2.0  # the server saw it 0.4 s late (real sockets: real time)
        proxy.slow(0)
        assert _round_trip(proxy.port, b"again")[1] < 0.3


def test_a_slow_spell_ends_by_itself() -> None:
    now = [100.0]
    proxy = DelayProxy(("127.0.0.1", 1), clock=lambda: now[0])
    proxy.slow(10, duration=300)
    assert proxy.delay() == 10
    now[0] += 300
    assert proxy.delay() == 0


@pytest.mark.parametrize("host", ["10.0.0.1", "example.com"])
def test_only_loopback_is_forwarded_to(host: str) -> None:
    with pytest.raises(ValueError, match="loopback only"):
        DelayProxy((host, 443))


def test_bad_delays_are_refused() -> None:
    proxy = DelayProxy(("127.0.0.1", 1))
    with pytest.raises(ValueError, match="delay must be"):
        proxy.slow(float("nan"))
    with pytest.raises(ValueError, match="duration must be"):
        proxy.slow(1, duration=0)

"""The delaying TCP proxy: a slow but answering server for the chaos scenario (issue 22)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from k8slease.testing.slowproxy import DelayProxy


@contextlib.contextmanager
def _serving(handle: Callable[[socket.socket], None]) -> Iterator[int]:
    """A loopback server calling ``handle`` on each connection in a thread of its own."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()


@pytest.fixture
def echo() -> Iterator[int]:
    """A loopback echo server."""

    def echo_one(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(4096):
                conn.sendall(data)

    with _serving(echo_one) as port:
        yield port


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


def _record(kind: int, body: bytes) -> bytes:
    return bytes([kind, 3, 3]) + len(body).to_bytes(2, "big") + body


def _exchange(conn: socket.socket, payload: bytes) -> float:
    started = time.monotonic()
    conn.sendall(payload)
    got = b""
    while len(got) < len(payload):
        got += conn.recv(4096)
    assert got == payload
    return time.monotonic() - started


@pytest.mark.parametrize("handshakes", [False, True])
def test_a_tls_clients_handshake_passes_at_once_and_its_requests_are_delayed(
    echo: int, handshakes: bool
) -> None:
    # a slow server answers requests late but completes handshakes at once (a connect timeout
    # bounds the handshake: delayed, no new connection could be opened during a long spell)
    hello, finished = _record(22, b"h" * 300), _record(20, b"\x01")
    request = _record(23, b"GET / " * 50)
    with DelayProxy(("127.0.0.1", echo), handshakes=handshakes) as proxy:
        proxy.slow(0.4, duration=30)
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as conn:
            # the header split across sends: records are found across reads
            handshake = _exchange(conn, hello[:3])
            rest = _exchange(conn, hello[3:] + finished)
            slow = _exchange(conn, request + request)
        if handshakes:
            assert handshake >= 0.4 and rest >= 0.4
        else:
            assert handshake < 0.3 and rest < 0.3
        assert 0.4 <= slow < 2.0


def test_records_are_split_at_their_boundaries_whatever_the_reads() -> None:
    from k8slease.testing.slowproxy import _Records

    stream = _record(22, b"a" * 7) + _record(23, b"b" * 9) + _record(23, b"") + _record(21, b"c")
    for size in (1, 2, 5, 6, 13, len(stream)):
        records = _Records()
        reads = [stream[i : i + size] for i in range(0, len(stream), size)]
        pieces = [p for data in reads for p in records.feed(data)]
        assert b"".join(p for p, _ in pieces) == stream
        app = b"".join(p for p, a in pieces if a)
        assert app == _record(23, b"b" * 9) + _record(23, b""), size


@pytest.fixture
def recorder() -> Iterator[tuple[int, list[bytes], threading.Event]]:
    """A loopback server that keeps what it receives (and says when something came)."""
    received: list[bytes] = []
    came = threading.Event()

    def keep(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(4096):
                received.append(data)
                came.set()

    with _serving(keep) as port:
        yield port, received, came


def test_a_partition_holds_both_ways_and_heal_delivers_in_order(echo: int) -> None:
    with (
        DelayProxy(("127.0.0.1", echo)) as proxy,
        socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as conn,
    ):
        assert _exchange(conn, b"before") < 1.0
        proxy.partition()
        conn.sendall(b"during")
        conn.settimeout(0.5)  # nothing may come back while partitioned
        with pytest.raises(TimeoutError):
            conn.recv(4096)
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as fresh:
            fresh.sendall(b"new")  # a connection opened during it: no answer either
            fresh.settimeout(0.5)
            with pytest.raises(TimeoutError):
                fresh.recv(4096)
            proxy.heal()
            fresh.settimeout(10)
            assert fresh.recv(4096) == b"new"
        conn.settimeout(10)
        got = b""
        while len(got) < len(b"during"):
            got += conn.recv(4096)
        assert got == b"during"
        assert _exchange(conn, b"after") < 1.0


def test_what_a_client_sent_before_giving_up_reaches_the_server_after_the_heal(
    recorder: tuple[int, list[bytes], threading.Event],
) -> None:
    port, received, came = recorder
    with DelayProxy(("127.0.0.1", port)) as proxy:
        proxy.partition()
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as conn:
            conn.sendall(b"PUT /lease")
        # the client is gone; the server has nothing yet
        assert not came.wait(0.3) and received == []
        proxy.heal()
        assert came.wait(10)
        assert b"".join(received) == b"PUT /lease"


def test_partition_needs_a_started_proxy() -> None:
    with pytest.raises(RuntimeError, match="not started"):
        DelayProxy(("127.0.0.1", 1)).partition()

"""A TCP proxy on loopback that delays what clients send: a slow but answering API server.

Put it in front of kube-apiserver (or the embedded server) and point the replicas' kubeconfig at
it: every request then reaches the server ``delay`` seconds late, so its answer comes that much
later, while bytes keep flowing both ways (TLS passes through untouched). A delay can last for a
``duration`` and then end by itself::

    with DelayProxy(("127.0.0.1", apiserver_port)) as proxy:
        server_url = f"https://127.0.0.1:{proxy.port}"
        ...
        proxy.slow(10.0, duration=300)   # 10 s per request for 5 minutes

Bytes are delayed per chunk in order, on the proxy's own clock (``time.monotonic``); a chunk
read at ``t`` is forwarded at ``t + delay`` (the delay in force when it was read). Only
loopback is served.

A slow API server is slow to *answer*, not to accept connections: an overloaded kube-apiserver
(or one waiting on etcd) still completes TLS handshakes at once. So on a TLS connection only the
client's application-data records (TLS content type 23: the requests) are delayed; its
handshake records pass at once (they are read from the plaintext record headers; the bytes are
never changed, and nothing overtakes a record still held back). Delaying every record instead
(``handshakes=True``) models a slow network: each new connection then pays the delay once per
round trip of its handshake, which a client's connect timeout bounds. A plaintext connection
is delayed whole either way.

:meth:`DelayProxy.partition` cuts the clients off instead, as a network partition does: nothing
is forwarded either way, new connections open but their handshakes get no answer, and what was
sent meanwhile is held, not lost (TCP retransmits it), so it arrives once :meth:`heal` is
called: a request a client gave up on during the partition may still reach the server after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable

from .launch import StartStop

CHUNK = 65536
#: TLS record content types (RFC 8446, 5.1): the first byte of a client's TLS stream is a
#: handshake record; application data carries the requests.
_HANDSHAKE, _APPLICATION_DATA = 22, 23


class _Records:
    """Splits a client's TLS byte stream at record boundaries: ``feed`` returns pieces tagged
    with whether they belong to an application-data record (incremental: a record may span
    reads)."""

    def __init__(self) -> None:
        self._header = b""
        self._left = 0  # body bytes of the current record still to come
        self._kind = 0

    def feed(self, data: bytes) -> list[tuple[bytes, bool]]:
        pieces: list[tuple[bytes, bool]] = []
        i = 0
        while i < len(data):
            if self._left == 0:  # in (or at the start of) a record header
                take = data[i : i + 5 - len(self._header)]
                self._header += take
                self._kind = self._header[0]
                if len(self._header) == 5:
                    self._left = int.from_bytes(self._header[3:5], "big")
                    self._header = b"" if self._left == 0 else self._header
            else:
                take = data[i : i + self._left]
                self._left -= len(take)
                if self._left == 0:
                    self._header = b""
            i += len(take)
            app = self._kind == _APPLICATION_DATA
            if pieces and pieces[-1][1] == app:
                pieces[-1] = (pieces[-1][0] + take, app)
            else:
                pieces.append((take, app))
        return pieces


class DelayProxy(StartStop):
    """Forwards connections on ``127.0.0.1:port`` to ``target``, delaying client-to-server
    bytes by the delay in force (0 until :meth:`slow`). Thread-safe; runs its own loop."""

    def __init__(
        self,
        target: tuple[str, int],
        *,
        clock: Callable[[], float] = time.monotonic,
        handshakes: bool = False,
    ) -> None:
        host, _ = target
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError(f"DelayProxy forwards to loopback only, not {host!r}")
        self.target = target
        self._clock = clock
        self._handshakes = handshakes
        self._delay = 0.0
        self._until: float | None = None
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._flowing: asyncio.Event | None = None  # cleared while partitioned (the loop's)
        self.port = 0
        self.connections = 0

    # -- control ---------------------------------------------------------------------------

    def slow(self, delay: float, *, duration: float | None = None) -> None:
        """Delay what clients send by ``delay`` seconds, for ``duration`` seconds (None: until
        changed). ``slow(0)`` ends it."""
        if not delay >= 0:
            raise ValueError(f"delay must be >= 0 seconds, got {delay!r}")
        if duration is not None and not duration > 0:
            raise ValueError(f"duration must be > 0 seconds, got {duration!r}")
        with self._lock:
            self._delay = float(delay)
            self._until = None if duration is None else self._clock() + float(duration)

    def partition(self) -> None:
        """Forward nothing either way until :meth:`heal` (what is sent meanwhile is held)."""
        self._set_flowing(False)

    def heal(self) -> None:
        """End a :meth:`partition`: what was held is forwarded, in order, then the rest."""
        self._set_flowing(True)

    def _set_flowing(self, flowing: bool) -> None:
        loop, event = self._loop, self._flowing
        if loop is None or event is None:
            raise RuntimeError("the proxy is not started")
        done = threading.Event()

        def apply() -> None:
            (event.set if flowing else event.clear)()
            done.set()

        loop.call_soon_threadsafe(apply)
        if not done.wait(10):
            raise RuntimeError("the proxy's loop did not answer")

    def delay(self) -> float:
        """The delay in force now."""
        with self._lock:
            if self._until is not None and self._clock() >= self._until:
                self._delay, self._until = 0.0, None
            return self._delay

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> DelayProxy:
        """Serve in a background thread; returns once listening (``port`` is set)."""
        self._thread = threading.Thread(target=self._run, name="k8slease-delayproxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the delay proxy did not start")
        return self

    def stop(self) -> None:
        """Stop listening, drop every connection, join the thread."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)

    # -- serving ---------------------------------------------------------------------------

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._flowing = asyncio.Event()
        self._flowing.set()
        try:
            self._server = loop.run_until_complete(
                asyncio.start_server(self._accept, "127.0.0.1", 0)
            )
            self.port = self._server.sockets[0].getsockname()[1]
            self._ready.set()
            loop.run_forever()
        finally:
            if self._server is not None:
                self._server.close()
            tasks = asyncio.all_tasks(loop)
            for task in tasks:
                task.cancel()
            with contextlib.suppress(Exception):  # let every task end: none destroyed pending
                loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        pipes = asyncio.gather(
            self._pipe(reader, up_writer, delayed=True),
            self._pipe(up_reader, writer, delayed=False),
            return_exceptions=True,
        )
        try:
            await pipes
        except asyncio.CancelledError:  # stop(): end quietly (a cancelled connection task
            pipes.cancel()  # makes asyncio's stream callback print a traceback)
            with contextlib.suppress(asyncio.CancelledError):
                await pipes

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, delayed: bool
    ) -> None:
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def forward() -> None:
            while True:
                due, data = await queue.get()
                wait = due - self._clock()
                if wait > 0:
                    await asyncio.sleep(wait)
                assert self._flowing is not None
                await self._flowing.wait()  # held while partitioned
                if not data:
                    break
                writer.write(data)
                await writer.drain()

        sender = asyncio.ensure_future(forward())
        records: _Records | None = None
        first = True
        try:
            while True:
                data = await reader.read(CHUNK)
                now = self._clock()
                delay = self.delay() if delayed else 0.0
                if first and delayed and data[:1] == bytes([_HANDSHAKE]) and not self._handshakes:
                    records = _Records()  # a TLS client: hold back its requests only
                first = False
                if records is None or not data:
                    await queue.put((now + delay, data))
                else:
                    for piece, app in records.feed(data):
                        await queue.put((now + (delay if app else 0.0), piece))
                if not data:
                    break
            await sender
        finally:
            sender.cancel()
            with contextlib.suppress(Exception):
                writer.close()

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
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from types import TracebackType

CHUNK = 65536


class DelayProxy:
    """Forwards connections on ``127.0.0.1:port`` to ``target``, delaying client-to-server
    bytes by the delay in force (0 until :meth:`slow`). Thread-safe; runs its own loop."""

    def __init__(self, target: tuple[str, int], *, clock: Callable[[], float] = time.monotonic):
        host, _ = target
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError(f"DelayProxy forwards to loopback only, not {host!r}")
        self.target = target
        self._clock = clock
        self._delay = 0.0
        self._until: float | None = None
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
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

    def __enter__(self) -> DelayProxy:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    # -- serving ---------------------------------------------------------------------------

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
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
            for task in asyncio.all_tasks(loop):
                task.cancel()
            with contextlib.suppress(Exception):
                loop.run_until_complete(asyncio.sleep(0))
            loop.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        await asyncio.gather(
            self._pipe(reader, up_writer, delayed=True),
            self._pipe(up_reader, writer, delayed=False),
            return_exceptions=True,
        )

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
                if not data:
                    break
                writer.write(data)
                await writer.drain()

        sender = asyncio.ensure_future(forward())
        try:
            while True:
                data = await reader.read(CHUNK)
                due = self._clock() + (self.delay() if delayed else 0.0)
                await queue.put((due, data))
                if not data:
                    break
            await sender
        finally:
            sender.cancel()
            with contextlib.suppress(Exception):
                writer.close()

"""Use a :class:`~k8slease.LeaderElector` from asyncio code, with no second algorithm.

:class:`AsyncLeaderElector` runs the same elector in its background threads and bridges to the
running event loop: coroutine callbacks run as tasks on that loop (``on_started_leading``'s task
is cancelled the moment leadership ends), and leadership can be awaited::

    async with AsyncLeaderElector("billing", on_started_leading=lead) as elector:
        await elector.wait_until_leading()
        ...

``stop()`` is awaitable and never blocks the loop. Synchronous callbacks keep running in the
elector's threads, exactly as with :class:`~k8slease.LeaderElector`.
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any

from k8slease.election.elector import LeaderElector
from k8slease.kube.signals import LoopWaker


class AsyncLeaderElector:
    """An asyncio front for :class:`~k8slease.LeaderElector`; takes the same arguments."""

    def __init__(self, name: str, **options: Any) -> None:
        self.elector = LeaderElector(name, **options)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._leading: asyncio.Event | None = None
        self._not_leading: asyncio.Event | None = None
        self._waker: LoopWaker | None = None

    # -- state (cheap, thread-safe reads of the elector) ---------------------------------------

    @property
    def is_leader(self) -> bool:
        """Whether this replica leads now."""
        return self.elector.is_leader

    @property
    def leader(self) -> str:
        """The observed holder ("" when nobody)."""
        return self.elector.leader

    @property
    def fencing_token(self) -> int | None:
        """The current grant's fencing token while leading."""
        return self.elector.fencing_token

    @property
    def identity(self) -> str:
        """This replica's identity."""
        return self.elector.identity

    def healthy(self, margin: float | None = None) -> bool:
        """See :meth:`LeaderElector.healthy`."""
        return self.elector.healthy(margin)

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> AsyncLeaderElector:
        """Start the election; call from a coroutine (it binds to the running loop)."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._leading = asyncio.Event()
        self._not_leading = asyncio.Event()
        self._not_leading.set()
        self.elector.bind_loop(loop)
        self.elector.add_listener(self._on_change)
        if self.elector.handle_signals:  # see LoopWaker: a SIGTERM on another thread
            self._waker = LoopWaker(loop)
            self._waker.start()
        self.elector.start()
        return self

    async def stop(self) -> None:
        """Stop (steps down and releases when leading) without blocking the event loop."""
        try:
            await asyncio.to_thread(self.elector.stop)
        finally:
            if self._waker is not None:
                self._waker.stop()

    async def wait_until_leading(self, timeout: float | None = None) -> bool:
        """Wait until this replica leads (or ``timeout`` passes); returns whether it leads, as
        :meth:`LeaderElector.wait_until_leading` does."""
        assert self._leading is not None, "start() first"
        return await _wait_for(self._leading, timeout) and self.is_leader

    async def wait_until_not_leading(self, timeout: float | None = None) -> bool:
        """Wait until this replica does not lead (at once when it does not), or ``timeout``
        passes; returns whether it does not lead."""
        assert self._not_leading is not None, "start() first"
        return await _wait_for(self._not_leading, timeout) and not self.is_leader

    def ready(self) -> bool:
        """See :meth:`LeaderElector.ready`."""
        return self.elector.ready()

    async def __aenter__(self) -> AsyncLeaderElector:
        return self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    def _on_change(self, leading: bool) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        loop.call_soon_threadsafe(self._apply, leading)

    def _apply(self, leading: bool) -> None:
        assert self._leading is not None and self._not_leading is not None
        if leading and self.elector.is_leader:
            self._not_leading.clear()
            self._leading.set()
        elif not leading:
            self._leading.clear()
            self._not_leading.set()


async def _wait_for(event: asyncio.Event, timeout: float | None) -> bool:
    """Whether ``event`` was set within ``timeout`` seconds (``None``: no limit)."""
    try:
        await asyncio.wait_for(event.wait(), timeout)
    except TimeoutError:
        return False
    return True

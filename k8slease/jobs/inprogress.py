"""The runs of a job in progress on this replica, and waiting for cancelled ones to end.

An ``AsyncIOScheduler`` that ``Jobs`` owns (``async with jobs``) is shut down without waiting:
``shutdown`` cannot block the loop it runs on. It cancels the coroutine runs in progress, and
their cancellation, the lock released with the run record, then happens on the loop. When
``Jobs.stop()`` runs off the loop's thread (the SIGTERM handler's stop thread, ``async with``'s
exit, which stops in a worker thread), :func:`wait_for_runs` waits for those runs to end before
``stop()`` returns, so a SIGTERM is sent again only once the records are written. It stops
waiting if the loop stops running (a dead loop would never end them). Called on the loop's own
thread, ``stop()`` cannot wait: the runs end after it returns, if the loop goes on running.

A run that is cancelled while its lock I/O runs in a thread (the claim, the release) waits for
that I/O to return (:func:`in_thread_to_the_end`): a claim granted after the cancellation is
released at once, never left held until ``lock_at_most_for``. A run cancelled from outside (a
shutdown) releases its lock the same way, in a worker thread (:func:`in_thread_then_cancel`):
the loop's other tasks go on during that HTTP request, and a second cancellation (or
``asyncio.run`` cancelling what is left, then running it to its end) does not cut it short.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from k8slease.kube.signals import SIGNAL_POLL
from k8slease.logs import Logger

T = TypeVar("T")


class RunsInProgress:
    """How many runs of one job are in progress, with a wait for none to be."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._count = 0

    @property
    def count(self) -> int:
        with self._cond:
            return self._count

    @contextmanager
    def counted(self) -> Iterator[None]:
        """Count one run for the duration of the block."""
        with self._cond:
            self._count += 1
        try:
            yield
        finally:
            with self._cond:
                self._count -= 1
                self._cond.notify_all()

    def wait_idle(self, alive: Callable[[], bool]) -> bool:
        """Block until no run is in progress (True), or ``alive()`` turns false (False)."""
        with self._cond:
            while self._count:
                if not alive():
                    return False
                self._cond.wait(SIGNAL_POLL)  # wakes at once when a run ends
        return True


async def in_thread_to_the_end(call: Callable[[], T]) -> tuple[T, bool]:
    """``call()`` in a worker thread, awaited until it returns even if the awaiting task is
    cancelled meanwhile; returns its result and whether a cancellation arrived (the caller
    raises ``CancelledError`` once it has dealt with the result)."""
    future = asyncio.ensure_future(asyncio.to_thread(call))
    cancelled = False
    while True:
        try:
            return await asyncio.shield(future), cancelled
        except asyncio.CancelledError:
            if future.cancelled():
                raise
            cancelled = True


async def in_thread_then_cancel(call: Callable[[], T]) -> T:
    """``call()`` in a worker thread, to its end (:func:`in_thread_to_the_end`), the loop free
    meanwhile; a cancellation that arrived during it is raised once it has returned. For a
    release: it lands (its run record written) however often the task is cancelled, and no
    other task of the loop waits for its HTTP request."""
    result, cancelled = await in_thread_to_the_end(call)
    if cancelled:
        raise asyncio.CancelledError
    return result


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def wait_for_runs(
    loop: asyncio.AbstractEventLoop, runs: Iterable[RunsInProgress], *, log: Logger
) -> bool:
    """After the shutdown of an ``AsyncIOScheduler`` on ``loop`` was asked: wait until the loop
    has carried it out and every run it cancelled has ended. Returns whether they have; False at
    once on the loop's own thread (it cannot wait for itself), and as soon as the loop stops
    running."""
    runs = list(runs)
    if _on_loop(loop):
        if any(r.count for r in runs):
            log.info("jobs.runs_not_awaited", why="stop() called on the event loop's thread")
        return False
    alive = loop.is_running
    carried_out = threading.Event()  # the loop runs its callbacks in order: the shutdown first
    try:
        loop.call_soon_threadsafe(carried_out.set)
    except RuntimeError:  # the loop is closed
        return False
    while not carried_out.wait(SIGNAL_POLL):
        if not alive():
            break
    ended = all(r.wait_idle(alive) for r in runs)
    if not ended:
        log.warning("jobs.runs_abandoned", why="the event loop stopped running")
    return ended

"""Run user callbacks: with or without their argument, plain or coroutine, cancelled on loss.

The one place where the elector's callbacks, leader singletons and coroutine jobs turn a function
into a call: :func:`accepts_argument` decides whether it gets its context, :class:`CancelHooks`
collects what must happen when leadership or a lock is lost, and :func:`run_cancellable` (from a
thread) or :func:`cancellable` (inside an event loop) runs a coroutine as a task that those hooks
cancel.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from k8slease.logs import get_logger

T = TypeVar("T")

_log = get_logger("k8slease.callbacks")


def accepts_argument(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` can be called with one positional argument (else it is called with none)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return True
    for parameter in signature.parameters.values():
        if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            return True
        if parameter.kind is parameter.VAR_POSITIONAL:
            return True
    return False


def call_with_optional(callback: Callable[..., T], arg: Any) -> T:
    """``callback(arg)``, or ``callback()`` when it takes no argument."""
    return callback(arg) if accepts_argument(callback) else callback()


class CancelHooks:
    """Hooks that run once, when something is lost; a hook added after that runs at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hooks: list[Callable[[], object]] = []
        self._fired = False

    @property
    def fired(self) -> bool:
        return self._fired

    def add(self, hook: Callable[[], object]) -> None:
        with self._lock:
            if not self._fired:
                self._hooks.append(hook)
                return
        hook()

    def remove(self, hook: Callable[[], object]) -> None:
        with self._lock:
            if hook in self._hooks:
                self._hooks.remove(hook)

    def fire(self) -> None:
        """Run every hook once (errors are logged, never raised)."""
        with self._lock:
            self._fired = True
            hooks, self._hooks = self._hooks, []
        for hook in hooks:
            try:
                hook()
            except Exception:  # pragma: no cover - cancellation hooks do not raise
                _log.exception("callback.cancel_failed")


async def cancellable(coro: Coroutine[Any, Any, T], hooks: CancelHooks | None) -> T:
    """Await ``coro`` as a task of the running loop that ``hooks`` cancel (from any thread)."""
    task = asyncio.ensure_future(coro)
    if hooks is None:
        return await task
    loop = asyncio.get_running_loop()

    def cancel() -> None:
        loop.call_soon_threadsafe(task.cancel)

    hooks.add(cancel)
    try:
        return await task
    finally:
        hooks.remove(cancel)


def run_cancellable(
    coro: Coroutine[Any, Any, T],
    *,
    loop: asyncio.AbstractEventLoop | None,
    hooks: CancelHooks | None,
) -> T:
    """Run ``coro`` from this thread until it has ended; ``hooks`` cancel it.

    On ``loop`` when it is running (an integration's loop, see :mod:`k8slease.election.aio`),
    else on a private loop in this thread. A cancelled coroutine raises
    ``concurrent.futures.CancelledError`` (on ``loop``) or ``asyncio.CancelledError``, and only
    once it has ended: its ``except CancelledError`` and ``finally`` code has run by then. A
    term's work, or a leader singleton, is over when its clean-up is, so nothing that waits for
    it (the release of the Lease) goes ahead while the clean-up still acts as the leader. Should
    ``loop`` stop running before the cancelled coroutine ends, nothing will end it: this returns
    at the cancellation (raising ``concurrent.futures.CancelledError``).
    """
    if loop is None or not loop.is_running():
        return asyncio.run(cancellable(coro, hooks))
    future = asyncio.run_coroutine_threadsafe(cancellable(coro, hooks), loop)
    if hooks is None:
        return future.result()

    def stranded() -> None:
        if not loop.is_running():
            future.cancel()

    hooks.add(stranded)
    try:
        return future.result()
    finally:
        hooks.remove(stranded)

"""The one way user callbacks are called: with or without an argument, cancelled on loss."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any

from k8slease.callbacks import (
    CancelHooks,
    accepts_argument,
    call_with_optional,
    cancellable,
    run_cancellable,
)


def test_callbacks_get_their_argument_only_when_they_take_one() -> None:
    def none() -> str:
        return "none"

    def one(ctx: object) -> object:
        return ctx

    assert not accepts_argument(none) and accepts_argument(one)
    assert accepts_argument(lambda *args: args) and accepts_argument(print)
    assert call_with_optional(none, "ctx") == "none"
    assert call_with_optional(one, "ctx") == "ctx"


def test_hooks_run_once_and_a_late_hook_runs_at_once() -> None:
    hooks = CancelHooks()
    ran: list[str] = []
    hooks.add(lambda: ran.append("early"))
    removed = lambda: ran.append("removed")  # noqa: E731
    hooks.add(removed)
    hooks.remove(removed)
    hooks.fire()
    hooks.fire()
    assert ran == ["early"] and hooks.fired
    hooks.add(lambda: ran.append("late"))
    assert ran == ["early", "late"]


def test_a_coroutine_on_a_private_loop_is_cancelled_when_the_hooks_fire() -> None:
    hooks = CancelHooks()
    started = threading.Event()

    async def forever() -> None:
        started.set()
        await asyncio.Event().wait()

    outcome: list[BaseException] = []

    def run() -> None:
        try:
            run_cancellable(forever(), loop=None, hooks=hooks)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    assert started.wait(5)
    hooks.fire()
    thread.join(5)
    assert not thread.is_alive() and isinstance(outcome[0], asyncio.CancelledError)


def test_a_coroutine_on_a_running_loop_is_cancelled_when_the_hooks_fire() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        hooks = CancelHooks()
        started = asyncio.Event()

        async def forever() -> None:
            started.set()
            await asyncio.Event().wait()

        def run() -> BaseException | None:
            try:
                run_cancellable(forever(), loop=loop, hooks=hooks)
            except BaseException as exc:
                return exc
            return None

        waiter = loop.run_in_executor(None, run)
        await started.wait()
        hooks.fire()
        assert isinstance(await waiter, concurrent.futures.CancelledError)

    asyncio.run(scenario())


def test_cancellable_returns_the_result_and_leaves_no_hook_behind() -> None:
    hooks = CancelHooks()

    async def answer() -> int:
        return 42

    async def scenario() -> Any:
        return await cancellable(answer(), hooks)

    assert asyncio.run(scenario()) == 42
    hooks.fire()  # nothing registered any more: nothing to cancel, nothing raised

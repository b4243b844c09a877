"""The one way user callbacks are called: with or without an argument, cancelled on loss."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any

from k8slease.callbacks import (
    CancelHooks,
    accepts_argument,
    call_with_optional,
    cancellable,
    run_cancellable,
)


def cancellable_in_thread(
    coro: Coroutine[Any, Any, object],
    *,
    loop: asyncio.AbstractEventLoop | None,
    hooks: CancelHooks,
) -> tuple[threading.Thread, list[BaseException]]:
    """``run_cancellable(coro)`` in a thread of its own (started); what it raises is appended to
    the list."""
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            run_cancellable(coro, loop=loop, hooks=hooks)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


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

    thread, outcome = cancellable_in_thread(forever(), loop=None, hooks=hooks)
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


def test_a_cancelled_coroutine_on_a_running_loop_has_ended_when_the_call_returns() -> None:
    """Its clean-up still runs as the leader: the caller (a term's work thread, whose end lets
    the release go out) must not return before it is over."""

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        hooks = CancelHooks()
        started = asyncio.Event()
        cleaning = threading.Event()
        finish = asyncio.Event()
        returned = threading.Event()
        steps: list[str] = []

        async def work() -> None:
            started.set()
            try:
                await asyncio.Event().wait()
            finally:
                cleaning.set()
                await finish.wait()
                steps.append("clean-up done")

        def run() -> BaseException | None:
            try:
                run_cancellable(work(), loop=loop, hooks=hooks)
            except BaseException as exc:
                return exc
            finally:
                steps.append("returned")
                returned.set()
            return None

        waiter = loop.run_in_executor(None, run)
        await started.wait()
        hooks.fire()
        assert await asyncio.to_thread(cleaning.wait, 5)
        assert not await asyncio.to_thread(returned.wait, 0.3), "returned during the clean-up"
        finish.set()
        assert isinstance(await waiter, concurrent.futures.CancelledError)
        assert steps == ["clean-up done", "returned"]

    asyncio.run(scenario())


def test_a_call_waiting_on_a_loop_that_stopped_returns_at_the_cancellation() -> None:
    loop = asyncio.new_event_loop()
    started = threading.Event()
    loop_thread = threading.Thread(target=loop.run_forever)
    loop_thread.start()
    hooks = CancelHooks()

    async def work() -> None:
        started.set()
        await asyncio.Event().wait()

    caller, outcome = cancellable_in_thread(work(), loop=loop, hooks=hooks)
    assert started.wait(5)
    loop.call_soon_threadsafe(loop.stop)
    loop_thread.join(5)
    hooks.fire()
    caller.join(5)
    assert not caller.is_alive() and isinstance(outcome[0], concurrent.futures.CancelledError)
    pending = asyncio.all_tasks(loop)  # the cancellation asked for above, run to its end
    loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    loop.close()

"""``async def`` jobs run: on an asyncio scheduler picked for ``async with jobs``, and in the
worker threads of a thread scheduler (each run in its own event loop)."""

from __future__ import annotations

import asyncio
import threading

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from k8slease import JobContext, Mode
from k8slease.testing.server import APIServer
from tests.support.factories import make_jobs


def test_async_jobs_run_under_async_with_on_the_running_loop(
    k8s_embedded_apiserver: APIServer,
) -> None:
    jobs = make_jobs("asyncjobs", k8s_embedded_apiserver.api_client(), identity="a")
    loops: list[asyncio.AbstractEventLoop] = []

    async def main() -> None:
        ran = asyncio.Event()

        @jobs.interval(seconds=1, mode=Mode.EVERY_REPLICA)
        async def refresh(ctx: JobContext) -> None:
            loops.append(asyncio.get_running_loop())
            ran.set()

        async with jobs:
            assert isinstance(jobs.scheduler, AsyncIOScheduler)
            await asyncio.wait_for(ran.wait(), timeout=10)
            assert loops == [asyncio.get_running_loop()]

    asyncio.run(main())


def test_async_jobs_run_on_a_thread_scheduler_too(k8s_embedded_apiserver: APIServer) -> None:
    jobs = make_jobs("asyncjobs", k8s_embedded_apiserver.api_client(), identity="a")
    ran = threading.Event()

    @jobs.interval(seconds=1, mode=Mode.EVERY_REPLICA)
    async def refresh(ctx: JobContext) -> None:
        await asyncio.sleep(0)
        ran.set()

    with jobs:
        assert ran.wait(10), "the coroutine was awaited, not dropped"

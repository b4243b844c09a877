"""The README's examples, run as written (a README that lies is a bug)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from kubernetes import client

from k8slease import AsyncLeaderElector, JobContext, Jobs, LeaderElector, LeadershipContext, Mode


def test_my_app_elects_a_leader(k8s_api_client: client.ApiClient, k8s_namespace: str) -> None:
    with LeaderElector("my-app", namespace=k8s_namespace, api_client=k8s_api_client) as elector:
        assert elector.wait_until_leading(timeout=10)


def test_the_in_your_app_example_registers_the_three_classes(
    k8s_api_client: client.ApiClient, k8s_namespace: str
) -> None:
    written: list[tuple[Any, int | None]] = []
    jobs = Jobs("billing", namespace=k8s_namespace, api_client=k8s_api_client)

    @jobs.cron("0 2 * * *", mode=Mode.ONCE_PER_TICK, lock_at_most_for=900, lock_at_least_for=60)
    def nightly_invoices(ctx: JobContext) -> None:
        written.append((ctx.tick, ctx.fencing_token))

    @jobs.interval(seconds=30, mode=Mode.EVERY_REPLICA)
    def refresh_local_cache(ctx: JobContext) -> None: ...

    @jobs.singleton(mode=Mode.LEADER)
    def poll_queue(ctx: JobContext) -> None:
        while not ctx.lost.wait(5):
            pass

    assert {name: spec.mode for name, spec in jobs.specs.items()} == {
        "nightly-invoices": Mode.ONCE_PER_TICK,
        "refresh-local-cache": Mode.EVERY_REPLICA,
        "poll-queue": Mode.LEADER,
    }
    with jobs:
        from datetime import UTC, datetime

        tick = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
        assert jobs.fire("nightly-invoices", tick) == "succeeded"
    assert written == [(tick, 1)]


def test_the_async_elector_example(k8s_api_client: client.ApiClient, k8s_namespace: str) -> None:
    tokens: list[int] = []

    async def main() -> None:
        async def lead(ctx: LeadershipContext) -> None:
            while True:
                tokens.append(ctx.fencing_token)
                await asyncio.Event().wait()  # runs until cancelled when leadership is lost

        async with AsyncLeaderElector(
            "billing", namespace=k8s_namespace, api_client=k8s_api_client, on_started_leading=lead
        ) as elector:
            await asyncio.wait_for(elector.wait_until_leading(), timeout=10)
            assert elector.is_leader

    asyncio.run(main())
    assert tokens == [1]


def test_the_client_go_style_callback_keeps_leading(
    k8s_api_client: client.ApiClient, k8s_namespace: str
) -> None:
    said = threading.Event()
    with LeaderElector(
        "billing",
        namespace=k8s_namespace,
        api_client=k8s_api_client,
        on_started_leading=lambda: said.set(),
    ) as elector:
        assert elector.wait_until_leading(timeout=10)
        assert said.wait(5) and elector.is_leader
        assert elector.fencing_token == 1, "still the first term after the callback returned"

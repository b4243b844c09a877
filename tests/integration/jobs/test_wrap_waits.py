"""``wrap()``: a graceful stop releases the Lease only once the wrapped scheduler's job runs in
progress have ended. ``pause()`` stops no run in progress; released at once, the Lease let the
other replica's scheduler start the same job beside it (two replicas running a leader-only
job). Both a thread-pool ``BackgroundScheduler`` and an ``AsyncIOScheduler`` running a coroutine
job on its loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar

import pytest
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.schedulers.base import BaseScheduler
from kubernetes import client

from k8slease.election.elector import LeaderElector
from k8slease.election.leadership import LeadershipContext
from k8slease.jobs.wrap import wrap
from k8slease.lease.transport import LeaseTransport

T = TypeVar("T")

LEASE = "wrapwaits"
#: a lease long enough that the held-back release is not overtaken by its expiry while the test
#: looks; the other replica polls every 0.2 s, so a released Lease is taken within HOLD
TIMING: dict[str, Any] = {
    "lease_duration": 12.0,
    "renew_interval": 0.5,
    "renew_deadline": 6.0,
    "retry_interval": 0.2,
    "handle_signals": False,
}
#: seconds the other replica is given to start its job while this one's run goes on
HOLD = 2.0


class Loop:
    """An event loop running on its own thread (the app's loop an ``AsyncIOScheduler`` runs on)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def call(self, fn: Callable[[], T]) -> T:
        """``fn()`` run on the loop's thread; its result."""

        async def on_loop() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(on_loop(), self.loop).result(10)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


class Scenario:
    """Replica ``a`` runs a job that blocks until ``finish``; replica ``b`` records its runs."""

    def __init__(self, kind: str, api_client: client.ApiClient, namespace: str) -> None:
        self.kind = kind
        self.loop = Loop() if kind == "asyncio" else None
        self.a_running, self.finish = threading.Event(), threading.Event()
        self.b_ran, self.a_led, self.a_stopped = (
            threading.Event(),
            threading.Event(),
            threading.Event(),
        )
        self.order: list[str] = []
        self.transport = LeaseTransport(api_client, namespace)
        self.pairs: list[tuple[BaseScheduler, LeaderElector]] = []
        for identity in ("a", "b"):
            scheduler = self._scheduler(identity)
            elector = LeaderElector(
                LEASE, namespace=namespace, identity=identity, api_client=api_client, **TIMING
            )
            if identity == "a":  # the callbacks wrap() chains keep running
                elector.on_started_leading = lambda ctx: self.a_led.set()
                elector.on_stopped_leading = self._a_stopped
            self._on_loop(partial(wrap, scheduler, elector))
            self.pairs.append((scheduler, elector))

    def _a_stopped(self, ctx: LeadershipContext) -> None:
        self.a_stopped.set()

    def _on_loop(self, fn: Callable[[], T]) -> T:
        return fn() if self.loop is None else self.loop.call(fn)

    def _scheduler(self, identity: str) -> BaseScheduler:
        scheduler: BaseScheduler
        if self.loop is None:
            scheduler = BackgroundScheduler(timezone=UTC)
        else:
            scheduler = AsyncIOScheduler(timezone=UTC, event_loop=self.loop.loop)
        scheduler.add_job(
            self._job(identity),
            "interval",
            seconds=0.2,
            next_run_time=datetime.now(UTC),
            max_instances=1,
        )
        return scheduler

    def _job(self, identity: str) -> Callable[[], Any]:
        def plain() -> None:
            if identity == "b":
                self.order.append("b started")
                self.b_ran.set()
                return
            self.a_running.set()
            self.finish.wait(30)
            self.order.append("a ended")

        async def coroutine() -> None:
            if identity == "b":
                plain()
                return
            self.a_running.set()
            await asyncio.get_running_loop().run_in_executor(None, self.finish.wait, 30)
            self.order.append("a ended")

        return plain if self.loop is None else coroutine

    def holder(self) -> str | None:
        holder: str | None = self.transport.get(LEASE)["spec"].get("holderIdentity")
        return holder

    def close(self) -> None:
        self.finish.set()
        for scheduler, elector in self.pairs:
            elector.stop()
            self._on_loop(partial(scheduler.shutdown, wait=False))
        if self.loop is not None:
            self.loop.close()


@contextmanager
def scenario(kind: str, api_client: client.ApiClient, namespace: str) -> Iterator[Scenario]:
    built = Scenario(kind, api_client, namespace)
    try:
        yield built
    finally:
        built.close()


@pytest.mark.parametrize("kind", ["background", "asyncio"])
def test_a_graceful_stop_releases_only_after_the_wrapped_scheduler_s_running_job_ended(
    kind: str, k8s_api_client: client.ApiClient, k8s_namespace: str
) -> None:
    with scenario(kind, k8s_api_client, k8s_namespace) as s:
        (_, a), (_, b) = s.pairs
        a.start()
        assert a.wait_until_leading(10)
        b.start()
        assert s.a_running.wait(10), "a's job never started"
        assert s.a_led.wait(5), "the on_started_leading wrap() chained did not run"
        stopper = threading.Thread(target=a.stop)
        stopper.start()
        assert s.a_stopped.wait(10), "the on_stopped_leading wrap() chained did not run"

        assert not s.b_ran.wait(HOLD), "b started the job while a's run of it went on"
        assert s.holder() == "a", "the Lease was released while a's job still ran"
        assert stopper.is_alive()

        s.finish.set()
        stopper.join(10)
        assert not stopper.is_alive()
        assert s.b_ran.wait(10), "b never took over"
        assert s.order[:2] == ["a ended", "b started"]
        assert s.holder() == "b"

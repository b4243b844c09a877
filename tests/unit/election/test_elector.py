"""The LeaderElector runner: threads, callbacks, watch, release, health, metrics and signals.

These use an in-memory transport (tests/unit/election/elector_memstore.py). Deadlines, expiry
and polling are driven by a fake clock (``FakeClock.run_until``); the other tests need no
waiting. The same behaviours against the embedded API server are in
tests/integration/election/test_elector_inprocess.py.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from functools import partial
from typing import Any

import pytest

from k8slease import LeaderElector, LeadershipContext
from k8slease.election.commands import Create, Read
from k8slease.election.seams import Seams
from k8slease.errors import ConfigError, Unavailable
from k8slease.lease.record import record_from_lease
from k8slease.lease.view import LeaseView
from k8slease.metrics import NoopMetrics, PrometheusMetrics
from tests.support.fakeclock import FakeClock, JumpingClock
from tests.support.timing import MEMORY_FAST as FAST
from tests.unit.election.elector_memstore import (
    MemoryLeaseStore,
    MemoryTransport,
    make_elector,
    memory_options,
)

make = partial(make_elector, defaults=FAST)


def holder(store: MemoryLeaseStore) -> str:
    return record_from_lease(store.get("demo")).holder


# -- construction ----------------------------------------------------------------------------


def test_defaults_come_from_the_pod_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "payments")
    monkeypatch.setenv("POD_NAME", "web-0")
    elector = LeaderElector(
        "billing", metrics=NoopMetrics(), seams=Seams(transport=MemoryTransport(MemoryLeaseStore()))
    )
    assert elector.namespace == "payments"
    assert elector.identity.startswith("web-0-") and len(elector.identity) == len("web-0-") + 5
    assert elector.group == "billing"
    assert (elector.timing.lease_duration, elector.timing.renew_interval) == (60.0, 20.0)
    assert (elector.timing.renew_deadline, elector.timing.retry_interval) == (40.0, 5.0)
    assert not elector.is_leader and elector.fencing_token is None and elector.healthy()


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"name": "Not_A_Name"}, "DNS subdomain"),
        ({"name": ""}, "non-empty"),
        ({"namespace": "Bad Namespace"}, "DNS label"),
        ({"identity": "  "}, "identity"),
        ({"lease_duration": 1.5}, "whole number"),
        ({"renew_interval": 50.0, "renew_deadline": 40.0}, "renew_interval"),
        ({"renew_deadline": 70.0, "lease_duration": 60}, "renew_deadline"),
        ({"on_started_leading": "run"}, "callable"),
        ({"group": "x" * 64}, "label value"),
    ],
)
def test_configuration_errors_are_raised_in_the_constructor(
    kwargs: dict[str, Any], fragment: str
) -> None:
    options: dict[str, Any] = {"name": "billing", "namespace": "default", **kwargs}
    name = options.pop("name")
    with pytest.raises(ConfigError, match=fragment):
        LeaderElector(name, metrics=NoopMetrics(), **options)


# -- leading ---------------------------------------------------------------------------------


def test_one_of_three_leads_and_callbacks_come_in_order(
    store: MemoryLeaseStore, electors: list[LeaderElector]
) -> None:
    log: list[tuple[str, str, Any]] = []
    lock = threading.Condition()

    def started(ctx: LeadershipContext) -> None:
        with lock:
            log.append(("started", ctx.identity, ctx.fencing_token))
            lock.notify_all()
        ctx.lost.wait()

    def stopped(ctx: LeadershipContext) -> None:
        with lock:
            log.append(("stopped", ctx.identity, ctx.fencing_token))

    group = [
        make(store, electors, f"r{i}", on_started_leading=started, on_stopped_leading=stopped)
        for i in range(3)
    ]
    for elector in group:
        elector.start()
    assert store.wait_for(lambda: "demo" in store.leases and holder(store) != "", 5)
    first = next(e for e in group if e.identity == holder(store))
    assert first.wait_until_leading(5)
    assert [e.is_leader for e in group].count(True) == 1
    first.stop()
    assert not first.is_leader
    second = next(e for e in group if e is not first and e.wait_until_leading(2))
    assert second.fencing_token == 2
    with lock:
        assert lock.wait_for(lambda: len(log) >= 3, 5)
        assert log[:3] == [
            ("started", first.identity, 1),
            ("stopped", first.identity, 1),
            ("started", second.identity, 2),
        ]


@pytest.mark.parametrize("with_ctx", [True, False], ids=["ctx", "no-arg"])
def test_a_returning_callback_is_a_notification_and_leadership_stays(
    store: MemoryLeaseStore, electors: list[LeaderElector], with_ctx: bool
) -> None:
    """client-go's convention: on_started_leading returning does not end the term."""
    clock = FakeClock()
    started: list[str] = []
    seen: list[str] = []

    def notify_ctx(ctx: LeadershipContext) -> None:
        started.append(ctx.identity)

    def notify() -> None:
        started.append("called")

    a = make(
        store,
        electors,
        "a",
        clock=clock,
        on_started_leading=notify_ctx if with_ctx else notify,
        on_new_leader=(lambda who: seen.append(who)) if with_ctx else (lambda: seen.append("?")),
    ).start()
    assert a.wait_until_leading(5)
    b = make(store, electors, "b", clock=clock).start()
    # five lease durations: a returning callback must not make it step down and retake. The
    # clock starts once both electors' loops and watchdogs wait on it: a's loop first waits
    # only after dispatching its grant, and moving the clock before that starves its renewals.
    assert not clock.run_until(lambda: not a.is_leader or b.is_leader, limit=10.0, sleepers=4)
    assert a.is_leader and a.fencing_token == 1 and len(started) == 1
    assert seen and seen[0] in ("a", "?")


def test_work_that_returns_releases_the_lease_when_asked(
    store: MemoryLeaseStore, electors: list[LeaderElector]
) -> None:
    stops: list[int] = []
    a = make(
        store,
        electors,
        "a",
        release_on_return=True,
        on_started_leading=lambda ctx: None,
        on_stopped_leading=lambda ctx: stops.append(ctx.fencing_token),
    ).start()
    assert store.wait_for(lambda: len(stops) == 1, 5), "stopped after the work returned"
    assert store.wait_for(lambda: "demo" in store.leases and holder(store) == "", 5)
    b = make(store, electors, "b", on_started_leading=lambda ctx: ctx.lost.wait()).start()
    assert b.wait_until_leading(5)
    assert not a.is_leader


def test_work_that_raises_is_logged_and_released_when_asked(
    store: MemoryLeaseStore, electors: list[LeaderElector]
) -> None:
    def boom(ctx: LeadershipContext) -> None:
        raise RuntimeError("scheduler failed to start")

    stopped = threading.Event()
    make(
        store,
        electors,
        "a",
        release_on_return=True,
        on_started_leading=boom,
        on_stopped_leading=lambda: stopped.set(),
    ).start()
    assert stopped.wait(5)
    assert store.wait_for(lambda: holder(store) == "", 5)


def test_failing_callbacks_never_kill_the_elector(
    store: MemoryLeaseStore, electors: list[LeaderElector]
) -> None:
    def bad(*_: Any) -> None:
        raise ValueError("callback bug")

    a = make(store, electors, "a", on_new_leader=bad, on_stopped_leading=bad).start()
    assert a.wait_until_leading(5)
    a.stop()
    assert a.wait(5) and holder(store) == ""


def test_renew_failures_end_leadership_at_the_deadline_and_it_comes_back(
    store: MemoryLeaseStore, electors: list[LeaderElector]
) -> None:
    clock = FakeClock()
    transport = MemoryTransport(store)
    stopped_at: list[float] = []
    a = make(
        store,
        electors,
        "a",
        clock=clock,
        transport=transport,
        on_stopped_leading=lambda: stopped_at.append(clock.monotonic()),
    ).start()
    assert a.wait_until_leading(5)
    broken_at = clock.monotonic()
    transport.fail_always["update"] = Unavailable("503")
    assert clock.run_until(lambda: bool(stopped_at), limit=3.0, sleepers=2)
    assert not a.is_leader and a.healthy()
    # renew_deadline (1 s) after the last good send (at most renew_interval before the break),
    # and before anyone else may take over (lease_duration, 2 s)
    assert 1.0 - 0.3 <= stopped_at[0] - broken_at < 2.0
    assert transport.calls.count("update") >= 2, "it kept trying to renew until the deadline"
    del transport.fail_always["update"]
    assert clock.run_until(lambda: a.is_leader, limit=3.0), "a candidate again: it re-acquires"
    assert a.fencing_token == 2


def test_a_term_reads_lost_the_moment_its_renew_deadline_has_passed(
    store: MemoryLeaseStore, electors: list[LeaderElector]
) -> None:
    """Found by the chaos suite (a LEADER singleton resumed after SIGSTOP acted for a few ms
    while another replica led): ``ctx.lost`` must read as set from the renew deadline on, as
    ``is_leader`` does, before the watchdog has run; ``wait`` too."""
    clock = JumpingClock()
    terms: list[LeadershipContext] = []
    called = threading.Event()

    def started(ctx: LeadershipContext) -> None:
        terms.append(ctx)
        called.set()

    slow = {"lease_duration": 30, "renew_interval": 10, "renew_deadline": 20}
    a = make(store, electors, "a", clock=clock, on_started_leading=started, **slow).start()
    assert a.wait_until_leading(5) and called.wait(5)  # the callback runs in its own thread
    (ctx,) = terms
    assert not ctx.lost.is_set() and not ctx.lost.wait(0)
    clock.jumped = 20.5  # stopped past the renew deadline; no thread has run since
    assert not a.is_leader
    assert ctx.lost.is_set()
    assert ctx.lost.wait(0)
    assert ctx.lost.wait(0.01)


def test_watch_unavailable_falls_back_to_polling(
    store: MemoryLeaseStore, electors: list[LeaderElector]
) -> None:
    clock = FakeClock()
    t_a, t_b = MemoryTransport(store), MemoryTransport(store)
    t_b.watch_enabled = False
    a = make(store, electors, "a", clock=clock, transport=t_a, release_on_stop=False).start()
    assert a.wait_until_leading(5)
    b = make(store, electors, "b", clock=clock, transport=t_b).start()
    assert store.wait_for(lambda: "get" in t_b.calls, 5), "b has seen the Lease held by a"
    a.stop()  # no release: b must wait the lease out, polling
    stopped = clock.monotonic()
    assert not clock.run_until(lambda: b.is_leader, limit=2 - 0.3 - 0.05, sleepers=2)
    assert clock.run_until(lambda: b.is_leader, limit=2.0)
    assert clock.monotonic() - stopped >= 2 - 0.3 - 0.01
    assert t_b.calls.count("get") >= 2


def test_async_work_in_a_thread_is_cancelled_on_loss(
    store: MemoryLeaseStore, electors: list[LeaderElector]
) -> None:
    cancelled = threading.Event()
    running = threading.Event()

    async def work(ctx: LeadershipContext) -> None:
        running.set()
        try:
            await asyncio.Event().wait()  # runs until cancelled
        except asyncio.CancelledError:
            cancelled.set()
            raise

    a = make(store, electors, "a", on_started_leading=work).start()
    assert running.wait(5)
    a.stop()
    assert cancelled.is_set()


def test_healthy_is_false_when_leading_but_stale() -> None:
    """What client-go's healthz checks: a leader whose renewals stopped for too long is stuck.

    The elector is not started (no watchdog to step down); its machine is driven by hand.
    """
    clock = FakeClock()
    store = MemoryLeaseStore()
    elector = LeaderElector(
        "demo",
        identity="a",
        seams=Seams(clock=clock, transport=MemoryTransport(store)),
        metrics=NoopMetrics(),
        **FAST,
    )
    machine = elector.machine
    assert isinstance(machine.next_command(clock.monotonic(), clock.now()), Read)
    machine.read_done(None, now=clock.monotonic())
    create = machine.next_command(clock.monotonic(), clock.now())
    assert isinstance(create, Create)
    written = LeaseView.decode(store.create(create.body))
    machine.write_done(written, sent_at=clock.monotonic(), now=clock.monotonic())
    assert elector.is_leader and elector.healthy()
    clock.advance(1.0 + 0.3 - 0.01)  # renew_deadline + margin (renew_interval) not yet passed
    assert elector.healthy() and not elector.is_leader
    clock.advance(0.02)
    assert not elector.healthy()
    assert elector.healthy(margin=1.0)


def test_prometheus_metrics_are_recorded(
    store: MemoryLeaseStore, electors: list[LeaderElector]
) -> None:
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    a = make(store, electors, "a", metrics=PrometheusMetrics(registry)).start()
    assert a.wait_until_leading(5)
    labels = {"lease": "demo"}  # stable: no per-process identity label
    assert registry.get_sample_value("k8slease_is_leader", labels) == 1.0
    assert registry.get_sample_value("leader_election_master_status", {"name": "demo"}) == 1.0
    assert store.wait_for(lambda: len(store.writes) >= 3, 5)
    assert (registry.get_sample_value("k8slease_renew_seconds_count", {"lease": "demo"}) or 0) >= 1
    a.stop()
    assert registry.get_sample_value("k8slease_is_leader", labels) == 0.0
    assert (
        registry.get_sample_value(
            "k8slease_leader_transitions_total", {"lease": "demo", "event": "stopped"}
        )
        == 1.0
    )


def test_sigterm_releases_then_reaches_the_previous_handler(
    store: MemoryLeaseStore, electors: list[LeaderElector]
) -> None:
    """The default (handle_signals=True): release first, then the handler that was there."""
    reached: list[tuple[int, str]] = []
    previous = signal.signal(
        signal.SIGTERM, lambda signum, frame: reached.append((signum, holder(store)))
    )
    try:
        a = make(store, electors, "a").start()
        assert a.wait_until_leading(5)
        os.kill(os.getpid(), signal.SIGTERM)
        assert a.wait(5) and a._signals.handled.wait(5)
        assert store.wait_for(lambda: bool(reached), 5)
        assert reached == [(signal.SIGTERM, "")], "the previous handler ran after the release"
        assert signal.getsignal(signal.SIGTERM) is not None
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_no_handlers_outside_the_main_thread_or_when_asked_not_to(
    store: MemoryLeaseStore, electors: list[LeaderElector]
) -> None:
    before = signal.getsignal(signal.SIGTERM)
    make(store, electors, "a", handle_signals=False).start()
    assert signal.getsignal(signal.SIGTERM) == before
    started = threading.Thread(target=make(store, electors, "b").start)
    started.start()
    started.join(5)
    assert signal.getsignal(signal.SIGTERM) == before


def test_asyncio_integration_runs_coroutines_on_the_loop_and_cancels_them(
    store: MemoryLeaseStore,
) -> None:
    from k8slease.election.aio import AsyncLeaderElector

    seen: dict[str, Any] = {}

    async def main() -> None:
        loop = asyncio.get_running_loop()

        async def lead(ctx: LeadershipContext) -> None:
            seen["loop"] = asyncio.get_running_loop() is loop
            seen["token"] = ctx.fencing_token
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                seen["cancelled"] = True
                raise

        async def stopped(ctx: LeadershipContext) -> None:
            seen["stopped_on_loop"] = asyncio.get_running_loop() is loop

        options = memory_options(
            store, defaults=FAST, on_started_leading=lead, on_stopped_leading=stopped
        )
        async with AsyncLeaderElector("demo", identity="a", **options) as elector:
            await asyncio.wait_for(elector.wait_until_leading(), 5)
            assert elector.is_leader and elector.fencing_token == 1 and elector.healthy()
        assert not elector.is_leader
        await asyncio.wait_for(elector.wait_until_not_leading(), 1)

    asyncio.run(main())
    assert seen == {"loop": True, "token": 1, "cancelled": True, "stopped_on_loop": True}
    assert holder(store) == ""


def test_no_release_request_is_sent_while_the_ended_term_s_work_still_runs(
    store: MemoryLeaseStore, electors: list[LeaderElector]
) -> None:
    """The release's first request is its write, on the body the term last wrote; like the read
    that used to come first, it is held back until the work has returned: released earlier, the
    Lease would let another replica start beside work that still runs."""
    finish = threading.Event()

    def work(ctx: LeadershipContext) -> None:
        ctx.lost.wait()
        finish.wait(10)  # ignores the loss a while longer

    a = make(store, electors, "a", on_started_leading=work).start()
    assert a.wait_until_leading(5)
    machine = a._runner.machine
    held_back = threading.Semaphore(0)
    postpone = machine.release_postponed

    def counted(now: float) -> None:
        postpone(now)
        held_back.release()

    machine.release_postponed = counted  # type: ignore[method-assign]
    stopper = threading.Thread(target=a.stop)
    stopper.start()
    for _ in range(2):
        assert held_back.acquire(timeout=5), "the release was not held back"
    assert holder(store) == "a", "released while the work still ran"
    finish.set()
    stopper.join(5)
    assert not stopper.is_alive()
    assert holder(store) == ""

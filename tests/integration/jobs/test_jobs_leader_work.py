"""A term's LEADER singletons are part of its work: the group Lease is not released while one is
still finishing after ``ctx.lost`` (the elector's ``work_done`` bound), so no other replica
starts the same singleton meanwhile (audit s1: two replicas ran it at once for ~3 s)."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from k8slease import ElectionTiming, JobContext, Jobs, Mode
from k8slease.lease.transport import LeaseTransport
from k8slease.testing.server import APIServer
from tests.support import recorders
from tests.support.factories import JobsFactory, make_jobs

#: a lease long enough that it cannot expire while a test watches the release held back (the
#: elector keeps postponing it while the work runs, until the Lease would expire)
HELD: dict[str, Any] = {"lease_duration": 8.0, "renew_interval": 0.3, "renew_deadline": 1.5}
#: how long a test watches for what must not happen while the singleton still finishes
WATCH = 1.5
GROUP = "workers"


Journal = recorders.Journal[tuple[str, str]]


def plain_poller(journal: Journal, finish: threading.Event) -> Callable[[JobContext], None]:
    """A LEADER singleton that, once told, still finishes its iteration (until ``finish``)."""

    def poller(ctx: JobContext) -> None:
        journal.add(("start", ctx.identity))
        ctx.lost.wait()
        journal.add(("lost", ctx.identity))
        finish.wait(30)
        journal.add(("end", ctx.identity))

    return poller


def coroutine_poller(journal: Journal, finish: threading.Event) -> Callable[[JobContext], Any]:
    """The coroutine form: cancelled when told, it still finishes its cleanup (until ``finish``)."""

    async def poller(ctx: JobContext) -> None:
        journal.add(("start", ctx.identity))
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            journal.add(("lost", ctx.identity))
            await asyncio.to_thread(finish.wait, 30)
            journal.add(("end", ctx.identity))
            raise

    return poller


def holder(api_client: client.ApiClient, namespace: str) -> str | None:
    lease: dict[str, Any] = LeaseTransport(api_client, namespace).get(GROUP)
    return lease["spec"].get("holderIdentity") or None


def handed_over_only_after_r0_ended(
    journal: Journal,
    stopping: threading.Thread,
    finish: threading.Event,
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    """While r0's LEADER singleton, told to stop, still finishes: no release (the Lease names
    r0), r1 has not started it and ``stopping`` (the thread stopping r0) goes on. Once it ends
    (``finish``): released, not left to expire, and r1 starts it only after r0's copy ended."""
    assert journal.within(lambda e: ("lost", "r0") in e, 10), journal.entries
    assert not journal.within(lambda e: ("start", "r1") in e, WATCH), journal.entries
    assert holder(api_client, namespace) == "r0"
    assert stopping.is_alive(), "the stop ended while the leader singleton still ran"
    finish.set()
    stopping.join(10)
    assert not stopping.is_alive()
    assert holder(api_client, namespace) != "r0", "released, not left to expire"
    assert journal.within(lambda e: ("start", "r1") in e, 10), journal.entries
    assert journal.entries.index(("end", "r0")) < journal.entries.index(("start", "r1"))


@pytest.fixture
def finish() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()  # whatever failed, let the singletons end


def replicas(
    make: Callable[[str], Jobs], journal: Journal, finish: threading.Event, shape: str = "plain"
) -> list[Jobs]:
    """Two replicas of one group, each with the LEADER singleton of ``shape`` and an
    EVERY_REPLICA singleton; started; the first leads."""
    made = []
    poller = coroutine_poller if shape == "coroutine" else plain_poller
    for identity in ("r0", "r1"):
        jobs = make(identity)
        jobs.singleton(mode=Mode.LEADER, name="poller")(poller(journal, finish))

        def everywhere(ctx: JobContext) -> None:
            ctx.lost.wait()
            journal.add(("everywhere-end", ctx.identity))

        jobs.singleton(mode=Mode.EVERY_REPLICA, name="everywhere")(everywhere)
        made.append(jobs)
    made[0].start()
    assert journal.within(lambda e: ("start", "r0") in e, 10), journal.entries
    made[1].start()
    return made


@pytest.mark.parametrize("shape", ["plain", "coroutine"])
def test_stop_releases_the_group_lease_only_once_the_leader_singleton_has_ended(
    new_jobs: JobsFactory,
    k8s_api_client: client.ApiClient,
    k8s_namespace: str,
    finish: threading.Event,
    shape: str,
) -> None:
    journal = Journal()

    def make(identity: str) -> Jobs:
        return new_jobs(GROUP, identity=identity, election=ElectionTiming(**HELD))

    first, second = replicas(make, journal, finish, shape)
    try:
        stopper = threading.Thread(target=first.stop)
        stopper.start()
        handed_over_only_after_r0_ended(journal, stopper, finish, k8s_api_client, k8s_namespace)
        entries = journal.entries
        assert ("everywhere-end", "r0") in entries  # stop() still stops every singleton
        assert ("everywhere-end", "r1") not in entries
    finally:
        finish.set()
        first.stop()
        second.stop()


def test_a_term_that_lost_its_renewals_keeps_its_singleton_as_its_work(
    k8s_embedded_apiserver: APIServer, finish: threading.Event
) -> None:
    """The leader misses its renewals (steps down at its renew deadline) while its singleton
    still finishes, then takes its own Lease back: the new term neither runs a second copy of
    the singleton nor, on stop, releases the Lease while the first copy runs."""
    server = k8s_embedded_apiserver
    journal = Journal()

    def make(identity: str) -> Jobs:
        timing = ElectionTiming(**HELD)
        return make_jobs(GROUP, server.api_client(), identity=identity, election=timing)

    first, second = replicas(make, journal, finish)
    try:
        cut = server.faults.add("update", "leases", name=GROUP, status=503)
        assert journal.within(lambda e: ("lost", "r0") in e, 10), journal.entries
        server.faults.remove(cut)
        elector = first.elector
        assert elector is not None and elector.wait_until_leading(10), "took its Lease back"
        assert not journal.within(lambda e: e.count(("start", "r0")) > 1, WATCH), journal.entries
        stopper = threading.Thread(target=first.stop)
        stopper.start()
        assert not journal.within(lambda e: ("start", "r1") in e, WATCH), journal.entries
        assert holder(server.api_client(), "default") == "r0"
        assert stopper.is_alive(), "stop() returned while the first term's singleton still ran"
        finish.set()
        stopper.join(10)
        assert not stopper.is_alive()
        assert holder(server.api_client(), "default") != "r0", "released, not left to expire"
        assert journal.within(lambda e: ("start", "r1") in e, 10), journal.entries
        assert journal.count(("start", "r0")) == 1
        assert journal.entries.index(("end", "r0")) < journal.entries.index(("start", "r1"))
    finally:
        finish.set()
        first.stop()
        second.stop()


def test_leaving_async_with_waits_for_a_coroutine_leader_singleton_on_the_loop(
    new_jobs: JobsFactory,
    k8s_api_client: client.ApiClient,
    k8s_namespace: str,
    finish: threading.Event,
) -> None:
    journal = Journal()
    first, second = (
        new_jobs(GROUP, identity=identity, election=ElectionTiming(**HELD))
        for identity in ("r0", "r1")
    )
    for jobs in (first, second):
        jobs.singleton(mode=Mode.LEADER, name="poller")(coroutine_poller(journal, finish))
    leave = threading.Event()

    async def main() -> None:
        async with first:  # the singleton's coroutine runs on this loop
            await asyncio.to_thread(leave.wait, 30)

    app = threading.Thread(target=asyncio.run, args=(main(),))
    app.start()
    try:
        assert journal.within(lambda e: ("start", "r0") in e, 10), journal.entries
        second.start()
        leave.set()  # async with is left: the app thread stops r0
        handed_over_only_after_r0_ended(journal, app, finish, k8s_api_client, k8s_namespace)
    finally:
        leave.set()
        finish.set()
        app.join(10)
        second.stop()


def test_a_stop_called_on_the_loop_itself_warns_and_does_not_wait_for_the_loop(
    new_jobs: JobsFactory,
    k8s_api_client: client.ApiClient,
    k8s_namespace: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``jobs.stop()`` called from a coroutine blocks the loop a coroutine singleton needs in
    order to end: waiting for it would hold the release back until the Lease's expiry, for
    nothing. That stop warns (pointing to ``await asyncio.to_thread(jobs.stop)``) and releases
    at once; the singleton's clean-up runs when the loop goes on."""
    journal = Journal()
    finish = threading.Event()
    finish.set()  # the clean-up needs nothing but the loop
    jobs = new_jobs(GROUP, identity="r0", election=ElectionTiming(**HELD), handle_signals=False)
    jobs.singleton(mode=Mode.LEADER, name="poller")(coroutine_poller(journal, finish))
    after_stop: list[str | None] = []

    async def main() -> None:
        jobs.start()
        assert await asyncio.to_thread(journal.within, lambda e: ("start", "r0") in e, 10)
        jobs.stop()  # on the loop's own thread
        after_stop.append(holder(k8s_api_client, k8s_namespace))
        ended = await asyncio.to_thread(journal.within, lambda e: ("end", "r0") in e, 10)
        assert ended, journal.entries

    with caplog.at_level(logging.WARNING, logger="k8slease"):
        asyncio.run(main())
    assert after_stop == [None], "the release waited for the blocked loop, then was left out"
    warned = [r for r in caplog.records if getattr(r, "k8slease_event", "") == "jobs.stop_on_loop"]
    assert len(warned) == 1 and warned[0].levelno == logging.WARNING

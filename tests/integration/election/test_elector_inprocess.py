"""LeaderElector against the embedded API server: several electors in one process.

Covers acquire, renew (a single PUT, no GET), conflicts with other writers, graceful takeover
timing, API errors, malformed Leases and re-candidacy. Waits are on observed Lease changes (a
watch) or elector events, never fixed sleeps; deadlines and expiry in the API-error, malformed
Lease and re-candidacy tests are driven by a fake clock (``FakeClock.run_until``).
"""

from __future__ import annotations

import re
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import kubernetes
import pytest

from k8slease import LeaderElector, LeadershipContext
from k8slease.names import ANN_FENCING_TOKEN, LABEL_GROUP, LABEL_ROLE
from k8slease.testing.server import APIServer
from tests.integration.election.elector_helpers import (
    FAST,
    LeaseWatcher,
    server_for_lease,
    stop_and_close,
    tracked_elector,
)
from tests.support.fakeclock import FakeClock
from tests.support.polling import poll

MICROTIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
NS = "default"


@pytest.fixture
def server(request: pytest.FixtureRequest, k8s_apiserver: APIServer) -> APIServer:
    """A fresh embedded server, or the real control plane without the "demo" Lease."""
    server: APIServer = server_for_lease(request, NS, "demo")
    return server


@pytest.fixture
def cleanup() -> Iterator[list[Any]]:
    things: list[Any] = []
    yield things
    stop_and_close(things, stop_timeout=5)


def elector(server: APIServer, cleanup: list[Any], identity: str, **kwargs: Any) -> LeaderElector:
    return tracked_elector(server, cleanup, "demo", identity, timing=FAST, namespace=NS, **kwargs)


def leading_a(server: APIServer, cleanup: list[Any], **kwargs: Any) -> LeaderElector:
    """Elector "a", started alone, once it leads (within 5 s)."""
    a = elector(server, cleanup, "a", **kwargs).start()
    assert a.wait_until_leading(5)
    return a


def watcher(server: APIServer, cleanup: list[Any], clock: FakeClock | None = None) -> LeaseWatcher:
    client = server.api_client()
    cleanup.append(client)
    lease_watcher = LeaseWatcher(client, NS, "demo", clock=clock)
    cleanup.append(lease_watcher)
    return lease_watcher


def leases_api(server: APIServer, cleanup: list[Any]) -> Any:
    client = server.api_client()
    cleanup.append(client)
    return kubernetes.client.CoordinationV1Api(client)


@pytest.mark.embedded_only  # stats or faults
def test_three_electors_one_leader_client_go_fields_and_single_put_renewals(
    server: APIServer, cleanup: list[Any]
) -> None:
    watch = watcher(server, cleanup)
    group = [elector(server, cleanup, f"r{i}").start() for i in range(3)]
    _, first = watch.wait_for(lambda r: r.held, 5)
    leader = next(e for e in group if e.identity == first.holder)
    assert leader.wait_until_leading(5)
    assert [e.is_leader for e in group].count(True) == 1
    start = time.monotonic()
    watch.wait_for(lambda r: r.renew_time != first.renew_time, 3, after=start)
    server.stats.reset()  # from one renewal on, candidates only watch
    for _ in range(2):
        renewed = watch.wait_for(lambda r: True, 3, after=watch.history[-1][0] + 1e-9)
        assert renewed[1].holder == leader.identity
    assert server.stats.count("get", "leases") == 0, "renewals are a single PUT, no GET first"
    assert server.stats.count("update", "leases") >= 2
    lease = leases_api(server, cleanup).read_namespaced_lease("demo", NS)
    raw = kubernetes.client.ApiClient().sanitize_for_serialization(lease)
    spec = raw["spec"]
    assert spec["holderIdentity"] == leader.identity
    assert spec["leaseDurationSeconds"] == 2
    assert spec["leaseTransitions"] == 0
    assert MICROTIME.match(lease.spec.acquire_time.strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
    assert lease.metadata.labels == {LABEL_GROUP: "demo", LABEL_ROLE: "leader"}
    assert lease.metadata.annotations[ANN_FENCING_TOKEN] == "1"
    assert leader.fencing_token == 1 and all(e.leader == leader.identity for e in group)


def test_graceful_takeover_is_well_under_a_second(server: APIServer, cleanup: list[Any]) -> None:
    watch = watcher(server, cleanup)
    group = [elector(server, cleanup, f"g{i}").start() for i in range(3)]
    _, record = watch.wait_for(lambda r: r.held, 5)
    delays: list[float] = []
    for round_ in range(6):
        leader = next(e for e in group if e.identity == record.holder)
        assert leader.wait_until_leading(5)
        # a graceful takeover is the watch's doing: a candidate that has not opened its watch
        # yet (just started) would take over at its next retry instead. ready() is computed
        # when asked (no event announces it): asked every 10 ms
        poll("every candidate watching the Lease", lambda: all(e.ready() for e in group), 5,
             every=0.01)  # fmt: skip
        token = record.fencing_token
        stopping = time.monotonic()
        leader.stop()
        at, record = watch.wait_for(
            lambda r, t=token: r.held and r.fencing_token == t + 1, 3, after=stopping
        )
        delays.append(at - stopping)
        group.remove(leader)
        group.append(elector(server, cleanup, f"g{round_ + 3}").start())
    print(f"graceful takeover: median {statistics.median(delays):.4f}s max {max(delays):.4f}s")
    assert statistics.median(delays) < 0.2, delays
    assert max(delays) < 1.0, delays


def test_other_writers_conflict_and_the_leader_acts_on_what_it_reads(
    server: APIServer, cleanup: list[Any]
) -> None:
    watch = watcher(server, cleanup)
    stopped = threading.Event()
    a = leading_a(server, cleanup, on_stopped_leading=lambda: stopped.set())
    api = leases_api(server, cleanup)
    # a harmless writer (relabels): the leader's next PUT conflicts, it re-reads and keeps leading
    lease = api.read_namespaced_lease("demo", NS)
    lease.metadata.labels["team"] = "payments"
    api.replace_namespaced_lease("demo", NS, lease)
    edited = time.monotonic()
    watch.wait_for(lambda r: r.holder == "a", 3, after=edited + 0.001)
    watch.wait_for(lambda r: r.holder == "a", 3, after=watch.history[-1][0] + 1e-9)
    assert a.is_leader and a.fencing_token == 1
    assert api.read_namespaced_lease("demo", NS).metadata.labels["team"] == "payments"
    # a writer that takes the Lease (say a Go controller): the leader steps down at once
    lease = api.read_namespaced_lease("demo", NS)
    lease.spec.holder_identity = "go-controller"
    api.replace_namespaced_lease("demo", NS, lease)
    taken = time.monotonic()
    assert stopped.wait(1.5)
    assert time.monotonic() - taken < 0.5
    assert not a.is_leader
    # nobody renews go-controller's Lease: a takes it back after leaseDurationSeconds (2 s)
    at, record = watch.wait_for(lambda r: r.holder == "a", 6, after=taken)
    assert at - taken >= 2.0 - 0.05
    # the hand edit did not count a transition; taking it back from go-controller does
    assert record.fencing_token == 2 and record.transitions == 1


@pytest.mark.embedded_only  # stats or faults
def test_api_errors_end_leadership_before_anyone_may_take_over_then_it_recovers(
    server: APIServer, cleanup: list[Any]
) -> None:
    clock = FakeClock()
    watch = watcher(server, cleanup, clock=clock)
    stopped_at: list[float] = []
    a = leading_a(
        server,
        cleanup,
        clock=clock,
        on_stopped_leading=lambda: stopped_at.append(clock.monotonic()),
    )
    b_saw_a = threading.Event()
    b = elector(
        server,
        cleanup,
        "b",
        clock=clock,
        on_new_leader=lambda h: b_saw_a.set() if h == "a" else None,
    ).start()
    assert b_saw_a.wait(5), "b has read the Lease before time moves"
    last_write = watch.wait_for(lambda r: r.holder == "a", 3)[0]
    server.faults.add(verbs=["update", "create", "get"], resource="leases", status=500)
    # both electors' loop and watchdog threads wait on the clock before it moves
    assert clock.run_until(lambda: bool(stopped_at), limit=3.0, sleepers=4), "it stepped down"
    # renew_deadline (1.5 s) after the last good renew was sent (at most renew_interval before
    # the faults began): before anyone may take over (2 s)
    assert 1.5 - 0.5 <= stopped_at[0] - last_write < 2.0
    assert not a.is_leader and not b.is_leader and a.healthy() and b.healthy()
    server.faults.clear()
    assert clock.run_until(lambda: a.is_leader or b.is_leader, limit=8.0)
    at, record = watch.wait_for(lambda r: r.held and r.fencing_token == 2, 5, after=last_write)
    assert at > stopped_at[0]
    if record.holder == "b":
        assert at - last_write >= 2.0 - 0.05, "b waited leaseDurationSeconds"
    # else a took its own unchanged record back through a conditional write, after stepping down
    winner = a if record.holder == "a" else b
    assert winner.wait_until_leading(3) and winner.fencing_token == 2


def test_malformed_lease_is_waited_out_and_repaired(server: APIServer, cleanup: list[Any]) -> None:
    api = leases_api(server, cleanup)
    api.create_namespaced_lease(
        NS,
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": "demo",
                "labels": {"owner": "someone"},
                "annotations": {ANN_FENCING_TOKEN: "not-a-number"},
            },
            "spec": {"holderIdentity": "ghost"},  # held, but no duration
        },
    )
    clock = FakeClock()
    watch = watcher(server, cleanup, clock=clock)
    watch.wait_for(lambda r: r.holder == "ghost", 3)
    saw_ghost = [threading.Event(), threading.Event()]

    def seen_by(index: int) -> Callable[[str], None]:
        return lambda holder: saw_ghost[index].set() if holder == "ghost" else None

    started = clock.monotonic()
    a = elector(server, cleanup, "a", clock=clock, on_new_leader=seen_by(0)).start()
    b = elector(server, cleanup, "b", clock=clock, on_new_leader=seen_by(1)).start()
    assert all(seen.wait(5) for seen in saw_ghost), "both read the Lease before time moves"
    # both electors' loop and watchdog threads wait on the clock before it moves (a thread the
    # clock has not seen wait yet would not be waited for, and fake time would run past it)
    assert not clock.run_until(lambda: a.is_leader or b.is_leader, limit=2.0 - 0.05, sleepers=4)
    assert clock.run_until(lambda: a.is_leader or b.is_leader, limit=1.0, sleepers=4)
    at, record = watch.wait_for(lambda r: r.holder in ("a", "b"), 5, after=started)
    assert at - started >= 2.0 - 0.05, "waited our lease_duration: the record has none"
    assert not record.malformed and record.duration_seconds == 2 and record.fencing_token == 1
    lease = api.read_namespaced_lease("demo", NS)
    assert lease.metadata.labels["owner"] == "someone"
    winner, loser = (a, b) if record.holder == "a" else (b, a)
    # the watch can show the write before the winner has read its own PUT's answer
    assert winner.wait_until_leading(5) and not loser.is_leader


@pytest.mark.embedded_only  # stats or faults
def test_recandidacy_after_losing_leadership(server: APIServer, cleanup: list[Any]) -> None:
    clock = FakeClock()
    starts: list[int] = []
    stopped = threading.Event()
    a = leading_a(
        server,
        cleanup,
        clock=clock,
        on_started_leading=lambda ctx: _record(ctx, starts),
        on_stopped_leading=lambda: stopped.set(),
    )
    server.faults.add(verbs="update", resource="leases", status=503)
    # the loop and the watchdog wait on the clock before it moves: a loop the clock has not seen
    # wait yet is not waited for, and fake time would run on while its requests are answered
    # (under load every take was then answered "after its timeout" and it never led again)
    assert clock.run_until(stopped.is_set, limit=3.0, sleepers=2), "renewals failed: stepped down"
    server.faults.clear()
    # within two lease durations (2 s each) of fake time; the retries back off at most 1 s
    assert clock.run_until(lambda: a.is_leader, limit=4.0), "client-go would stop here; we compete"
    assert a.fencing_token == 2, "a new grant, the next token (the takes under faults failed)"
    with starts_changed:
        assert starts_changed.wait_for(lambda: starts[:2] == [1, a.fencing_token], 3)


starts_changed = threading.Condition()


def _record(ctx: LeadershipContext, starts: list[int]) -> None:
    with starts_changed:
        starts.append(ctx.fencing_token)
        starts_changed.notify_all()
    ctx.lost.wait()


@pytest.mark.embedded_only  # stats or faults
def test_watch_drops_do_not_stop_prompt_takeover(server: APIServer, cleanup: list[Any]) -> None:
    watch = watcher(server, cleanup)
    a = leading_a(server, cleanup)
    elector(server, cleanup, "b").start()
    watch.wait_for(lambda r: r.holder == "a", 3)
    server.faults.drop_watches("leases")
    # let b's watch come back (it reconnects at once); then a graceful stop must still be prompt
    assert watch.wait_for(lambda r: r.holder == "a", 3, after=time.monotonic())
    stopping = time.monotonic()
    a.stop()
    at, _ = watch.wait_for(lambda r: r.holder == "b", 3, after=stopping)
    assert at - stopping < 1.0

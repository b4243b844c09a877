"""A leader keeps its lease while the API server is slow but answering (issue 22).

Each request used to be bounded by ``request_timeout`` (``min(10, renew_deadline / 3)``), so a
server slower than a third of the renew deadline failed every renew and the leader abdicated.
Now a renew may take the time left before its deadline (:mod:`k8slease.election.budgets`). The
server's latency is real time, so these tests run on the real clock and wait on elector events.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from k8slease import ElectionTiming, LeaderElector
from k8slease.election.budgets import tolerated_latency
from k8slease.testing.server import APIServer
from tests.integration.election.elector_helpers import (
    server_for_lease,
    stop_and_close,
    tracked_elector,
)

NS = "default"
#: request_timeout (the old bound of every request) = min(10, 3 / 3) = 1 s; tolerated: 1.5 s
SLOW: dict[str, Any] = {
    "lease_duration": 4,
    "renew_interval": 0.5,
    "renew_deadline": 3,
    "retry_interval": 0.5,
}


@pytest.fixture
def server(request: pytest.FixtureRequest, k8s_apiserver: APIServer) -> APIServer:
    found: APIServer = server_for_lease(request, NS, "slow")
    return found


@pytest.fixture
def things() -> Iterator[list[Any]]:
    made: list[Any] = []
    yield made
    stop_and_close(made, stop_timeout=10)


def _elector(server: APIServer, things: list[Any], identity: str, **kwargs: Any) -> LeaderElector:
    return tracked_elector(server, things, "slow", identity, timing=SLOW, namespace=NS, **kwargs)


@pytest.mark.embedded_only  # faults
@pytest.mark.timeout(60)
def test_a_leader_keeps_its_lease_while_every_write_takes_longer_than_request_timeout(
    server: APIServer, things: list[Any]
) -> None:
    timing = ElectionTiming(**SLOW)
    latency = 1.25
    assert timing.timeout < latency < tolerated_latency(timing)
    stopped = threading.Event()
    a = _elector(server, things, "a", on_stopped_leading=stopped.set).start()
    assert a.wait_until_leading(5)
    renewals_before = server.stats.count("update", "leases")
    spell = 2 * timing.renew_deadline
    server.faults.add(["update", "get", "create"], "leases", latency=latency, duration=spell)
    # more than one renew deadline after the slow spell began, a still leads: its renews, each
    # taking 1.25 s (over request_timeout, 1 s), kept it
    assert not stopped.wait(spell), "the leader stepped down while the server was slow"
    assert a.is_leader
    renewed = server.stats.count("update", "leases") - renewals_before
    # one renew every max(renew_interval, latency) = 1.25 s: about 4 in 6 s
    assert renewed >= spell / (2 * latency)


@pytest.mark.embedded_only  # faults
@pytest.mark.timeout(60)
def test_a_leader_whose_renews_cannot_come_back_in_time_still_stops_before_a_takeover(
    server: APIServer, things: list[Any]
) -> None:
    """Latency above the tolerance: the leader stops at its deadline, before the Lease may be
    taken, and the candidate takes it only after leaseDurationSeconds."""
    timing = ElectionTiming(**SLOW)
    stopped_at: list[float] = []
    started_b = threading.Event()
    a = _elector(server, things, "a", on_stopped_leading=lambda: stopped_at.append(_now()))
    a.start()
    assert a.wait_until_leading(5)
    b_started: list[float] = []

    def b_leads() -> None:
        b_started.append(_now())
        started_b.set()

    b = _elector(server, things, "b", on_started_leading=lambda _ctx: b_leads())
    b.start()
    # for a while, writes take longer than the whole renew deadline: a cannot keep the lease
    # (and b's takes fail too until the spell ends)
    slow = timing.renew_deadline + 1
    server.faults.add("update", "leases", name="slow", latency=slow, duration=slow)
    assert started_b.wait(30), "b took over"
    assert stopped_at and stopped_at[0] < b_started[0]


def _now() -> float:
    import time

    return time.monotonic()

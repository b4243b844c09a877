"""Events are posted off the critical path, bounded by what the timings tolerate (issue 22).

A fake server stands in for the API server (it holds a request until released, or answers each
attempt from a script); a fake clock times the retries.
"""

from __future__ import annotations

import itertools
import logging
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Mapping
from typing import Any

import pytest
import urllib3
from kubernetes import client

from k8slease import ElectionTiming
from k8slease.election.budgets import event_budget, tolerated_latency
from k8slease.errors import AlreadyExists, Invalid, TransportError, Unavailable
from k8slease.jobs.wiring import job_events
from k8slease.kube.eventqueue import RETRY_FIRST, RETRY_MOST, QueuedEvents
from tests.support.fakeclock import FakeClock
from tests.support.polling import poll

LEASE: dict[str, Any] = {
    "apiVersion": "coordination.k8s.io/v1",
    "kind": "Lease",
    "metadata": {"name": "g.tick"},
}


class FakeServer:
    """Answers each send with the next scripted error (none left: created), after ``hold`` is
    set; records what was sent, when (on ``clock``) and with which timeout."""

    def __init__(self, clock: FakeClock, *errors: TransportError) -> None:
        self.clock = clock
        self.errors: deque[TransportError] = deque(errors)
        self.hold = threading.Event()
        self.hold.set()
        self.entered = threading.Event()
        self.sent: list[tuple[float, dict[str, Any], Any]] = []

    def send(self, body: Mapping[str, Any], timeout: Any) -> None:
        self.sent.append((self.clock.monotonic(), dict(body), timeout))
        self.entered.set()
        assert self.hold.wait(10), "the test never released the held request"
        if self.errors:
            raise self.errors.popleft()


class Queue(QueuedEvents):
    """A :class:`QueuedEvents` whose requests go to a :class:`FakeServer`."""

    def __init__(self, server: FakeServer, **options: Any) -> None:
        options.setdefault("bound", 30.0)
        options.setdefault("connect", 10.0)
        super().__init__(client.ApiClient(), "default", clock=server.clock, **options)
        self.server = server

    def send_body(self, body: Mapping[str, Any], *, timeout: Any) -> None:
        self.server.send(body, timeout)


def events(caplog: pytest.LogCaptureFixture, name: str) -> list[dict[str, Any]]:
    return [
        {**getattr(r, "k8slease_fields", {}), "level": r.levelno}
        for r in caplog.records
        if getattr(r, "k8slease_event", "") == name
    ]


def test_a_post_returns_at_once_while_the_server_holds_the_request() -> None:
    server = FakeServer(FakeClock())
    queue = Queue(server)
    server.hold.clear()
    assert queue.post(LEASE, reason="TicksDropped", message="dropped", type_="Warning")
    assert server.entered.wait(5), "the poster thread never sent the Event"
    # the caller is back while the request is still out: a slow server delays nothing of its
    assert queue.pending() == 1 and queue.posted == 0
    server.hold.set()
    poll(
        "queue.posted == 1 and queue.pending() == 0",
        lambda: queue.posted == 1 and queue.pending() == 0,
        5,
        every=0.005,
    )
    ((_, body, _),) = server.sent
    assert body["reason"] == "TicksDropped" and body["involvedObject"]["name"] == "g.tick"


@pytest.mark.parametrize(
    ("duration", "interval", "deadline"), [(60, 20, 40), (30, 10, 20), (15, 5, 10), (24, 8, 16)]
)
def test_each_post_may_take_longer_than_the_latency_the_timings_tolerate(
    duration: float, interval: float, deadline: float
) -> None:
    timing = ElectionTiming(
        lease_duration=duration, renew_interval=interval, renew_deadline=deadline
    )
    bound = event_budget(timing)
    assert tolerated_latency(timing) < bound <= timing.renew_deadline
    server = FakeServer(FakeClock())
    queue = job_events(client.ApiClient(), "default", "pod-1", server.clock, timing)
    queue.send_body = lambda body, *, timeout: server.send(body, timeout)  # type: ignore[method-assign]
    queue.post(LEASE, reason="RunLost", message="lost")
    poll("queue.posted == 1", lambda: queue.posted == 1, 5, every=0.005)
    ((_, _, timeout),) = server.sent
    assert isinstance(timeout, urllib3.Timeout)
    assert timeout.total == pytest.approx(bound)
    assert timeout.connect_timeout == pytest.approx(timing.timeout)  # a dead connect: quickly


def test_the_default_timings_let_an_event_take_over_5_s() -> None:
    """The fixed 5 s bound failed every Event at a 10 s latency, which 60/20/40 tolerates."""
    assert event_budget(ElectionTiming()) > 10.0


def test_an_event_is_sent_again_soon_after_the_server_is_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    outage = [Unavailable("create: ReadTimeoutError") for _ in range(4)]
    server = FakeServer(clock, *outage)
    queue = Queue(server)
    with caplog.at_level(logging.DEBUG, logger="k8slease"):
        queue.post(LEASE, reason="TicksDropped", message="dropped", type_="Warning")
        assert clock.run_until(lambda: queue.posted == 1, limit=15, step=0.1, sleepers=1)
    times = [t for t, _, _ in server.sent]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert gaps == pytest.approx([0.5, 1.0, 2.0, 2.0], abs=0.11)
    assert max(gaps) <= RETRY_MOST + 0.11 and gaps[0] == pytest.approx(RETRY_FIRST, abs=0.11)
    assert {body["metadata"]["name"] for _, body, _ in server.sent} == {
        server.sent[0][1]["metadata"]["name"]
    }, "a resend is the same Event (AlreadyExists if an earlier attempt landed)"
    (failed,) = events(caplog, "event.post_failed")  # once per failing spell, not per attempt
    assert failed["level"] == logging.WARNING and failed["retrying"] is True
    (resumed,) = events(caplog, "event.posts_resumed")
    assert resumed["failed_attempts"] == 4
    (posted,) = events(caplog, "event.posted")
    assert posted["attempts"] == 5 and posted["reason"] == "TicksDropped"


def test_an_event_the_server_never_takes_is_given_up_at_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    server = FakeServer(clock, *[Unavailable("create: refused") for _ in range(100)])
    queue = Queue(server, retry_for=6.0)
    start = clock.monotonic()
    with caplog.at_level(logging.DEBUG, logger="k8slease"):
        queue.post(LEASE, reason="RunLost", message="lost", type_="Warning")
        assert clock.run_until(lambda: queue.given_up == 1, limit=15, step=0.1, sleepers=1)
    assert 6.0 <= server.sent[-1][0] - start <= 6.0 + RETRY_MOST + 0.11
    (given_up,) = events(caplog, "event.given_up")
    assert given_up["level"] == logging.WARNING and given_up["reason"] == "RunLost"
    assert queue.pending() == 0 and queue.posted == 0


def test_a_refused_event_is_not_sent_again(caplog: pytest.LogCaptureFixture) -> None:
    server = FakeServer(FakeClock(), Invalid("create: HTTP 422"))
    queue = Queue(server)
    with caplog.at_level(logging.DEBUG, logger="k8slease"):
        queue.post(LEASE, reason="JobFailed", message="boom", type_="Warning")
        poll(
            "queue.refused == 1 and queue.pending() == 0",
            lambda: queue.refused == 1 and queue.pending() == 0,
            5,
            every=0.005,
        )
    assert len(server.sent) == 1
    (failed,) = events(caplog, "event.post_failed")
    assert failed["level"] == logging.WARNING and "retrying" not in failed


def test_an_already_existing_event_counts_as_posted() -> None:
    server = FakeServer(FakeClock(), AlreadyExists("create: HTTP 409"))
    queue = Queue(server)
    queue.post(LEASE, reason="JobFailed", message="boom", type_="Warning")
    poll(
        "queue.posted == 1 and queue.pending() == 0",
        lambda: queue.posted == 1 and queue.pending() == 0,
        5,
        every=0.005,
    )


def test_a_full_queue_drops_counts_and_says_so_at_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = FakeServer(FakeClock())
    queue = Queue(server, capacity=2)
    server.hold.clear()
    with caplog.at_level(logging.DEBUG, logger="k8slease"):
        assert queue.post(LEASE, reason="A", message="a")
        assert server.entered.wait(5)
        assert queue.post(LEASE, reason="B", message="b")
        assert not queue.post(LEASE, reason="C", message="c")
        assert not queue.post(LEASE, reason="C", message="c2")
        assert not queue.post(LEASE, reason="D", message="d")
        assert queue.dropped == 3
        server.hold.set()
        poll(
            "queue.pending() == 0 and queue.posted == 2",
            lambda: queue.pending() == 0 and queue.posted == 2,
            5,
            every=0.005,
        )
    assert [body["reason"] for _, body, _ in server.sent] == ["A", "B"]
    (full,) = events(caplog, "event.queue_full")  # once per spell, not per Event
    assert full["level"] == logging.WARNING and full["capacity"] == 2
    (ended,) = events(caplog, "event.queue_full_ended")
    assert ended["level"] == logging.WARNING and ended["dropped"] == {"C": 2, "D": 1}


def test_the_same_event_posted_while_one_waits_is_folded_into_it() -> None:
    server = FakeServer(FakeClock())
    queue = Queue(server, capacity=2)
    server.hold.clear()
    queue.post(LEASE, reason="A", message="a")
    assert server.entered.wait(5)
    for _ in range(3):
        assert queue.post(LEASE, reason="RunLost", message="same", type_="Warning")
    assert queue.pending() == 2 and queue.dropped == 0
    server.hold.set()
    poll(
        "queue.pending() == 0 and queue.posted == 2",
        lambda: queue.pending() == 0 and queue.posted == 2,
        5,
        every=0.005,
    )
    folded = server.sent[-1][1]
    assert folded["reason"] == "RunLost" and folded["count"] == 3


def test_bad_options_are_refused() -> None:
    server = FakeServer(FakeClock())
    with pytest.raises(ValueError, match="bound"):
        Queue(server, bound=0)
    with pytest.raises(ValueError, match="capacity"):
        Queue(server, capacity=0)


EXITING = """
import time
from kubernetes import client
from k8slease.clock import SystemClock
from k8slease.kube.eventqueue import QueuedEvents

class Slow(QueuedEvents):
    def send_body(self, body, *, timeout):
        time.sleep(0.5)  # a slow server
        print("created", body["reason"], flush=True)

queue = Slow(client.ApiClient(), "default", bound=30, connect=10, clock=SystemClock())
queue.post({"kind": "Lease", "metadata": {"name": "g.tick"}}, reason="JobLockLost", message="m")
"""


def test_events_still_waiting_when_the_process_exits_are_posted_first() -> None:
    """A replica stopped gracefully right after a run lost its lock still reports it."""
    done = subprocess.run(
        [sys.executable, "-c", EXITING], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.splitlines() == ["created JobLockLost"], done.stderr


def test_an_unexpected_error_refuses_that_event_and_the_queue_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    server = FakeServer(clock)
    queue = Queue(server)
    broken = {"apiVersion": "v1", "kind": "Lease", "metadata": {"name": "broken"}}
    real_send = server.send

    def send(body: Mapping[str, Any], timeout: Any) -> None:
        if body["involvedObject"]["name"] == "broken":
            raise KeyError("a bug")
        real_send(body, timeout)

    server.send = send  # type: ignore[method-assign]
    with caplog.at_level(logging.DEBUG, logger="k8slease"):
        queue.post(broken, reason="RunLost", message="x")
        queue.post(LEASE, reason="TicksDropped", message="y")
        poll(
            "queue.refused == 1 and queue.posted == 1",
            lambda: queue.refused == 1 and queue.posted == 1,
            5,
            every=0.005,
        )
    assert events(caplog, "event.post_crashed")

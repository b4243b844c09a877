"""Issue 23: a crashed background thread never looks healthy.

Each thread is killed by an injected exception (not a ``TransportError``: a bug, or content a
decoder choked on): the elector's command loop and watchdog stop the election for good and
``healthy()`` (``/healthz``) fails from then on; the watch and the job informer restart with
backoff and fail ``healthy()`` only until they are back; a lock keepalive that dies marks its
grant lost at once.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from k8slease import LeaderElector
from k8slease.clock import SystemClock
from k8slease.election.seams import Seams
from k8slease.errors import Unavailable
from k8slease.jobs.lock import JobLock
from k8slease.lease.informer import LeaseInformer
from k8slease.lease.observe import Observations
from k8slease.logs import get_logger
from k8slease.metrics import NoopMetrics
from tests.support.timing import MEMORY_FAST as FAST
from tests.unit.election.elector_memstore import MemoryLeaseStore, MemoryTransport


class Injected(RuntimeError):
    """The exception a test injects into a thread."""


def make(transport: MemoryTransport, made: list[LeaderElector]) -> LeaderElector:
    elector = LeaderElector(
        "demo", identity="r0", seams=Seams(transport=transport), metrics=NoopMetrics(), **FAST
    )
    made.append(elector)
    return elector


def started_crashing(
    electors: list[LeaderElector], monkeypatch: pytest.MonkeyPatch, method: str, where: str
) -> LeaderElector:
    """A started elector on a fresh store whose runner's ``method`` (the body of one of its
    threads) is replaced by one that raises :class:`Injected` at once, naming ``where``."""
    elector = make(MemoryTransport(MemoryLeaseStore()), electors)

    def boom() -> None:
        raise Injected(f"injected into {where}")

    monkeypatch.setattr(elector._runner, method, boom)
    elector.start()
    return elector


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_crashed_command_loop_fails_healthz_for_good(
    electors: list[LeaderElector], monkeypatch: pytest.MonkeyPatch
) -> None:
    elector = started_crashing(
        electors, monkeypatch, "_loop_commands", "the elector's command loop"
    )
    assert elector.wait(timeout=10), "the command loop ended"
    threads = elector._runner.threads
    assert "elector" in threads.down() and "Injected" in threads.down()["elector"]
    # before issue 23 this was True: the crash looked like a requested stop
    assert not elector.healthy()
    assert not elector.ready()


def test_a_crashed_watchdog_stops_the_election_and_fails_healthz(
    electors: list[LeaderElector], monkeypatch: pytest.MonkeyPatch
) -> None:
    elector = started_crashing(electors, monkeypatch, "_watch_deadline", "the watchdog")
    assert elector.wait(timeout=10), "a dead watchdog stops the election"
    assert list(elector._runner.threads.down()) == ["watchdog"]
    assert not elector.healthy() and not elector.is_leader


class CrashingWatch(MemoryTransport):
    """Its first watch raises a non-transport exception; the next one waits for ``gate``."""

    def __init__(self, store: MemoryLeaseStore) -> None:
        super().__init__(store)
        self.watch_calls = 0
        self.gate = threading.Event()

    def watch(self, **kwargs: Any) -> Iterator[Any]:
        self.watch_calls += 1
        if self.watch_calls == 1:
            raise Injected("injected into the watch")
        if not self.gate.wait(timeout=30):
            raise Unavailable("test gate never opened")
        yield from super().watch(**kwargs)


def test_a_crashed_watch_fails_healthz_until_it_is_back(electors: list[LeaderElector]) -> None:
    transport = CrashingWatch(MemoryLeaseStore())
    elector = make(transport, electors).start()
    threads = elector._runner.threads
    assert threads.wait_until(False, timeout=10), "the watch crash is reported"
    assert "watch" in threads.down()
    assert not elector.healthy()
    transport.gate.set()  # the restarted watch delivers the Lease
    assert threads.wait_until(True, timeout=10), "the watch is back"
    assert elector.healthy()


class CrashingList:
    """A transport for the informer whose first list raises a non-transport exception."""

    namespace = "default"

    def __init__(self) -> None:
        self.lists = 0
        self.listed_again = threading.Event()
        self.stop = threading.Event()

    def list(self, *, label_selector: str) -> tuple[list[dict[str, Any]], str]:
        self.lists += 1
        if self.lists == 1:
            raise Injected("injected into the informer")
        self.listed_again.set()
        return [], "1"

    def watch(self, **kwargs: Any) -> Iterator[Any]:
        self.stop.wait(timeout=30)
        return iter(())


def test_a_crashed_informer_fails_health_until_it_lists_again() -> None:
    transport = CrashingList()
    informer = LeaseInformer(
        transport,  # type: ignore[arg-type]
        Observations(SystemClock()),
        label_selector="k8slease.io/group=g",
        retry_interval=0.2,
    )
    informer.start()
    try:
        assert informer.threads.wait_until(False, timeout=10)
        assert "Injected" in informer.threads.down()["informer"]
        assert informer.threads.wait_until(True, timeout=10), "restarted after its backoff"
        assert transport.lists == 2
    finally:
        informer.stop()
        transport.stop.set()


def test_jobs_healthy_reads_the_informer_threads() -> None:
    from k8slease.jobs.registry import Jobs

    jobs = Jobs.__new__(Jobs)
    informer = LeaseInformer.__new__(LeaseInformer)
    from k8slease.kube.supervise import ThreadHealth

    informer.threads = ThreadHealth()
    jobs._informer = informer
    jobs._elector = None
    jobs.runners = {}
    assert jobs.healthy()
    try:
        raise Injected("informer")
    except Injected as exc:
        informer.threads.crashed("informer", exc, log=get_logger("k8slease.test"), for_good=False)
    assert not jobs.healthy()


class _Grant:
    tick = __import__("datetime").datetime(2026, 1, 1)

    def __init__(self) -> None:
        self.lost = threading.Event()

    def mark_lost(self) -> None:
        self.lost.set()


def test_a_crashed_keepalive_marks_its_grant_lost_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    lock = JobLock.__new__(JobLock)
    lock._log = get_logger("k8slease.test").bind(job="nightly", group="billing")

    def boom(grant: Any) -> None:
        raise Injected("injected into the keepalive")

    monkeypatch.setattr(lock, "_keep", boom)
    grant = _Grant()
    lock._keepalive_loop(grant)  # type: ignore[arg-type]
    assert grant.lost.is_set(), "the run hears at once that nobody keeps its lock"

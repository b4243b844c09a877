"""A job Lease in memory that can lose answers, and what the lock tests share around it
(``tests.support.jobleases``).

The store applies conditional writes like kube-apiserver and can lose an answer: the write is
applied (now, or later) and the caller gets ``Unavailable`` as on a timeout (issue 26).
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from apscheduler.triggers.interval import IntervalTrigger
from kubernetes import client

from k8slease import TickLock
from k8slease.errors import AlreadyExists, Conflict, NotFound, Unavailable
from k8slease.jobs.context import JobOwner
from k8slease.jobs.lock import Grant, JobLock
from k8slease.jobs.runner import TickRunner
from k8slease.jobs.spec import JobSpec, Mode
from k8slease.lease.jobrecord import JobState, RunRecord, lease_with_job_state
from k8slease.lease.keptruns import KeptRun, encode_journal
from k8slease.lease.record import LeaseRecord, new_lease
from k8slease.lease.transport import LeaseTransport
from k8slease.lease.view import LeaseView
from k8slease.metrics import JobMetrics, NoopJobMetrics
from k8slease.names import LABEL_GROUP, LABEL_JOB, LABEL_ROLE, ROLE_JOB, job_lease_name
from tests.support.factories import make_lock
from tests.support.fakeclock import FakeClock


class LosingStore:
    """One job Lease with resourceVersions; ``lose`` loses the answers of the next writes
    (``"applied"``: applied then lost; ``"down"``: not applied; ``"later"``: applied when
    :meth:`land` is called)."""

    namespace = "default"
    request_timeout = 5.0

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.rv = 0
        self.lose: list[str] = []
        self.down = False
        self.late: list[dict[str, Any]] = []
        self.writes = 0

    def _store(self, body: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        stored = copy.deepcopy(body)
        stored["metadata"]["resourceVersion"] = str(self.rv)
        stored["metadata"].setdefault("uid", "u1")
        self.lease = stored
        self.writes += 1
        return copy.deepcopy(stored)

    def get(self, name: str) -> dict[str, Any]:
        if self.down:
            raise Unavailable("timed out", status=None)
        if self.lease is None:
            raise NotFound("not found", status=404)
        return copy.deepcopy(self.lease)

    def _write(self, body: dict[str, Any], check: Any) -> dict[str, Any]:
        if self.down:
            raise Unavailable("timed out", status=None)
        mode = self.lose.pop(0) if self.lose else ""
        if mode == "down":
            raise Unavailable("timed out", status=None)
        if mode == "later":
            self.late.append(body)
            raise Unavailable("timed out", status=None)
        check(body)
        written = self._store(body)
        if mode == "applied":
            raise Unavailable("connection reset", status=None)
        return written

    def _check_create(self, body: dict[str, Any]) -> None:
        if self.lease is not None:
            raise AlreadyExists("exists", status=409, reason="AlreadyExists")

    def _check_replace(self, body: dict[str, Any]) -> None:
        if self.lease is None:
            raise NotFound("gone", status=404)
        if body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
            raise Conflict("conflict", status=409, reason="Conflict")

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._write(body, self._check_create)

    def replace(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._write(body, self._check_replace)

    def land(self) -> None:
        """Apply the writes whose answers were lost, as the server resuming would."""
        for body in self.late:
            if "resourceVersion" in body["metadata"]:
                self._check_replace(body)
            else:
                self._check_create(body)
            self._store(body)
        self.late.clear()

    def view(self) -> LeaseView:
        assert self.lease is not None
        return LeaseView.decode(self.lease)


#: The owner of the runners these tests build: replica ``r0`` of group ``g`` (:func:`job_lock`'s).
R0 = JobOwner("g", "r0")


def job_lock(
    store: LosingStore,
    clock: FakeClock,
    me: str = "r0",
    *,
    at_most: float = 600,
    grace: float = 300,
) -> JobLock:
    """``me``'s lock on ``store`` (the defaults: 600 s at most, 300 s of grace)."""
    return make_lock(store, identity=me, lock_at_most_for=at_most, clock=clock, grace=grace)


def tick_at(clock: FakeClock, after: float = 0.0) -> datetime:
    """The tick ``after`` seconds from the fake clock's now."""
    return clock.now() + timedelta(seconds=after)


def succeeded_while_cut_off(store: LosingStore, clock: FakeClock, lock: JobLock) -> datetime:
    """``lock`` runs the tick now and succeeds, its release not written (the server away): the
    record is kept. Returns the tick."""
    tick = tick_at(clock)
    grant = lock.try_acquire(tick)
    assert isinstance(grant, Grant)
    store.down = True
    lock.finish(grant, "succeeded")  # kept: the release could not be written
    store.down = False
    return tick


@contextmanager
def clock_ending_retries() -> Iterator[FakeClock]:
    """A fake clock for a test whose lock keeps a run record: afterwards the clock is moved
    past every retry window, and the retry threads the test started are joined, so that none
    outlives its test (a later test in the same worker would meet it)."""
    before = set(threading.enumerate())
    clock = FakeClock()
    try:
        yield clock
    finally:
        clock.advance(3600)
        for thread in set(threading.enumerate()) - before:
            if thread.name.startswith("k8slease-release-"):
                thread.join(5)
                assert not thread.is_alive(), f"{thread.name} outlived its test"


def logged_events(caplog: pytest.LogCaptureFixture, level: int = logging.WARNING) -> list[str]:
    """The k8slease events (``lock.tick_lost``, ...) logged at ``level`` or above, in order."""
    return [
        getattr(r, "k8slease_event", r.getMessage())
        for r in caplog.records
        if r.levelno >= level and r.name.startswith("k8slease")
    ]


class GatedStore(LosingStore):
    """A job Lease whose first ``gated`` write (``"create"``: the first claim; ``"replace"``: a
    later claim, an extension or a release) sets ``entered`` and then waits for ``go``, at most
    ``wait`` seconds; ``go_in_time`` says whether ``go`` came within them."""

    def __init__(self, gated: str = "create", *, wait: float = 10.0) -> None:
        super().__init__()
        self.gated, self.wait = gated, wait
        self.entered, self.go = threading.Event(), threading.Event()
        self.go_in_time: bool | None = None

    def _gate(self, verb: str) -> None:
        if verb == self.gated and not self.entered.is_set():
            self.entered.set()
            self.go_in_time = self.go.wait(self.wait)

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        self._gate("create")
        return super().create(body)

    def replace(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        self._gate("replace")
        return super().replace(name, body)


def tick_lock_on(
    store: LosingStore, clock: FakeClock, me: str, metrics: JobMetrics | None = None
) -> TickLock:
    """``me``'s ``TickLock`` of group ``g`` on ``store`` (no API server, no Events)."""
    ticks = TickLock(
        "g",
        namespace="default",
        identity=me,
        api_client=client.ApiClient(),
        clock=clock,
        metrics=metrics or NoopJobMetrics(),
    )
    ticks._wiring = replace(ticks._io(), transport=store, events=None)  # type: ignore[arg-type]
    return ticks


class SlowStore(LosingStore):
    """A store whose writes take ``delay`` seconds of the fake clock."""

    def __init__(self, clock: FakeClock, delay: float) -> None:
        super().__init__()
        self.clock, self.delay = clock, delay

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        self.clock.advance(self.delay)
        return super().create(body)


class Leadership:
    """Leads until ``until`` on the monotonic clock (as the elector's belief ends)."""

    def __init__(self, clock: FakeClock, until: float) -> None:
        self.clock, self.until = clock, until

    def __call__(self) -> bool:
        return self.clock.monotonic() < self.until


def leader_runner(
    clock: FakeClock, store: LosingStore, func: Any, leading: Leadership, **lock: float
) -> TickRunner:
    """r0's runner of a LEADER-class job every 10 s, its lock (``_lock`` options ``lock``) on
    ``store``, leading while ``leading()`` says so."""
    spec = JobSpec(name="job", func=func, mode=Mode.LEADER, trigger=IntervalTrigger(seconds=10))
    return TickRunner(
        spec,
        R0,
        lock=job_lock(store, clock, **lock),
        is_leader=leading,
        clock=clock,
    )


def lost_run_lease(api: Any, namespace: str, group: str, holder: str) -> str:
    """Create (through ``api``) the free job Lease ``<group>.run`` whose last run, ``holder``'s,
    a takeover recorded ``lost``; return the journal of that replica, which in truth ran it and
    succeeded, and died before it could say so (its container's termination message)."""
    tick = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
    lost = RunRecord(
        holder=holder, tick=tick, started=tick, finished=tick, outcome="lost",
        fencing_token=4,
    )  # fmt: skip
    free = LeaseRecord("", 1, tick, tick, 1, 5)
    name = job_lease_name(group, "run")
    labels = {LABEL_GROUP: group, LABEL_ROLE: ROLE_JOB, LABEL_JOB: "run"}
    body = new_lease(name, namespace, free, labels=labels)
    state = JobState(claimed_tick=tick, last_run=lost, counts={"lost": 1})
    LeaseTransport(api, namespace).create(lease_with_job_state(body, state))
    ran = replace(lost, outcome="succeeded", finished=tick + timedelta(seconds=3))
    text, _ = encode_journal([KeptRun(name, ran)])
    return text

"""The background retry of a kept release (issue 26) against the claim that carries the same
record: whichever writes it first, the other must see it is done and do nothing, not crash.

A cold CI run caught the retry thread dying on ``assert run is not None`` in
``settle._write_kept_release``: it checked the record was still unwritten, then waited for the
lock while the next claim carried the record and was granted; holding the lock, it found the
Lease naming this replica again and went on to write a record that was no longer there."""

from __future__ import annotations

import threading
from datetime import timedelta
from types import TracebackType
from typing import Any

import pytest

from k8slease.jobs.lock import Grant
from tests.support.fakeclock import FakeClock
from tests.support.jobleases import LosingStore, job_lock


class _Gate:
    """A lock's ``_active_lock`` that holds the kept release's retry thread at the door until
    the test opens it; every other thread passes straight through."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.arrived, self.open = threading.Event(), threading.Event()

    def __enter__(self) -> _Gate:
        if threading.current_thread().name.startswith("k8slease-release-"):
            self.arrived.set()
            assert self.open.wait(5), "the test never opened the gate"
        self.inner.acquire()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.inner.release()


def test_a_kept_release_carried_by_a_claim_while_its_retry_waits_for_the_lock_is_left_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    crashes: list[threading.ExceptHookArgs] = []
    monkeypatch.setattr(threading, "excepthook", crashes.append)
    clock, store = FakeClock(), LosingStore()
    lock = job_lock(store, clock, at_most=30)
    grant = lock.try_acquire(clock.now())
    assert isinstance(grant, Grant)
    store.down = True
    before = set(threading.enumerate())  # (not a retry an earlier test of this worker left)
    lock.finish(grant, "succeeded")  # no answer: the record is kept, a thread retries it
    [retry] = [
        t for t in set(threading.enumerate()) - before if t.name.startswith("k8slease-release-")
    ]
    gate = _Gate(lock._active_lock)
    lock._active_lock = gate  # type: ignore[assignment]
    store.down = False

    clock.advance(1)  # the retry wakes, finds the record unwritten and goes for the lock
    assert gate.arrived.wait(5), "the retry never went for the lock"
    second = lock.try_acquire(clock.now() + timedelta(seconds=10))  # carries the record
    assert isinstance(second, Grant), f"skipped with {second}"
    written = store.view()
    gate.open.set()
    clock.run_until(lambda: not retry.is_alive(), limit=5, step=0.5)

    assert not retry.is_alive()
    assert crashes == [], f"the retry thread died: {crashes[0].exc_value!r}"
    assert store.view().resource_version == written.resource_version, "written twice"
    job = store.view().job
    assert job.count("succeeded") == 1 and job.count("lost") == 0
    assert store.view().record.holder == "r0"  # the second grant, untouched

"""Hole 4 of issue 15 (a holder killed mid-run): the tick it claimed and never finished is
recorded as a lost run by whoever takes the lock over, with a warning and a RunLost Event."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client

from k8slease.jobs.lock import Grant, JobLock
from k8slease.jobs.lockrules import Verdict
from k8slease.lease.jobrecord import job_state_from_lease
from k8slease.testing.server import APIServer
from tests.support.factories import lock_io, make_lock

TICK = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)


def test_a_tick_claimed_by_a_holder_that_died_mid_run_is_reported_lost(
    k8s_embedded_apiserver: APIServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    transport, events, clock = lock_io(k8s_embedded_apiserver, identity="b", wall=TICK)

    def lock(identity: str) -> JobLock:
        return make_lock(
            transport, job="j", identity=identity, lock_at_most_for=60, clock=clock, events=events
        )

    dead, heir = lock("a"), lock("b")
    assert isinstance(dead.try_acquire(TICK), Grant)  # then a is SIGKILLed: no renew, no record
    later = TICK + timedelta(minutes=1)
    assert heir.try_acquire(later) is Verdict.HELD
    clock.advance(60)
    with caplog.at_level(logging.DEBUG, logger="k8slease"):
        grant = heir.try_acquire(later)
    assert isinstance(grant, Grant)
    state = job_state_from_lease(transport.get("g.j"))
    assert state.last_run is not None
    assert (state.last_run.holder, state.last_run.tick, state.last_run.outcome) == (
        "a",
        TICK,
        "lost",
    )
    assert state.counts.get("lost") == 1
    assert [e["lost_tick"] for e in caplog_events(caplog) if e["event"] == "lock.tick_lost"] == [
        TICK.isoformat()
    ]
    raw = client.CoreV1Api(k8s_embedded_apiserver.api_client()).list_namespaced_event(
        "default", _preload_content=False
    )
    assert [e["reason"] for e in json.loads(raw.data)["items"]] == ["RunLost"]


def caplog_events(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    """The k8slease events captured, each as its fields with ``event`` set."""
    return [
        {**getattr(r, "k8slease_fields", {}), "event": getattr(r, "k8slease_event", "")}
        for r in caplog.records
    ]

"""Hole 2 of issue 15: a claimed tick far in the future (a fast wall clock, a hand edit) must not
silence a job: it is reported once (warning and Event) and ticks after the last run are claimed
over it, while a tick that ran is still never claimed again."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client

from k8slease.jobs.lock import Grant
from k8slease.jobs.lockrules import Verdict
from k8slease.lease.jobrecord import job_state_from_lease, lease_with_job_state
from k8slease.testing.server import APIServer
from tests.support.factories import lock_io, make_lock

NOW = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)


def test_a_far_future_claimed_tick_is_reported_once_and_claimed_over(
    k8s_embedded_apiserver: APIServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = k8s_embedded_apiserver
    transport, events, clock = lock_io(server, identity="a", wall=NOW)
    lock = make_lock(
        transport, job="j", identity="a", lock_at_most_for=60, clock=clock, events=events
    )
    first = lock.try_acquire(NOW - timedelta(minutes=1))
    assert isinstance(first, Grant)
    lock.finish(first, "succeeded")
    # a replica whose wall clock runs a day ahead claims "its" tick
    far = NOW + timedelta(days=1)
    lease = transport.get("g.j")
    state = job_state_from_lease(lease)
    transport.replace("g.j", lease_with_job_state(lease, replace(state, claimed_tick=far)))

    with caplog.at_level(logging.DEBUG, logger="k8slease"):
        again = lock.try_acquire(NOW - timedelta(minutes=1))
        assert again is Verdict.ALREADY_CLAIMED, "the tick that ran stays claimed"
        grant = lock.try_acquire(NOW)
        assert isinstance(grant, Grant), "the job is not silenced"
        lock.finish(grant, "succeeded")
    warnings = [e for e in caplog_events(caplog) if e["event"] == "lock.future_claim"]
    assert len(warnings) == 1 and warnings[0]["claimed_tick"] == far.isoformat()
    raw = client.CoreV1Api(server.api_client()).list_namespaced_event(
        "default", _preload_content=False
    )
    posted = [e for e in json.loads(raw.data)["items"] if e["reason"] == "FutureTickClaimed"]
    assert len(posted) == 1 and posted[0]["type"] == "Warning"
    assert job_state_from_lease(transport.get("g.j")).claimed_tick == NOW


def caplog_events(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    """The k8slease events captured, each as its fields with ``event`` set."""
    return [
        {**getattr(r, "k8slease_fields", {}), "event": getattr(r, "k8slease_event", "")}
        for r in caplog.records
    ]

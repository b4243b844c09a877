"""Ticks lost while the API server cannot be asked are reported once, with their count."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from k8slease import Jobs
from k8slease.testing.server import APIServer
from tests.support.factories import make_jobs
from tests.support.timing import NEVER

T0 = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)


@pytest.fixture
def jobs(k8s_embedded_apiserver: APIServer) -> Iterator[Jobs]:
    made = make_jobs(
        "billing", k8s_embedded_apiserver.api_client(), identity="solo", request_timeout=2
    )
    made.cron(NEVER, name="invoices")(lambda ctx: None)
    made.start()
    yield made
    made.stop()


def _events(caplog: pytest.LogCaptureFixture, name: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "k8slease_event", "") == name]


def test_ticks_skipped_while_the_api_is_unreachable_are_counted_and_reported_at_recovery(
    k8s_embedded_apiserver: APIServer, jobs: Jobs, caplog: pytest.LogCaptureFixture
) -> None:
    server = k8s_embedded_apiserver
    server.faults.add(("get", "create", "update"), "leases", status=503)
    with caplog.at_level(logging.DEBUG, logger="k8slease"):
        for minute in range(4):
            assert jobs.fire("invoices", T0 + timedelta(minutes=minute)) is None
        assert jobs.runners["invoices"].losses.count == 4
        assert len(_events(caplog, "job.ticks_being_lost")) == 1
        server.faults.clear()
        assert jobs.fire("invoices", T0 + timedelta(hours=1)) == "succeeded"
    lost = _events(caplog, "job.ticks_lost")
    assert len(lost) == 1 and lost[0].levelno == logging.WARNING
    fields = getattr(lost[0], "k8slease_fields", {})
    assert fields["lost"] == 4 and fields["why"] == "api-unreachable"
    assert fields["first"] == T0.isoformat()
    assert fields["last"] == (T0 + timedelta(minutes=3)).isoformat()


def test_an_outage_still_going_on_at_stop_is_reported_with_its_count(
    k8s_embedded_apiserver: APIServer, jobs: Jobs, caplog: pytest.LogCaptureFixture
) -> None:
    k8s_embedded_apiserver.faults.add(("get", "create", "update"), "leases", status=503)
    with caplog.at_level(logging.DEBUG, logger="k8slease"):
        assert jobs.fire("invoices", T0) is None
        assert jobs.fire("invoices", T0 + timedelta(minutes=1)) is None
        jobs.stop()
    lost = _events(caplog, "job.ticks_lost")
    assert [getattr(r, "k8slease_fields", {})["lost"] for r in lost] == [2]

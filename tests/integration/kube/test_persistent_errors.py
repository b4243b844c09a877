"""A persistent 403 on the job Leases' list is logged once with what to do, then only counted."""

from __future__ import annotations

import logging

import pytest

from k8slease.clock import SystemClock
from k8slease.lease.informer import LeaseInformer
from k8slease.lease.observe import Observations
from k8slease.lease.transport import LeaseTransport
from k8slease.testing.server import APIServer


def test_a_forbidden_list_warns_once_and_recovers(
    k8s_embedded_apiserver: APIServer, caplog: pytest.LogCaptureFixture
) -> None:
    server = k8s_embedded_apiserver
    server.faults.add("list", "leases", status=403)
    transport = LeaseTransport(server.api_client(), "default", request_timeout=5)
    informer = LeaseInformer(
        transport, Observations(SystemClock()), label_selector="a=b", retry_interval=0.02
    )
    with caplog.at_level(logging.DEBUG, logger="k8slease"):
        informer.start()
        # let it fail ten times (real retries, 20 ms apart)
        assert server.stats.wait_until(lambda: server.stats.count("list", "leases") >= 10, 10)
        server.faults.clear()
        assert informer.synced.wait(10)
        informer.stop()
    events = [(r.levelno, getattr(r, "k8slease_event", "")) for r in caplog.records]
    warnings = [e for e in events if e[0] >= logging.WARNING]
    assert warnings == [(logging.WARNING, "request.failed")]
    failed = next(r for r in caplog.records if getattr(r, "k8slease_event", "") == "request.failed")
    assert "RBAC" in failed.k8slease_fields["hint"]  # type: ignore[attr-defined]
    assert sum(1 for e in events if e[1] == "request.failed_again") >= 9
    assert (logging.INFO, "request.recovered") in events

"""Hole 6 of issue 15: a request lasts what its timeout says, not a multiple of it. The
kubernetes client retries a timed-out read three times by itself (urllib3's default), which made
one request last four times its timeout; k8slease's requests are sent without client retries."""

from __future__ import annotations

import time

import pytest

from k8slease.errors import Unavailable
from k8slease.lease.transport import LeaseTransport
from k8slease.testing.server import APIServer

TIMEOUT = 0.4


@pytest.mark.parametrize("verb", ["get", "list", "update"])
def test_a_slow_answer_fails_after_one_timeout_not_four(
    k8s_embedded_apiserver: APIServer, verb: str
) -> None:
    server = k8s_embedded_apiserver
    transport = LeaseTransport(server.api_client(), "default", request_timeout=TIMEOUT)
    body = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "slow", "namespace": "default"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 10},
    }
    lease = transport.create(body)
    fault = server.faults.add(verb, "leases", latency=6 * TIMEOUT)
    started = time.monotonic()
    with pytest.raises(Unavailable):
        if verb == "get":
            transport.get("slow")
        elif verb == "list":
            transport.list()
        else:
            transport.replace("slow", lease)
    elapsed = time.monotonic() - started
    server.faults.remove(fault)
    assert TIMEOUT * 0.9 <= elapsed < TIMEOUT * 1.5, f"{verb} took {elapsed:.2f}s for {TIMEOUT}s"

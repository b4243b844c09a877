"""Persistent request errors back off: a missing namespace costs a request every retry_interval.

The elector runs on a fake clock against the embedded API server, so the request counts are
those of a fixed span of (fake) time, whatever the machine's speed.
"""

from __future__ import annotations

from k8slease import LeaderElector
from k8slease.election.seams import Seams
from k8slease.metrics import NoopMetrics
from k8slease.testing.server import APIServer
from tests.support.fakeclock import FakeClock

TIMING = {"lease_duration": 4, "renew_interval": 1, "renew_deadline": 3, "retry_interval": 1}


def test_a_missing_namespace_is_retried_at_the_retry_interval(
    k8s_embedded_apiserver: APIServer,
) -> None:
    server = k8s_embedded_apiserver
    clock = FakeClock()
    elector = LeaderElector(
        "billing",
        namespace="does-not-exist",
        identity="a",
        api_client=server.api_client(),
        seams=Seams(clock=clock),
        metrics=NoopMetrics(),
        **TIMING,
    )
    elector.start()
    try:
        # the first attempt is real I/O: the server says when it has served it
        assert server.stats.wait_until(lambda: server.stats.count("create", "leases") > 0, 5)
        # the server counts the create before the elector has its answer: wait until both of
        # the elector's threads that wait on its clock (its loop, its watchdog) wait again
        assert clock.settle(sleepers=2), "the elector waits on its clock after a failed create"
        first = server.stats.count("create", "leases")
        assert first == 1
        for _ in range(40):  # 20 s of fake time
            clock.advance(0.5)
            assert clock.settle()
        creates = server.stats.count("create", "leases") - first
        # one attempt per retry_interval (1 s, jittered up to 1.5 s): 13 to 20 in 20 s
        assert 13 <= creates <= 20
        assert server.stats.count("get", "leases") <= creates + 2
        assert not elector.is_leader
    finally:
        elector.stop(timeout=5)

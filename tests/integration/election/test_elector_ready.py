"""``ready()`` (what ``/readyz`` answers): false before the election runs, true while it hears
from the API server, false again when it cannot reach it or has stopped."""

from __future__ import annotations

from kubernetes import client

from k8slease import ElectionTiming, Jobs, LeaderElector
from k8slease.testing.server import APIServer
from tests.support.polling import poll

FAST = {"lease_duration": 3.0, "renew_interval": 0.5, "renew_deadline": 2.0}


def test_ready_follows_the_election_and_the_api_server(
    k8s_embedded_apiserver: APIServer,
) -> None:
    server = k8s_embedded_apiserver
    api = server.api_client()
    client.CoreV1Api(api).create_namespace({"metadata": {"name": "ready"}})
    leader = LeaderElector("g", namespace="ready", identity="a", api_client=api, **FAST)
    candidate = LeaderElector("g", namespace="ready", identity="b", api_client=api, **FAST)
    assert not leader.ready()
    with leader:
        assert leader.wait_until_leading(timeout=10)
        assert leader.ready()
        fault = server.faults.add("watch", "leases", status=503)
        with candidate:
            assert server.stats.wait_until(lambda: fault.hits >= 2, 15), "two refused watches"
            assert not candidate.ready(), "a candidate that cannot watch is not ready"
            server.faults.remove(fault)
            poll("the candidate's watch", candidate.ready, 15)  # asked: no event announces it
    assert not leader.ready() and not candidate.ready()
    api.close()


def test_jobs_ready_needs_a_start(k8s_embedded_apiserver: APIServer) -> None:
    api = k8s_embedded_apiserver.api_client()
    timing = ElectionTiming(**FAST)
    jobs = Jobs("h", namespace="default", identity="a", api_client=api, election=timing)

    @jobs.singleton()
    def sweep(ctx: object) -> None: ...

    assert not jobs.ready()
    with jobs:
        poll("jobs ready", jobs.ready, 15)
    api.close()

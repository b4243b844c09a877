"""Fidelity check: the official client's own ``kubernetes.leaderelection`` elects a leader.

That code (LeaseLock: GET, create on 404, PUT with the read resourceVersion) was written by
others against real clusters; it working here, including a failover, is evidence that our
Conflict/NotFound/resourceVersion semantics are the real ones.
"""

from __future__ import annotations

import threading

import pytest
from kubernetes import client
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

pytestmark = [pytest.mark.conformance]


class Candidate:
    """One elector in a thread; leads until told to step down."""

    def __init__(
        self, identity: str, namespace: str, api_client: client.ApiClient, log: list[str]
    ) -> None:
        self.identity = identity
        self.step_down = threading.Event()
        self.leading = threading.Event()
        self._log = log
        # LeaseLock takes the process-wide default ApiClient when it is built.
        previous = client.ApiClient._default
        client.ApiClient.set_default(api_client)
        try:
            lock = LeaseLock("election", namespace, identity)
        finally:
            client.ApiClient.set_default(previous)
        config = electionconfig.Config(
            lock, lease_duration=3, renew_deadline=2, retry_period=1,
            onstarted_leading=self._lead, onstopped_leading=lambda: None,
        )  # fmt: skip
        self.thread = threading.Thread(
            target=leaderelection.LeaderElection(config).run, name=identity, daemon=True
        )

    def _lead(self) -> None:
        self._log.append(self.identity)
        self.leading.set()
        self.step_down.wait()
        raise RuntimeError("stepping down")  # makes LeaderElection stop renewing


def first(events: list[threading.Event], timeout: float) -> int:
    """Index of the first event set within ``timeout`` (-1 if none)."""
    fired = threading.Event()
    for event in events:
        threading.Thread(
            target=lambda e=event: e.wait(timeout) and fired.set(), daemon=True
        ).start()
    fired.wait(timeout)
    return next((i for i, e in enumerate(events) if e.is_set()), -1)


def test_official_lease_lock_elects_one_leader_and_fails_over(
    k8s_api_client: client.ApiClient, k8s_namespace: str
) -> None:
    log: list[str] = []
    candidates = [Candidate(name, k8s_namespace, k8s_api_client, log) for name in ("alpha", "beta")]
    for candidate in candidates:
        candidate.thread.start()
    try:
        winner = first([c.leading for c in candidates], timeout=20)
        assert winner >= 0, "nobody was elected"
        leader, other = candidates[winner], candidates[1 - winner]
        lease = client.CoordinationV1Api(k8s_api_client).read_namespaced_lease(
            "election", k8s_namespace
        )
        assert lease.spec.holder_identity == leader.identity
        assert log == [leader.identity]

        leader.step_down.set()
        assert other.leading.wait(20), "the follower did not take over"
        lease = client.CoordinationV1Api(k8s_api_client).read_namespaced_lease(
            "election", k8s_namespace
        )
        assert lease.spec.holder_identity == other.identity
        assert log == [leader.identity, other.identity]
    finally:
        for candidate in candidates:
            candidate.step_down.set()
    leader.thread.join(10)
    other.thread.join(10)
    assert not leader.thread.is_alive() and not other.thread.is_alive()

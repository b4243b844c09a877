"""Lease records written by client-go, read by k8slease, and the reverse.

client-go (``tests/peers/clientgo``) writes ``holderIdentity: ""`` and ``leaseDurationSeconds: 1``
on release and knows nothing of k8slease's annotation; k8slease writes an absent holder on
release, an annotation and labels. Each must read the other's Lease as intended: a holder holds,
a release frees the Lease at once, and nothing the other wrote is lost.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from k8slease import LeaderElector
from k8slease.lease.record import lease_with_record
from k8slease.lease.transport import LeaseTransport
from k8slease.names import LABEL_GROUP
from tests.integration.election.clientgo_fixtures import (  # noqa: F401
    Spawn,
    clientgo_binary_fixture,
    peers_fixture,
)
from tests.integration.election.elector_helpers import LeaseWatcher
from tests.peers.peerproc import PeerProcess, Timing

pytestmark = pytest.mark.slow

TIMING = Timing()
START_TIMEOUT = 30.0


def our_elector(api_client: Any, namespace: str, identity: str) -> LeaderElector:
    return LeaderElector(
        "interop",
        namespace=namespace,
        identity=identity,
        lease_duration=TIMING.lease_duration,
        renew_interval=TIMING.renew_interval,
        renew_deadline=TIMING.renew_deadline,
        retry_interval=1.0,
        api_client=api_client,
    )


def test_k8slease_reads_a_clientgo_lease_and_takes_its_release_at_once(
    peers: tuple[Spawn, list[PeerProcess]], k8s_api_client: Any, k8s_namespace: str
) -> None:
    spawn, _ = peers
    watch = LeaseWatcher(k8s_api_client, k8s_namespace, "interop")
    try:
        go = spawn("clientgo", "go-1")
        go.wait_for("started_leading", START_TIMEOUT)
        _, held = watch.wait_for(lambda r: r.holder == "go-1", 5)
        assert held.problems == ()
        assert held.duration_seconds == int(TIMING.lease_duration)
        assert held.transitions == 0 and held.fencing_token == 0
        assert held.acquire_time is not None and held.renew_time is not None
        assert held.acquire_time <= held.renew_time
        lease = next(raw for _, r, raw in watch.history if r == held)
        # our converter writes a client-go Lease back without losing or changing its spec
        assert lease_with_record(lease, held)["spec"] == lease["spec"]

        stopping = time.monotonic()
        go.terminate()
        assert go.wait_exit() == 0
        _, released = watch.wait_for(lambda r: not r.held, 5, after=stopping)
        raw = watch.history[-1][2]
        assert raw["spec"].get("holderIdentity") == "", "client-go releases with an empty string"
        assert released.problems == ()
        assert released.duration_seconds == 1 and released.transitions == 0

        # a released Lease is free: k8slease takes it without waiting for any duration
        elector = our_elector(k8s_api_client, k8s_namespace, "py-1")
        began = time.monotonic()
        with elector:
            assert elector.wait_until_leading(TIMING.lease_duration)
            took = time.monotonic() - began
            assert took < 1.0, f"took {took:.3f}s to take a released client-go Lease"
            assert elector.fencing_token == 1
            _, ours = watch.wait_for(lambda r: r.holder == "py-1", 5)
            assert ours.transitions == 1 and ours.problems == ()
    finally:
        watch.close()


def test_clientgo_waits_for_a_k8slease_holder_and_keeps_what_it_wrote(
    peers: tuple[Spawn, list[PeerProcess]], k8s_api_client: Any, k8s_namespace: str
) -> None:
    spawn, _ = peers
    watch = LeaseWatcher(k8s_api_client, k8s_namespace, "interop")
    elector = our_elector(k8s_api_client, k8s_namespace, "py-1")
    try:
        elector.start()
        assert elector.wait_until_leading(START_TIMEOUT)
        token = elector.fencing_token
        go = spawn("clientgo", "go-1")
        seen = go.wait_for("new_leader", START_TIMEOUT, where=lambda e: e["leader"] == "py-1")
        # our holder renews for longer than the lease duration: client-go must keep waiting
        wait_until = float(seen["time"]) + TIMING.lease_duration + 1.0
        watch.wait_for(
            lambda r: r.renew_time is not None and r.renew_time.timestamp() > wait_until,
            TIMING.lease_duration * 3,
        )
        assert go.count("started_leading") == 0, "client-go took a Lease k8slease held"

        stopping = time.monotonic()
        stopped = time.time()
        elector.stop()
        started = go.wait_for("started_leading", TIMING.lease_duration)
        took = float(started["time"]) - stopped
        assert took < TIMING.retry_period * 2.2 + 0.3, f"client-go took {took:.3f}s after release"
        _, theirs = watch.wait_for(lambda r: r.holder == "go-1", 5, after=stopping)
        lease = next(raw for _, r, raw in watch.history if r == theirs)
        assert theirs.problems == ()
        assert theirs.transitions == 1, "client-go counts the new holder as we do"
        assert theirs.fencing_token == token, "client-go carries our annotation along"
        assert lease["metadata"]["labels"][LABEL_GROUP] == "interop"
    finally:
        elector.stop()
        watch.close()


def test_strategy_and_preferred_holder_stay_valid_for_both(
    peers: tuple[Spawn, list[PeerProcess]], k8s_api_client: Any, k8s_namespace: str
) -> None:
    """k8slease keeps ``strategy``/``preferredHolder`` it does not own; client-go (uncoordinated)
    drops both on its writes. Every version stays a valid Lease."""
    spawn, _ = peers
    transport = LeaseTransport(k8s_api_client, k8s_namespace, request_timeout=5)
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "interop"},
            "spec": {"strategy": "OldestEmulationVersion", "preferredHolder": "py-1"}}  # fmt: skip
    created = transport.create(body)
    if created["spec"].get("strategy") != "OldestEmulationVersion":
        pytest.skip("this server drops Lease.spec.strategy (CoordinatedLeaderElection is off)")
    watch = LeaseWatcher(k8s_api_client, k8s_namespace, "interop")
    elector = our_elector(k8s_api_client, k8s_namespace, f"py-{uuid.uuid4().hex[:4]}")
    try:
        elector.start()
        assert elector.wait_until_leading(START_TIMEOUT)
        watch.wait_for(lambda r: r.holder == elector.identity, 5)
        go = spawn("clientgo", "go-1")
        go.wait_for("new_leader", START_TIMEOUT, where=lambda e: e["leader"] == elector.identity)
        stopping = time.monotonic()
        elector.stop()
        go.wait_for("started_leading", TIMING.lease_duration)
        watch.wait_for(lambda r: r.holder == "go-1", 5, after=stopping)
        for _, record, raw in watch.history:
            spec = raw["spec"]
            assert record.problems == (), raw
            if record.holder == elector.identity or not record.held:
                assert spec.get("strategy") == "OldestEmulationVersion", raw
                assert spec.get("preferredHolder") == "py-1", raw
            else:  # client-go's own writes: uncoordinated election leaves both out
                assert "strategy" not in spec and "preferredHolder" not in spec, raw
    finally:
        elector.stop()
        watch.close()
        transport.close_watches()

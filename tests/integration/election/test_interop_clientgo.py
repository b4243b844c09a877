"""k8slease and client-go (``tools/leaderelection`` with a ``LeaseLock``) on one Lease.

Electors of both implementations run as processes (``tests/peers``) against ``k8s_apiserver``
and are killed (SIGKILL) and stopped (SIGTERM, which releases the Lease: ``ReleaseOnCancel`` for
client-go) in turns, in each direction. Both print their leadership on this machine's wall
clock, so the terms can be compared: never two leaders. A crashed leader is replaced within the
lease duration plus the successor's polling; a released Lease is taken at once. Every version of
the Lease the test watched is valid for both implementations, and k8slease's fencing token keeps
growing across terms held by client-go (which carries the annotation along untouched).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from k8slease.lease.record import LeaseRecord
from k8slease.names import ANN_FENCING_TOKEN
from tests.integration.election.clientgo_fixtures import (  # noqa: F401
    Spawn,
    clientgo_binary_fixture,
    peers_fixture,
)
from tests.integration.election.elector_helpers import LeaseWatcher
from tests.peers.peerproc import PeerProcess, Timing, overlaps

pytestmark = pytest.mark.slow

TIMING = Timing()
#: client-go polls every retry period times a jitter of up to 2.2; it notices a crash only from
#: its own observation of the last change, then needs one more poll after expiry.
CLIENTGO_POLL = TIMING.retry_period * 2.2
CRASH_BOUND = {"clientgo": TIMING.lease_duration + 2 * CLIENTGO_POLL,
               "k8slease": TIMING.lease_duration + TIMING.retry_period}  # fmt: skip
RELEASE_BOUND = {"clientgo": CLIENTGO_POLL + 0.3, "k8slease": 0.3}
START_TIMEOUT = 30.0


def handover(leader: PeerProcess, successor: PeerProcess, how: str) -> float:
    """Kill or stop ``leader`` once ``successor`` has seen it lead; seconds until it took over."""
    successor.wait_for("new_leader", START_TIMEOUT, where=lambda e: e["leader"] == leader.identity)
    if how == "kill":
        gone = leader.kill()
        started = successor.wait_for("started_leading", TIMING.lease_duration * 3)
        took = float(started["time"]) - gone
        assert took <= CRASH_BOUND[successor.kind], f"{successor.kind} took {took:.3f}s to replace"
    else:
        sent = leader.terminate()
        started = successor.wait_for("started_leading", TIMING.lease_duration * 3)
        assert leader.wait_exit() == 0, f"{leader.identity} did not exit cleanly on SIGTERM"
        took = float(started["time"]) - sent
        assert took <= RELEASE_BOUND[successor.kind], (
            f"{successor.kind} took {took:.3f}s after release"
        )
    print(f"{how}: {leader.kind} -> {successor.kind} in {took:.3f}s")
    return took


def check_lease_history(history: list[tuple[float, LeaseRecord, dict[str, Any]]],
                        identities: set[str]) -> None:  # fmt: skip
    """Every version is well-formed for both; transitions count new holders; tokens never drop."""
    previous: LeaseRecord | None = None
    for _, record, lease in history:
        spec = lease["spec"]
        assert record.problems == (), (record.problems, lease)
        assert record.holder in identities | {""}, lease
        assert record.duration_seconds in (1, int(TIMING.lease_duration)), lease
        assert record.acquire_time is not None and record.renew_time is not None, lease
        assert record.acquire_time <= record.renew_time, lease
        if not record.held:
            assert record.duration_seconds == 1, f"a release writes leaseDurationSeconds 1: {lease}"
        assert "preferredHolder" not in spec or spec.get("strategy"), lease
        if previous is not None:
            new_holder = record.held and record.holder != previous.holder
            assert record.transitions == previous.transitions + int(new_holder), (previous, lease)
            assert record.fencing_token >= previous.fencing_token, (previous, lease)
        previous = record


def test_leadership_moves_between_clientgo_and_k8slease_in_turns(
    peers: tuple[Spawn, list[PeerProcess]],
    k8s_api_client: Any,
    k8s_namespace: str,
) -> None:
    spawn, started = peers
    watch = LeaseWatcher(k8s_api_client, k8s_namespace, "interop")
    try:
        py1 = spawn("k8slease", "py-1")
        first = py1.wait_for("started_leading", START_TIMEOUT)
        go1 = spawn("clientgo", "go-1")
        handover(py1, go1, "kill")  # crash: k8slease -> client-go

        py2 = spawn("k8slease", "py-2")
        handover(go1, py2, "kill")  # crash: client-go -> k8slease
        second = py2.wait_for("started_leading", 0)

        go2 = spawn("clientgo", "go-2")
        handover(py2, go2, "term")  # release: k8slease -> client-go

        py3 = spawn("k8slease", "py-3")
        handover(go2, py3, "term")  # release: client-go -> k8slease
        third = py3.wait_for("started_leading", 0)
        stopping = time.monotonic()
        py3.terminate()
        assert py3.wait_exit() == 0

        tokens = [first["fencing_token"], second["fencing_token"], third["fencing_token"]]
        assert tokens == [tokens[0], tokens[0] + 1, tokens[0] + 2], tokens
        # client-go's terms carried k8slease's annotation along unchanged
        for _, record, lease in watch.history:
            if record.holder.startswith("go-"):
                assert lease["metadata"]["annotations"][ANN_FENCING_TOKEN] in {
                    str(t) for t in tokens
                }, lease

        terms = [term for peer in started for term in peer.intervals()]
        assert len(terms) == 5, terms
        assert overlaps(terms) == [], "two leaders at once"

        _, final = watch.wait_for(lambda r: not r.held, 5, after=stopping)
        assert final.transitions == 4, "one transition per new holder, releases excluded"
        check_lease_history(watch.history, {p.identity for p in started})
    finally:
        watch.close()


def test_a_mixed_crowd_never_has_two_leaders(
    peers: tuple[Spawn, list[PeerProcess]], k8s_api_client: Any, k8s_namespace: str
) -> None:
    """Two electors of each implementation race for every release and every expiry; whoever
    wins, there is one leader at a time and the Lease stays valid for both."""
    spawn, started = peers
    watch = LeaseWatcher(k8s_api_client, k8s_namespace, "interop")
    try:
        crowd = [
            spawn(kind, f"{kind[:2]}-{i}") for i in (1, 2) for kind in ("k8slease", "clientgo")
        ]
        _, record = watch.wait_for(lambda r: r.held, START_TIMEOUT)
        for serial, how in enumerate(("term", "kill", "term", "kill"), start=3):
            (leader,) = [p for p in crowd if p.identity == record.holder]
            leader.wait_for("started_leading", START_TIMEOUT)
            others = [p for p in crowd if p is not leader]
            for other in others:
                other.wait_for(
                    "new_leader", START_TIMEOUT, where=lambda e, x=leader: e["leader"] == x.identity
                )
            at = time.monotonic()
            gone = leader.kill() if how == "kill" else leader.terminate()
            _, record = watch.wait_for(
                lambda r, x=leader: r.held and r.holder != x.identity,
                TIMING.lease_duration * 3,
                after=at,
            )
            (winner,) = [p for p in others if p.identity == record.holder]
            took = float(winner.wait_for("started_leading", 5)["time"]) - gone
            print(f"{how}: {leader.kind} -> {winner.kind} in {took:.3f}s")
            if how == "term":
                assert leader.wait_exit() == 0
                assert took <= RELEASE_BOUND[winner.kind]
            else:
                assert took <= CRASH_BOUND[winner.kind]
            crowd = [*others, spawn(leader.kind, f"{leader.kind[:2]}-{serial}")]
        terms = [term for peer in started for term in peer.intervals()]
        assert overlaps(terms) == [], "two leaders at once"
        check_lease_history(watch.history, {p.identity for p in started})
    finally:
        watch.close()

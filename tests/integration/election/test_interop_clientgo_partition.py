"""A k8slease leader cut off from the API server, with a client-go candidate that is not.

client-go compares ``renewTime`` at whole seconds (docs/interop.md), so it may time the expiry
from a renew up to a second older than the leader's last one. The k8slease leader reaches the
server through a relay (``tests/peers/cutoff.py``) that the test cuts right after a renew that
client-go cannot tell from the one before (same whole second). The leader then believes it leads
until ``renew_deadline`` after that renew was sent; client-go takes over ``lease_duration`` after
it saw the renew before. With ``lease_duration - renew_deadline`` above 1 s the terms never
overlap; below the renew interval, they do (the documented hazard).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from k8slease.lease.record import LeaseRecord
from tests.integration.election.clientgo_fixtures import clientgo_binary_fixture  # noqa: F401
from tests.integration.election.elector_helpers import LeaseWatcher
from tests.peers.cutoff import relayed_kubeconfig
from tests.peers.peerproc import PeerProcess, Timing, overlaps

pytestmark = pytest.mark.slow

LEASE = 3.0
RENEW = 0.8
CLIENTGO = Timing(lease_duration=LEASE, renew_deadline=2.0, retry_period=0.1)


def wait_for_invisible_renew(watch: LeaseWatcher, holder: str, timeout: float) -> LeaseRecord:
    """Wait until the latest version is a renew by ``holder`` whose renewTime has the whole
    second of the version before (client-go cannot tell the two apart); returns it."""

    def found() -> LeaseRecord | None:
        if len(watch.history) < 2:
            return None
        before, after = watch.history[-2][1], watch.history[-1][1]
        if before.holder != holder or after.holder != holder:
            return None
        if before.renew_time is None or after.renew_time is None:
            return None
        same_second = after.renew_time.replace(microsecond=0) == before.renew_time.replace(
            microsecond=0
        )
        return after if same_second and after.renew_time > before.renew_time else None

    with watch.cond:
        assert watch.cond.wait_for(lambda: found() is not None, timeout), "no same-second renew"
        record = found()
        assert record is not None
        return record


@pytest.mark.parametrize(
    "renew_deadline",
    [
        pytest.param(LEASE - 1.1, id="margin-1.1s"),
        pytest.param(
            LEASE - 0.1,
            id="margin-0.1s",
            marks=pytest.mark.xfail(strict=True, reason="the hazard docs/interop.md describes"),
        ),
    ],
)
def test_a_cut_off_k8slease_leader_and_a_clientgo_candidate(
    renew_deadline: float,
    clientgo_binary: Path,
    k8s_apiserver: Any,
    k8s_api_client: Any,
    k8s_namespace: str,
    tmp_path: Path,
) -> None:
    relay, relayed = relayed_kubeconfig(Path(k8s_apiserver.kubeconfig), tmp_path / "relayed")
    ours = Timing(lease_duration=LEASE, renew_deadline=renew_deadline, renew_interval=RENEW)
    common = {"namespace": k8s_namespace, "lease": "interop", "stderr_dir": tmp_path}
    watch = LeaseWatcher(k8s_api_client, k8s_namespace, "interop")
    py = PeerProcess("k8slease", kubeconfig=relayed, identity="py-1", timing=ours, **common)
    go: PeerProcess | None = None
    try:
        py.wait_for("started_leading", 30)
        go = PeerProcess("clientgo", kubeconfig=Path(k8s_apiserver.kubeconfig), identity="go-1",
                         timing=CLIENTGO, **common)  # fmt: skip
        go.wait_for("new_leader", 30, where=lambda e: e["leader"] == "py-1")
        while True:  # cut once the leader has the answer to a renew client-go cannot see
            invisible = wait_for_invisible_renew(watch, "py-1", 30)
            with watch.cond:
                versions = [r for _, r, _ in watch.history if r.holder == "py-1"]
            renewals = versions.index(invisible)  # the first version is the grant
            py.wait_count("renewed", renewals, 5)
            if py.count("renewed") == renewals and watch.current is invisible:
                break
        relay.cut()
        cut = time.time()
        started = go.wait_for("started_leading", LEASE * 2)
        stopped = py.wait_for("stopped_leading", LEASE * 2)
        print(
            f"deadline {renew_deadline:g}s: leader stopped {stopped['time'] - cut:.3f}s, "
            f"client-go started {started['time'] - cut:.3f}s after the cut"
        )
        assert overlaps([*py.intervals(), *go.intervals()]) == [], "two leaders at once"
    finally:
        watch.close()
        relay.cut()
        for peer in (py, go):
            if peer is not None:
                peer.close()

"""The real operator and an abandoned leader Lease: once the operator has seen the Lease unchanged
for its duration the group shows no leader (status, ``kubectl get``, ``k8slease status``), one
``LeaderExpired`` Warning is posted and never a "became leader" Event."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

from k8slease.lease.record import LeaseRecord, new_lease
from k8slease.lease.transport import LeaseTransport
from k8slease.names import LABEL_GROUP, LABEL_ROLE, ROLE_LEADER
from k8slease.testing.server import APIServer
from tests.support.operators import (
    condition,
    event_changes,
    group_events,
    operator_process,
    server_fixture,
    wait_for,
    wait_status,
)

NS = "expiry"
server = server_fixture(NS)


def test_an_abandoned_lease_shows_no_leader_and_no_became_leader_event(server: APIServer) -> None:
    api = server.api_client()
    # renewed an hour ago by a pod that is gone; its own clock is not what the operator trusts
    renewed = datetime.now(UTC) - timedelta(hours=1)
    record = LeaseRecord("ghost-0-abcde", 2, renewed, renewed, 3, 4)
    labels = {LABEL_GROUP: "orphan", LABEL_ROLE: ROLE_LEADER}
    LeaseTransport(api, NS).create(new_lease("orphan", NS, record, labels=labels))
    with operator_process(server.kubeconfig, NS):
        first = wait_status(api, NS, "orphan", lambda s: "leader" in s, "orphan seen")
        started = time.monotonic()
        status = wait_status(
            api, NS, "orphan", lambda s: s.get("expiredLeader") == "ghost-0-abcde", "expiry"
        )
        judged_after = time.monotonic() - started
        assert status["leader"] == ""
        assert condition(status, "LeaderElected")["reason"] == "LeaseExpired"
        assert status["message"].startswith("no leader: the Lease of ghost-0-abcde expired at")
        events = wait_for(
            "the LeaderExpired event",
            lambda: [e for e in group_events(api, NS, "orphan") if e["reason"] == "LeaderExpired"],
            changes=event_changes(api, NS),
        )
        assert events[0]["type"] == "Warning"
        reasons = [e["reason"] for e in group_events(api, NS, "orphan")]
        assert "LeaderElected" not in reasons, reasons
        if shutil.which("kubectl"):
            kubectl = ["kubectl", "--kubeconfig", str(server.kubeconfig), "-n", NS]
            table = subprocess.run(
                [*kubectl, "get", "scheduledjobgroups", "orphan", "-o", "wide"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            header, row = table.splitlines()[:2]
            assert header.split()[:3] == ["NAME", "LEADER", "EXPIRED"]
            # LEADER is empty: the row goes from the name straight to EXPIRED and TRANSITIONS
            assert re.match(r"orphan\s+\d+s\s+3\s", row), row
        status_command = [sys.executable, "-m", "k8slease", "status", "orphan", "-n", NS]
        shown = subprocess.run(
            [*status_command, "--kubeconfig", str(server.kubeconfig)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert re.search(r"no leader: the Lease of ghost-0-abcde expired \d+s ago \(judged", shown)
    # the first status may already show the holder as leader: expiry is judged by observation
    assert first.get("leader") in ("ghost-0-abcde", "")
    assert judged_after < 10
    api.close()

"""Leadership that moved while the operator was down is recorded with what the Lease shows, never
with an invented gap: a handover seen only afterwards is ``unobserved``; a release still visible
in the Lease (empty holder) is ``released``, and the takeover seen later has no gap either."""

from __future__ import annotations

from datetime import UTC, datetime

from k8slease.errors import NotFound
from k8slease.lease.record import LeaseRecord, lease_with_record, new_lease
from k8slease.lease.transport import LeaseTransport
from k8slease.names import LABEL_GROUP, LABEL_ROLE, ROLE_LEADER
from k8slease.testing.server import APIServer
from tests.support.operators import (
    event_changes,
    group_events,
    operator_process,
    server_fixture,
    wait_for,
    wait_status,
)

NS = "restart"
server = server_fixture(NS)


def write(leases: LeaseTransport, group: str, holder: str, transitions: int, token: int) -> None:
    """Write the Lease as an elector would: a grant (holder) or a release (empty, duration 1)."""
    now = datetime.now(UTC)
    record = LeaseRecord(holder, 15 if holder else 1, now, now, transitions, token)
    try:
        current = leases.get(group)
    except NotFound:
        labels = {LABEL_GROUP: group, LABEL_ROLE: ROLE_LEADER}
        leases.create(new_lease(group, NS, record, labels=labels))
        return
    leases.replace(group, lease_with_record(current, record))


def test_changes_while_the_operator_was_down(server: APIServer) -> None:
    api = server.api_client()
    leases = LeaseTransport(api, NS)
    for group in ("handover", "released"):
        write(leases, group, "replica-a", 0, 1)
    with operator_process(server.kubeconfig, NS):
        for group in ("handover", "released"):
            wait_status(api, NS, group, lambda s: s.get("leader") == "replica-a", f"{group} a")
    # the operator is down: a SIGTERM handover in one group, a release alone in the other
    write(leases, "handover", "", 0, 1)
    write(leases, "handover", "replica-b", 1, 2)
    write(leases, "released", "", 0, 1)
    with operator_process(server.kubeconfig, NS):
        moved = wait_status(
            api, NS, "handover", lambda s: s.get("leader") == "replica-b", "handover seen"
        )
        assert moved["failovers"][-1]["reason"] == "unobserved"
        assert (moved["failovers"][-1]["from"], moved["failovers"][-1]["to"]) == (
            "replica-a",
            "replica-b",
        )
        assert "gapSeconds" not in moved["failovers"][-1]
        wait_for(
            "the unobserved takeover's Event",
            lambda: any(
                "took over from replica-a while the operator was not watching" in e["message"]
                for e in group_events(api, NS, "handover")
            ),
            changes=event_changes(api, NS),
        )
        mid = wait_status(
            api, NS, "released", lambda s: s.get("releasedBy") == "replica-a", "release seen"
        )
        assert mid["leader"] == ""
        write(leases, "released", "replica-c", 1, 2)  # seen live, after a release not seen
        after = wait_status(
            api, NS, "released", lambda s: s.get("leader") == "replica-c", "takeover seen"
        )
        last = after["failovers"][-1]
        assert (last["from"], last["to"], last["reason"]) == ("replica-a", "replica-c", "released")
        assert "gapSeconds" not in last
    api.close()

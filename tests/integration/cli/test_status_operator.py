"""``k8slease status`` beside the operator: a stale operator status never makes a dead holder
the leader, and what could not be read is named, with what to grant."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from kubernetes import client

from k8slease.cli import status
from k8slease.lease.record import LeaseRecord, new_lease
from k8slease.lease.transport import LeaseTransport
from k8slease.names import CRD_GROUP, CRD_PLURAL, CRD_VERSION, LABEL_GROUP, LABEL_ROLE, ROLE_LEADER
from k8slease.testing.server import APIServer
from tests.support.operators import create_group, server_fixture
from tests.support.processes import run_module

NS = "status-ops"


server = server_fixture(NS)  # a server of its own, with the CRD and the namespace


def plant(api: client.ApiClient, group: str, holder: str, renewed: datetime, duration: int) -> None:
    """The group's leader Lease, last renewed at ``renewed``, and a ScheduledJobGroup whose
    status (as an operator wrote it before it stopped) names ``holder`` as leader."""
    record = LeaseRecord(holder, duration, renewed, renewed, 2, 3)
    labels = {LABEL_GROUP: group, LABEL_ROLE: ROLE_LEADER}
    LeaseTransport(api, NS).create(new_lease(group, NS, record, labels=labels))
    create_group(api, NS, group)
    body: dict[str, Any] = {"status": {"group": group, "leader": holder, "transitions": 2}}
    client.CustomObjectsApi(api).patch_namespaced_custom_object_status(
        CRD_GROUP, CRD_VERSION, NS, CRD_PLURAL, group, body
    )


def status_command(server: APIServer, *args: str) -> list[str]:
    return ["status", *args, "-n", NS, "--kubeconfig", str(server.kubeconfig)]


def leader_cell(out: str, lease: str) -> str:
    row = next(line for line in out.splitlines() if line.startswith(f"{lease} "))
    return row.split()[1]


def test_a_stale_operator_status_does_not_make_a_dead_holder_leader(server: APIServer) -> None:
    """The operator stopped while the holder led; the holder crashed since (issue: shown as
    LEADER, no note, exit 0)."""
    api = server.api_client()
    renewed = datetime.now(UTC) - timedelta(seconds=21)
    plant(api, "stale", "replica-0-dead", renewed, 4)
    result = run_module("k8slease", *status_command(server, "stale"))
    assert result.returncode == 0, result.stderr
    assert leader_cell(result.stdout, "stale") == "(none)"
    found = re.search(
        r"no leader: the Lease of replica-0-dead expired (\d+)s ago \(by its renewTime plus "
        r"leaseDurationSeconds and this machine's clock\); the operator's status still names it "
        r"leader: stale \(is the operator running\?\)",
        result.stdout,
    )
    assert found, result.stdout
    assert 17 <= int(found.group(1)) < 17 + 30
    api.close()


def test_the_operator_is_believed_while_its_status_can_be_fresh(server: APIServer) -> None:
    """Within the margin the operator's judgment wins over this machine's clock (clocks differ a
    little; the operator judges expiry a moment after the Lease's own times say so)."""
    api = server.api_client()
    renewed = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    plant(api, "fresh", "replica-1-live", renewed, 4)
    margin = timedelta(seconds=4 + status.STALE_STATUS_AFTER)
    believed = status.render_status(api, namespace=NS, group="fresh", now=renewed + margin)
    assert leader_cell(believed, "fresh") == "replica-1-live"
    assert "no leader" not in believed
    later = renewed + margin + timedelta(seconds=1)
    stale = status.render_status(api, namespace=NS, group="fresh", now=later)
    assert leader_cell(stale, "fresh") == "(none)"
    assert "the Lease of replica-1-live expired 11s ago" in stale
    assert "the operator's status still names it leader" in stale
    api.close()


def test_a_refused_list_says_what_was_read_and_what_to_grant(server: APIServer) -> None:
    server.faults.add(
        "list", "leases", status=403, message='leases.coordination.k8s.io is forbidden: User "u"'
    )
    result = run_module("k8slease", *status_command(server))
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"k8slease status: cannot list leases in namespace {NS} at {server.url}: HTTP 403 "
        'Forbidden: leases.coordination.k8s.io is forbidden: User "u" (grant list on '
        f"leases.coordination.k8s.io in namespace {NS}; get on scheduledjobgroups.k8slease.io "
        "adds the operator's failover history)"
    ]


def test_an_unreadable_group_status_is_named_not_blamed_on_the_operator(
    server: APIServer,
) -> None:
    api = server.api_client()
    now = datetime.now(UTC)
    plant(api, "hidden", "replica-2-live", now, 3600)
    server.faults.add("get", "scheduledjobgroups", status=403)
    result = run_module("k8slease", *status_command(server, "hidden"))
    assert result.returncode == 0, result.stderr
    assert (
        "(cannot get scheduledjobgroups.k8slease.io hidden: 403 Forbidden (grant get on "
        f"scheduledjobgroups.k8slease.io in namespace {NS}): Leases shown as read)"
    ) in result.stdout
    assert "is the operator running?" not in result.stdout
    api.close()


def test_an_unreachable_server_is_one_line_naming_it(tmp_path: Path) -> None:
    with APIServer() as gone:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(gone.kubeconfig.read_text())
        url = gone.url
    result = run_module("k8slease", "status", "-n", NS, "--kubeconfig", str(kubeconfig))
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"k8slease status: cannot list leases in namespace {NS} at {url}: ")
    assert "Connection refused" in lines[0]

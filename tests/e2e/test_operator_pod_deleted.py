"""The operator pod deleted mid-failover, and the status tells the truth afterwards.

The leader's pod and the operator's pod are deleted in one ``kubectl delete``: the leader
releases on the kubelet's SIGTERM and a survivor takes over while the operator is stopping,
and its replacement starts from the status the old one wrote. Once the new operator runs,
``kubectl get scheduledjobgroups`` must name the Lease's true holder, its ``transitions`` and
fencing token must be the Lease's, and the failover history must hold exactly one entry for
this failover (from the deleted leader to the new holder): neither lost nor recorded twice.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.e2e.app_pods import NAMESPACE, leader_pod, steady, wait_until
from tests.e2e.leasehistory import LeaseHistory
from tests.e2e.ticks import GROUP

pytestmark = pytest.mark.kind

OPERATOR = "k8slease-operator"


def group_status(cluster: Any) -> dict[str, Any]:
    group = json.loads(
        cluster.kubectl("get", "scheduledjobgroup", GROUP, "-n", NAMESPACE, "-o", "json")
    )
    status: dict[str, Any] = group.get("status") or {}
    return status


def lease_spec(cluster: Any) -> dict[str, Any]:
    """The group's leader Lease's spec, with its fencing token (an annotation) added."""
    lease = json.loads(cluster.kubectl("get", "lease", GROUP, "-n", NAMESPACE, "-o", "json"))
    spec: dict[str, Any] = lease["spec"]
    token = (lease["metadata"].get("annotations") or {}).get("k8slease.io/fencing-token")
    return {**spec, "fencingToken": int(token) if token is not None else None}


def operator_pods(cluster: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(
        cluster.kubectl(
            "get",
            "pods",
            "-n",
            NAMESPACE,
            "-l",
            "app.kubernetes.io/component=operator",
            "-o",
            "json",
        )
    )["items"]
    return items


def parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_operator_deleted_mid_failover_then_status_tells_the_truth(
    e2e_cluster: Any, history: LeaseHistory, app: Any
) -> None:
    old = wait_until(lambda: leader_pod(e2e_cluster), 60, "a leader")["metadata"]["name"]
    old_holder = lease_spec(e2e_cluster)["holderIdentity"]
    wait_until(
        lambda: group_status(e2e_cluster).get("leader") == old_holder,
        60,
        "the operator to report the current leader",
    )
    (operator,) = [p["metadata"]["name"] for p in operator_pods(e2e_cluster)]
    deleted = datetime.now(UTC).replace(microsecond=0)  # status times have whole seconds
    e2e_cluster.kubectl("delete", "pod", old, operator, "-n", NAMESPACE, "--wait=false")
    handover = wait_until(
        lambda: [h for h in history.handovers(GROUP) if h.old == old_holder],
        60,
        "a handover from the deleted leader",
    )[0]
    e2e_cluster.kubectl(
        "rollout", "status", f"deployment/{OPERATOR}", "-n", NAMESPACE, "--timeout=180s"
    )
    assert operator not in [p["metadata"]["name"] for p in operator_pods(e2e_cluster)]
    steady(e2e_cluster)

    def truthful() -> dict[str, Any] | None:
        spec, status = lease_spec(e2e_cluster), group_status(e2e_cluster)
        if status.get("leader") != spec.get("holderIdentity"):
            return None
        return status

    status = wait_until(truthful, 90, "the new operator to report the Lease's holder")
    spec = lease_spec(e2e_cluster)
    assert status["leader"] == spec["holderIdentity"] == handover.new, (status, handover)
    assert status["transitions"] == spec["leaseTransitions"], (status, spec)
    assert status["fencingToken"] == spec["fencingToken"], (status, spec)
    assert parse(status["lastFailoverTime"]) >= deleted, (status["lastFailoverTime"], deleted)
    this_failover = [
        f
        for f in status["failovers"]
        if parse(f["time"]) >= deleted - timedelta(seconds=1) and f["from"] == old_holder
    ]
    assert len(this_failover) == 1, status["failovers"]
    assert this_failover[0]["to"] == handover.new, (this_failover, handover)
    table = e2e_cluster.kubectl("get", "scheduledjobgroups", "-n", NAMESPACE)
    assert spec["holderIdentity"] in table, table
    # It stays true: a few renewals later (3 s of them), the same holder on both sides.
    renewed = parse(spec["renewTime"])
    wait_until(
        lambda: parse(lease_spec(e2e_cluster)["renewTime"]) >= renewed + timedelta(seconds=3),
        30,
        "renewals for 3 s",
    )
    assert group_status(e2e_cluster)["leader"] == lease_spec(e2e_cluster)["holderIdentity"]

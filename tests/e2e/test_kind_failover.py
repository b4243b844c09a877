"""On a real (kind) cluster: `helm install`, 3 replicas of the example app elect one leader, the
leader's pod is deleted and another replica takes over, and `kubectl get scheduledjobgroups` shows
the new leader and the failover. Then the integration and conformance suites run against the
same cluster."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.support.polling import poll

pytestmark = pytest.mark.kind

REPO_ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "k8slease-e2e"  # the helm_release fixture's namespace (asserted below)
GROUP = "billing"
APP = "billing-app"
T = TypeVar("T")


def eventually(probe: Callable[[], T | None], timeout: float, what: str) -> T:
    """:func:`polling.poll` ``probe`` every second until it returns something other than None
    (a failed kubectl, e.g. the Lease does not exist yet, counts as None)."""

    def attempt() -> tuple[T] | None:
        try:
            value = probe()
        except subprocess.CalledProcessError:
            return None
        return None if value is None else (value,)

    return poll(what, attempt, timeout, every=1.0)[0]


def kubectl_json(cluster: Any, *args: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(
        cluster.kubectl(*args, "-n", NAMESPACE, "-o", "json", stderr=subprocess.PIPE)
    )
    return result


def app_pods(cluster: Any) -> list[str]:
    pods = kubectl_json(cluster, "get", "pods", "-l", f"app.kubernetes.io/name={APP}")
    return sorted(
        p["metadata"]["name"]
        for p in pods["items"]
        if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    )


def leader(cluster: Any) -> str | None:
    """The pod holding the group's leader Lease (identities are `<pod name>-<suffix>`)."""
    lease = kubectl_json(cluster, "get", "lease", GROUP)
    holder = lease["spec"].get("holderIdentity") or ""
    owners = [pod for pod in app_pods(cluster) if holder.startswith(pod + "-")]
    return owners[0] if len(owners) == 1 else None


def renew_time(cluster: Any) -> datetime:
    lease = kubectl_json(cluster, "get", "lease", GROUP)
    return datetime.fromisoformat(lease["spec"]["renewTime"])


def test_chart_installs_operator_and_three_replicas(e2e_cluster: Any, helm_release: Any) -> None:
    assert helm_release["namespace"] == NAMESPACE
    for deployment in ("k8slease-operator", APP):
        e2e_cluster.kubectl(
            "rollout", "status", f"deployment/{deployment}", "-n", NAMESPACE, "--timeout=180s"
        )
    assert len(eventually(lambda: app_pods(e2e_cluster) or None, 60, "app pods")) == 3
    groups = e2e_cluster.kubectl("get", "scheduledjobgroups", "-n", NAMESPACE)
    assert GROUP in groups


def test_one_replica_leads(e2e_cluster: Any, helm_release: Any) -> None:
    first = eventually(lambda: leader(e2e_cluster), 120, "a leader")
    # It stays the leader: the others see a valid Lease and do not take over, while it renews
    # it for 5 s more.
    renewed = renew_time(e2e_cluster)
    eventually(
        lambda: renew_time(e2e_cluster) >= renewed + timedelta(seconds=5) or None,
        60,
        "renewals for 5 s",
    )
    assert leader(e2e_cluster) == first


def test_leader_pod_deleted_another_takes_over(e2e_cluster: Any, helm_release: Any) -> None:
    old = eventually(lambda: leader(e2e_cluster), 120, "a leader")
    before = kubectl_json(e2e_cluster, "get", "scheduledjobgroup", GROUP).get("status") or {}
    e2e_cluster.kubectl("delete", "pod", old, "-n", NAMESPACE, "--wait=false")

    def new_leader() -> str | None:
        current = leader(e2e_cluster)
        return current if current not in (None, old) else None

    new = eventually(new_leader, 60, "another replica to take over")

    def status_shows_new_leader() -> dict[str, Any] | None:
        group = kubectl_json(e2e_cluster, "get", "scheduledjobgroup", GROUP)
        status = group.get("status") or {}
        return status if str(status.get("leader", "")).startswith(new + "-") else None

    status = eventually(status_shows_new_leader, 60, "the operator to report the new leader")
    assert status.get("transitions", 0) > before.get("transitions", 0)
    assert status.get("lastFailoverTime")
    table = e2e_cluster.kubectl("get", "scheduledjobgroups", "-n", NAMESPACE)
    assert new in table and GROUP in table
    # The Deployment replaces the deleted pod: back to three replicas, still one leader.
    eventually(lambda: len(app_pods(e2e_cluster)) == 3 or None, 120, "3 replicas again")
    assert leader(e2e_cluster) == new


@pytest.mark.parametrize(
    ("suite", "paths", "marks"),
    [
        ("integration", ["tests/integration"], "not kind"),
        ("conformance", ["tests"], "conformance and not kind"),
    ],
)
def test_suite_passes_against_the_cluster(
    e2e_cluster: Any, helm_release: Any, suite: str, paths: list[str], marks: str
) -> None:
    """The same tests that run on the embedded API server, on the real one (--kubeconfig).

    On kind only: on the node cluster the API server is the same kube-apiserver that
    `make test` already runs these suites on (the real control plane tier)."""
    if e2e_cluster.kind != "kind":
        pytest.skip("make test runs these suites on this same kube-apiserver build")
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-m",
        marks,
        f"--kubeconfig={e2e_cluster.kubeconfig_path}",
        *paths,
    ]
    result = subprocess.run(
        command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=1800, check=False
    )
    if result.returncode == 5:
        pytest.skip(f"no {suite} tests collected")
    assert result.returncode == 0, f"{suite} suite failed on the cluster:\n{result.stdout[-20000:]}"

"""The app's replicas as the e2e tests see them: their pods, the leader among them, waiting for
a steady state, and where figures go. Shared by the test files (the fixtures that use these
are in conftest.py)."""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.leasehistory import Handover, LeaseHistory
from tests.e2e.runlog import PodLogs
from tests.e2e.ticks import GROUP, Window, await_ticks, window
from tests.support.polling import poll

REPO_ROOT = Path(__file__).resolve().parents[2]
FIGURES = REPO_ROOT / "build" / "e2e-figures.json"
NAMESPACE = "k8slease-e2e"
APP = "billing-app"
REPLICAS = 3
LEASE_SECONDS = 3.0


def kubectl_path(cluster: Any) -> str:
    if cluster.kind == "node":
        return str(cluster.cluster.binaries["kubectl"])
    return shutil.which("kubectl") or "kubectl"


def record(name: str, figures: dict[str, Any]) -> None:
    """Keep ``figures`` under ``name`` in build/e2e-figures.json (docs/benchmarks.md quotes
    them)."""
    FIGURES.parent.mkdir(exist_ok=True)
    data = json.loads(FIGURES.read_text()) if FIGURES.exists() else {}
    data[name] = figures
    FIGURES.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def wait_until(probe: Any, timeout: float, what: str) -> Any:
    """:func:`polling.poll` every 0.5 s: kubectl against a real cluster, nothing to wait on but
    its answer."""
    return poll(what, probe, timeout, every=0.5)


def pods(cluster: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(
        cluster.kubectl(
            "get", "pods", "-n", NAMESPACE, "-l", f"app.kubernetes.io/name={APP}", "-o", "json"
        )
    )["items"]
    return items


def ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return not pod["metadata"].get("deletionTimestamp") and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in conditions
    )


def holder(cluster: Any) -> str:
    lease = json.loads(cluster.kubectl("get", "lease", GROUP, "-n", NAMESPACE, "-o", "json"))
    return str(lease["spec"].get("holderIdentity") or "")


def leader_pod(cluster: Any) -> dict[str, Any] | None:
    held = holder(cluster)
    found = [p for p in pods(cluster) if ready(p) and held.startswith(p["metadata"]["name"] + "-")]
    return found[0] if len(found) == 1 else None


def ticking_leader(cluster: Any, history: LeaseHistory, start: datetime) -> dict[str, Any]:
    """The leader's pod, once the app has run two ticks after ``start`` (past its start-up)."""
    await_ticks(history, after=start, count=2, judged=False)
    found: dict[str, Any] = wait_until(lambda: leader_pod(cluster), 60, "a leader")
    return found


@dataclass(frozen=True)
class NodeLeader:
    """The leader's pod on the node cluster and its container as the node's runtime knows it."""

    pod: str
    container: str  # the container's ID, its runtime's prefix ("containerd://") cut off
    restarts: int  # the container's restart count


def node_leader(cluster: Any, history: LeaseHistory, start: datetime, *, why: str) -> NodeLeader:
    """:func:`ticking_leader` for a scenario that acts on the leader's container through the
    node (``why``): skipped on any other cluster."""
    if cluster.kind != "node":
        pytest.skip(f"{why} (node cluster only)")
    pod = ticking_leader(cluster, history, start)
    status = pod["status"]["containerStatuses"][0]
    return NodeLeader(
        pod=pod["metadata"]["name"],
        container=status["containerID"].split("://")[1],
        restarts=int(status.get("restartCount", 0)),
    )


def handover_from(history: LeaseHistory, pod: str, what: str) -> Handover:
    """The first handover of the group from the replica in ``pod`` (its identity is the pod's
    name plus a suffix), waited for up to 60 s; ``what`` names that leader for the timeout."""
    found: list[Handover] = wait_until(
        lambda: [h for h in history.handovers(GROUP) if h.old.startswith(pod + "-")],
        60,
        f"a handover from the {what} leader",
    )
    return found[0]


def unreleased_handover(history: LeaseHistory, pod: str, what: str) -> Handover:
    """:func:`handover_from` a leader that could not release (killed, wedged): the successor
    waited until the Lease, unchanged for its duration, expired; the gap is under that duration
    plus 2 s."""
    handover = handover_from(history, pod, what)
    assert handover.gap_seconds < LEASE_SECONDS + 2.0, handover
    return handover


def steady(cluster: Any, replicas: int = REPLICAS) -> list[dict[str, Any]]:
    """Wait for ``replicas`` Ready pods of the app, no other pod (none terminating), and a
    leader among them; returns the pods."""
    cluster.kubectl("rollout", "status", f"deployment/{APP}", "-n", NAMESPACE, "--timeout=300s")

    def settled() -> list[dict[str, Any]] | None:
        found = pods(cluster)
        if len(found) != replicas or not all(ready(p) for p in found):
            return None
        return found if leader_pod(cluster) is not None else None

    settled_pods: list[dict[str, Any]] = wait_until(
        settled, 180, f"{replicas} Ready app pods, nothing terminating, and a leader"
    )
    return settled_pods


def recovered_window(cluster: Any, history: LeaseHistory, logs: PodLogs, start: datetime) -> Window:
    """After a fault: once the replicas are steady again and a tick came after that, the window
    from ``start``, judged."""
    steady(cluster)
    await_ticks(history, after=datetime.now(UTC), count=1)
    return window(history, logs, start=start)


def between_ticks(tick_seconds: float) -> None:
    """Sleep until half-way between two ticks (ticks fall on multiples of ``tick_seconds``):
    a fault injected then finds the job idle, its lock released."""
    time.sleep(  # a point in wall time the scenario chooses: nothing to wait on
        (tick_seconds / 2 - time.time() % tick_seconds) % tick_seconds
    )

"""The deployment side on a real node: each tick runs once across 3 replicas, through a
`kubectl rollout restart`, a deleted leader pod and a container killed by the runtime.

The app runs with ``--fast``: a ONCE_PER_TICK job every 4 s and a 3-second leader Lease
renewed every second. Runs come from every pod's log (:mod:`runlog`), leadership changes from
a watch on the leader Lease (:mod:`leasewatch`). Figures go to ``build/e2e-figures.json``
(docs/benchmarks.md quotes them).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from leasewatch import LeaseWatch
from runlog import RunLog

pytestmark = pytest.mark.kind

REPO_ROOT = Path(__file__).resolve().parents[2]
FIGURES = REPO_ROOT / "build" / "e2e-figures.json"
NAMESPACE = "k8slease-e2e"
GROUP = "billing"
APP = "billing-app"
TICK_SECONDS = 4.0
LEASE_SECONDS = 3.0


def kubectl_path(cluster: Any) -> str:
    if cluster.kind == "node":
        return str(cluster.cluster.binaries["kubectl"])
    import shutil

    return shutil.which("kubectl") or "kubectl"


@pytest.fixture
def runs(e2e_cluster: Any, helm_release: Any) -> Iterator[RunLog]:
    with RunLog(
        kubectl_path(e2e_cluster),
        e2e_cluster.kubeconfig_path,
        NAMESPACE,
        f"app.kubernetes.io/name={APP}",
    ) as log:
        yield log


@pytest.fixture
def lease(e2e_cluster: Any, helm_release: Any) -> Iterator[LeaseWatch]:
    watch = LeaseWatch(kubectl_path(e2e_cluster), e2e_cluster.kubeconfig_path, NAMESPACE, GROUP)
    try:
        yield watch
    finally:
        watch.close()


def record(name: str, figures: dict[str, Any]) -> None:
    FIGURES.parent.mkdir(exist_ok=True)
    data = json.loads(FIGURES.read_text()) if FIGURES.exists() else {}
    data[name] = figures
    FIGURES.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def wait_until(probe: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.5)  # kubectl against a real cluster: nothing to wait on but its answer
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def assert_each_tick_once(periods: dict[str, int], *, since: str | None = None) -> list[str]:
    """Every tick ran exactly once and none is missing between the first and the last."""
    duplicates = {period: n for period, n in periods.items() if n != 1}
    assert duplicates == {}, f"ticks that ran more than once: {duplicates}"
    ticks = sorted(periods)
    stamps = [datetime.fromisoformat(tick) for tick in ticks]
    missing = [
        f"{a.isoformat()} -> {b.isoformat()}"
        for a, b in pairwise(stamps)
        if (b - a).total_seconds() > TICK_SECONDS * 1.5
    ]
    assert missing == [], f"ticks missing between: {missing}"
    return ticks


def pods(cluster: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(
        cluster.kubectl(
            "get", "pods", "-n", NAMESPACE, "-l", f"app.kubernetes.io/name={APP}", "-o", "json"
        )
    )["items"]
    return items


def leader_pod(cluster: Any) -> dict[str, Any] | None:
    holder = (
        json.loads(cluster.kubectl("get", "lease", GROUP, "-n", NAMESPACE, "-o", "json"))[
            "spec"
        ].get("holderIdentity")
        or ""
    )
    found = [p for p in pods(cluster) if holder.startswith(p["metadata"]["name"] + "-")]
    return found[0] if len(found) == 1 else None


def test_each_tick_runs_once_across_three_replicas(e2e_cluster: Any, runs: RunLog) -> None:
    wait_until(lambda: len(runs.pods()) >= 3, 120, "the logs of 3 app pods")
    time.sleep(40)  # ten ticks
    ticks = assert_each_tick_once(runs.periods())
    assert len(ticks) >= 8, f"only {len(ticks)} ticks in 40 s"
    assert len({run["pod"] for run in runs.runs()}) >= 1
    record("steady", {"ticks": len(ticks), "duplicates": 0, "seconds": 40})


def test_rollout_restart_runs_every_tick_once(
    e2e_cluster: Any, runs: RunLog, lease: LeaseWatch
) -> None:
    wait_until(lambda: len(runs.pods()) >= 3, 120, "the logs of 3 app pods")
    time.sleep(TICK_SECONDS * 2)
    started = time.monotonic()
    e2e_cluster.kubectl("rollout", "restart", f"deployment/{APP}", "-n", NAMESPACE)
    e2e_cluster.kubectl("rollout", "status", f"deployment/{APP}", "-n", NAMESPACE, "--timeout=300s")
    rolled = time.monotonic() - started
    time.sleep(TICK_SECONDS * 3)  # the new pods' ticks after the rollout
    ticks = assert_each_tick_once(runs.periods())
    handovers = lease.handovers()
    assert handovers, "the rollout replaced every pod, the leader's too: expected a handover"
    gaps = [h.gap_seconds for h in handovers]
    assert max(gaps) < LEASE_SECONDS, f"a leadership gap reached the lease duration: {gaps}"
    record(
        "rollout",
        {
            "rollout_seconds": round(rolled, 1),
            "ticks_in_window": len(ticks),
            "duplicates": 0,
            "handovers": len(handovers),
            "gaps_seconds": [round(g, 3) for g in gaps],
            "pods_followed": len(runs.pods()),
        },
    )


def test_leader_pod_deleted_successor_takes_over_within_a_second(
    e2e_cluster: Any, runs: RunLog, lease: LeaseWatch
) -> None:
    wait_until(lambda: len(runs.pods()) >= 3, 120, "the logs of 3 app pods")
    old = wait_until(lambda: leader_pod(e2e_cluster), 120, "a leader")["metadata"]["name"]
    e2e_cluster.kubectl("delete", "pod", old, "-n", NAMESPACE, "--wait=false")
    handover = wait_until(
        lambda: [h for h in lease.handovers() if h.old.startswith(old)],
        60,
        "a handover from the deleted leader",
    )[0]
    assert handover.gap_seconds < 1.0, handover
    e2e_cluster.kubectl("rollout", "status", f"deployment/{APP}", "-n", NAMESPACE, "--timeout=180s")
    assert_each_tick_once(runs.periods())
    record("delete_leader_pod", {"gap_seconds": round(handover.gap_seconds, 3)})


def test_leader_container_killed_successor_takes_over_within_the_lease(
    e2e_cluster: Any, runs: RunLog, lease: LeaseWatch
) -> None:
    wait_until(lambda: len(runs.pods()) >= 3, 120, "the logs of 3 app pods")
    if e2e_cluster.kind != "node":
        pytest.skip("kills the container through the node's containerd (node cluster only)")
    pod = wait_until(lambda: leader_pod(e2e_cluster), 120, "a leader")
    old = pod["metadata"]["name"]
    container = pod["status"]["containerStatuses"][0]["containerID"].split("://")[1]
    e2e_cluster.crictl_kill(container)
    handover = wait_until(
        lambda: [h for h in lease.handovers() if h.old.startswith(old)],
        60,
        "a handover from the killed leader",
    )[0]
    # Nobody released: the successor waits until the Lease, unchanged for its duration, expires.
    assert handover.gap_seconds < LEASE_SECONDS + 2.0, handover
    time.sleep(TICK_SECONDS * 2)
    assert_each_tick_once(runs.periods())
    record("sigkill_leader_container", {"gap_seconds": round(handover.gap_seconds, 3)})


def test_helm_upgrade_with_changed_values_rolls_without_a_double_tick(
    e2e_cluster: Any, helm_release: Any, runs: RunLog, lease: LeaseWatch
) -> None:
    wait_until(lambda: len(runs.pods()) >= 3, 120, "the logs of 3 app pods")
    values = json.loads(Path(helm_release["values"]).read_text())
    values["exampleApp"]["args"] = [*values["exampleApp"]["args"], "--log-level", "debug"]
    changed = Path(helm_release["values"]).with_name("values-upgrade.json")
    changed.write_text(json.dumps(values))
    before = {p["metadata"]["name"] for p in pods(e2e_cluster)}
    e2e_cluster.helm(
        "upgrade",
        helm_release["name"],
        str(REPO_ROOT / "charts" / "k8slease"),
        "-n",
        NAMESPACE,
        "-f",
        str(changed),
        "--wait",
        "--timeout",
        "300s",
    )
    after = {
        p["metadata"]["name"]
        for p in pods(e2e_cluster)
        if not p["metadata"].get("deletionTimestamp")
    }
    assert not before & after, "the upgrade changed the pod template: every pod is replaced"
    time.sleep(TICK_SECONDS * 2)
    assert_each_tick_once(runs.periods())

"""The deployment side on a real node: each tick runs once across 3 replicas, through a
`kubectl rollout restart`, a deleted leader pod, a container killed by the runtime and a
`helm upgrade`.

The app runs with ``--fast``: a ONCE_PER_TICK job every 4 s and a 3-second leader Lease
renewed every second. What ran comes from the job Lease's history (:mod:`leasehistory`: every
claim and every run record, from a watch that no pod deletion can cut short), cross-checked
with every pod's log (:mod:`runlog`: a tick logged by two pods is a double run). Each test
starts from 3 Ready replicas and a leader (:func:`app`) and judges only the ticks after its own
start (the fixtures in conftest.py). Figures go to ``build/e2e-figures.json``
(docs/benchmarks.md quotes them).
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.app_pods import (
    APP,
    LEASE_SECONDS,
    NAMESPACE,
    REPO_ROOT,
    between_ticks,
    handover_from,
    node_leader,
    pods,
    record,
    recovered_window,
    steady,
    ticking_leader,
    unreleased_handover,
)
from tests.e2e.leasehistory import LeaseHistory
from tests.e2e.runlog import PodLogs
from tests.e2e.ticks import (
    GROUP,
    TICK_SECONDS,
    assert_each_tick_once,
    assert_lost_ticks_reported,
    await_ticks,
    window,
)

pytestmark = pytest.mark.kind


def test_each_tick_runs_once_across_three_replicas(
    history: LeaseHistory, logs: PodLogs, start: datetime
) -> None:
    began = time.monotonic()
    await_ticks(history, after=start, count=8)  # ten ticks of a real cluster, 8 of them judged
    judged = window(history, logs, start=start)
    assert_each_tick_once(judged, at_least=7)
    seconds = round(time.monotonic() - began)
    record(
        "steady", {"ticks": len(judged.ticks), "duplicates": 0, "missing": 0, "seconds": seconds}
    )


def test_rollout_restart_runs_every_tick_once(
    e2e_cluster: Any, history: LeaseHistory, logs: PodLogs, start: datetime
) -> None:
    await_ticks(history, after=start, count=2, judged=False)
    began = time.monotonic()
    e2e_cluster.kubectl("rollout", "restart", f"deployment/{APP}", "-n", NAMESPACE)
    e2e_cluster.kubectl("rollout", "status", f"deployment/{APP}", "-n", NAMESPACE, "--timeout=300s")
    rolled = time.monotonic() - began
    judged = recovered_window(e2e_cluster, history, logs, start)  # a new pod's tick in it
    assert_each_tick_once(judged, at_least=5)
    handovers = history.handovers(GROUP)
    assert handovers, "the rollout replaced every pod, the leader's too: expected a handover"
    gaps = [h.gap_seconds for h in handovers]
    assert max(gaps) < LEASE_SECONDS, f"a leadership gap reached the lease duration: {gaps}"
    record(
        "rollout",
        {
            "rollout_seconds": round(rolled, 1),
            "ticks_in_window": len(judged.ticks),
            "duplicates": 0,
            "missing": 0,
            "handovers": len(handovers),
            "gaps_seconds": [round(g, 3) for g in gaps],
            "pods_followed": len(logs.pods()),
        },
    )


def test_leader_pod_deleted_successor_takes_over_within_a_second(
    e2e_cluster: Any, history: LeaseHistory, logs: PodLogs, start: datetime
) -> None:
    old = ticking_leader(e2e_cluster, history, start)["metadata"]["name"]
    deleted = datetime.now(UTC)
    e2e_cluster.kubectl("delete", "pod", old, "-n", NAMESPACE, "--wait=false")
    handover = handover_from(history, old, "deleted")
    assert handover.gap_seconds < 1.0, handover
    steady(e2e_cluster)
    await_ticks(history, after=deleted, count=3)
    judged = window(history, logs, start=start)
    # The kubelet's SIGTERM: the leader stops its scheduler after its running tick finished,
    # releases the group Lease; the survivors claim every tick, none is lost.
    assert_each_tick_once(judged, at_least=5)
    after = [t for t in judged.ticks if t > deleted]
    assert len(after) >= 3, f"only {len(after)} ticks judged after the deletion"
    assert any(e["pod"] == old for e in logs.events("leader.released")), (
        "the deleted leader did not log its release"
    )
    record(
        "delete_leader_pod",
        {"gap_seconds": round(handover.gap_seconds, 3), "ticks_in_window": len(judged.ticks)},
    )


def test_leader_container_killed_successor_takes_over_within_the_lease(
    e2e_cluster: Any, history: LeaseHistory, logs: PodLogs, start: datetime
) -> None:
    leader = node_leader(
        e2e_cluster, history, start, why="kills the container through the node's containerd"
    )
    old = leader.pod
    between_ticks(TICK_SECONDS)  # most kills then find the job idle
    e2e_cluster.crictl_kill(leader.container)
    # Nobody released: the successor waits until the Lease, unchanged for its duration, expires.
    handover = unreleased_handover(history, old, "killed")
    judged = recovered_window(e2e_cluster, history, logs, start)
    if judged.missing() or judged.lost():
        # Killed in the middle of a run: its lock stays held until lock_at_most_for (30 s)
        # has passed; then the taker records the unfinished tick lost. Wait for that record.
        judged = window(history, logs, start=start, within=45)
        unrun = assert_lost_ticks_reported(
            judged, holder_prefix=old + "-", warnings=lambda event: logs.events(event)
        )
        record("sigkill_leader_container_mid_run", {"ticks_run_nowhere": len(unrun)})
    else:
        assert_each_tick_once(judged, at_least=3)
    record("sigkill_leader_container", {"gap_seconds": round(handover.gap_seconds, 3)})


def test_helm_upgrade_with_changed_values_rolls_without_a_double_tick(
    e2e_cluster: Any,
    helm_release: Any,
    history: LeaseHistory,
    logs: PodLogs,
    start: datetime,
) -> None:
    # A changed value that changes the pod template: the log level, toggled from what the
    # Deployment runs now (debug, or the default info; both log the runs).
    running = json.loads(
        e2e_cluster.kubectl(
            "get", "deployment", APP, "-n", NAMESPACE, "-o", "jsonpath={.spec.template}"
        )
    )["spec"]["containers"][0]["args"]
    values = json.loads(Path(helm_release["values"]).read_text())
    if "--log-level" in running:
        values["exampleApp"]["args"] = [a for a in running if a not in ("--log-level", "debug")]
    else:
        values["exampleApp"]["args"] = [*running, "--log-level", "debug"]
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
    after = {p["metadata"]["name"] for p in steady(e2e_cluster)}
    assert not before & after, "the upgrade changed the pod template: every pod is replaced"
    await_ticks(history, after=datetime.now(UTC), count=1)
    assert_each_tick_once(window(history, logs, start=start), at_least=3)


def scale(cluster: Any, replicas: int) -> None:
    cluster.kubectl("scale", f"deployment/{APP}", "-n", NAMESPACE, f"--replicas={replicas}")


def test_scale_three_to_one_to_five_runs_every_tick_once(
    e2e_cluster: Any, history: LeaseHistory, logs: PodLogs, start: datetime
) -> None:
    await_ticks(history, after=start, count=2, judged=False)
    scale(e2e_cluster, 1)
    (alone,) = steady(e2e_cluster, 1)
    at_one = await_ticks(history, after=datetime.now(UTC), count=3, judged=False)
    scale(e2e_cluster, 5)
    five = steady(e2e_cluster, 5)
    await_ticks(history, after=datetime.now(UTC), count=2)
    judged = window(history, logs, start=start)
    assert_each_tick_once(judged, at_least=6)
    # While it was alone, the one replica ran every tick (it is the whole claim order).
    name = alone["metadata"]["name"] + "-"
    alone_ticks = [t for t in judged.ticks if t >= at_one - timedelta(seconds=8) and t < at_one]
    assert alone_ticks, "no tick fell in the one-replica spell"
    assert all(judged.runs[t][0].holder.startswith(name) for t in alone_ticks), {
        t.isoformat(): judged.runs[t][0].holder for t in alone_ticks
    }
    assert len(five) == 5
    record(
        "scale_3_1_5",
        {"ticks_in_window": len(judged.ticks), "duplicates": 0, "missing": 0},
    )

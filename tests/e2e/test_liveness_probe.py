"""A replica whose elector is wedged is restarted by its liveness probe, and the group keeps
running each tick once.

The leader's process is wedged from outside (:mod:`freeze`: ptrace stops every thread but the
one serving ``/healthz``, as a deadlock would; only on the node cluster, whose containers are
processes of this machine). Then, in order:

- ``/healthz`` turns 503 within ``renew_deadline + renew_interval`` of the last renewal
  (``Jobs.healthy()``: it believes it leads but has not renewed in time), read from inside
  the pod's network namespace;
- another replica takes over within the lease (nobody released it);
- the kubelet's probe sees the 503 (its ``Unhealthy`` Event says so) and, after the chart's
  ``failureThreshold``, kills the container ("failed liveness probe, will be restarted");
- the wedged threads are let go once the kubelet has sent its SIGTERM (as a stalled process
  would wake up): it must step down without acting, stop, and be restarted: its restart count
  goes up;
- every tick of the whole window ran exactly once.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.app_pods import (
    NAMESPACE,
    NodeLeader,
    between_ticks,
    leader_pod,
    node_leader,
    pods,
    record,
    recovered_window,
    unreleased_handover,
    wait_until,
)
from tests.e2e.leasehistory import LeaseHistory
from tests.e2e.runlog import PodLogs
from tests.e2e.ticks import TICK_SECONDS, assert_each_tick_once
from tests.support.processes import child_env

pytestmark = pytest.mark.kind

FREEZE = Path(__file__).resolve().parent / "freeze.py"
#: --fast: renew_deadline 2 s + renew_interval 1 s (healthy()'s margin) after the last renewal
#: sent, which was sent at or before the wedge; 1.5 s more for the measurement (a probe of
#: /healthz every 0.2 s, each a request from another process).
UNHEALTHY_WITHIN = 2.0 + 1.0 + 1.5


def pod_events(cluster: Any, pod: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(
        cluster.kubectl(
            "get",
            "events",
            "-n",
            NAMESPACE,
            "--field-selector",
            f"involvedObject.name={pod}",
            "-o",
            "json",
        )
    )["items"]
    return items


def restarts(cluster: Any, pod: str) -> int:
    found = [p for p in pods(cluster) if p["metadata"]["name"] == pod]
    statuses = found[0]["status"].get("containerStatuses") or [] if found else []
    return int(statuses[0].get("restartCount", 0)) if statuses else -1


def wedge_the_leader(
    cluster: Any, history: LeaseHistory, logs: PodLogs, start: datetime, tries: int = 3
) -> tuple[NodeLeader, subprocess.Popen[str], dict[str, Any], float]:
    """The leader wedged (:mod:`freeze`) between two ticks: the leader, its freezer, the
    freezer's first line and when. The scenario is a wedged *leader*: when leadership moved
    before the freeze took hold (once frozen, the Lease names another pod, or the pod has
    logged ``leader.stopped`` since: the freezer's earlier attempts, each letting the threads go
    after 3 s, outlast the renew deadline), the threads are let go and the leader of then is
    wedged instead, up to ``tries`` times."""
    moved: list[str] = []
    for _ in range(tries):
        leader = node_leader(
            cluster, history, start, why="wedges a container's process with ptrace on the node"
        )
        pid = cluster.container_pid(leader.container)
        between_ticks(TICK_SECONDS)
        wedged = time.monotonic()
        since = datetime.now(UTC)
        freezer = subprocess.Popen(
            [sys.executable, str(FREEZE), str(pid)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=child_env(),
        )
        assert freezer.stdout is not None
        frozen = json.loads(freezer.stdout.readline() or "null")
        assert frozen, f"the freezer failed (exit status {freezer.wait(10)})"
        now = leader_pod(cluster)
        holder = now["metadata"]["name"] if now is not None else None
        stopped = [
            at for at, event, _ in leader_lines(logs, leader.pod)
            if event == "leader.stopped" and datetime.fromisoformat(at) >= since
        ]  # fmt: skip
        if holder == leader.pod and not stopped:
            return leader, freezer, frozen, wedged
        moved.append(f"{leader.pod} (frozen in {frozen['attempts']}): led by {holder}, {stopped}")
        freezer.kill()  # the tracer's end lets every stopped thread go
        freezer.wait(timeout=30)
    raise AssertionError(f"leadership moved before each of {tries} wedges took hold: {moved}")


def leader_lines(logs: PodLogs, pod: str) -> list[tuple[str, str, str]]:
    """The pod's last election lines (when, event, reason): what a failure needs to show."""
    lines = [
        (e["at"], str(e.get("event")), str(e.get("reason", "")))
        for e in logs.events()
        if e["pod"] == pod and str(e.get("event", "")).startswith(("leader.", "elector."))
    ]
    return lines[-8:]


def test_wedged_leader_is_restarted_by_its_liveness_probe(
    e2e_cluster: Any, history: LeaseHistory, logs: PodLogs, start: datetime
) -> None:
    leader, freezer, frozen, wedged = wedge_the_leader(e2e_cluster, history, logs, start)
    name, before = leader.pod, leader.restarts
    assert freezer.stdin is not None and freezer.stdout is not None
    try:
        verdict = json.loads(freezer.stdout.readline() or "null")
        assert verdict and verdict["healthz"] == 503, (verdict, frozen, leader_lines(logs, name))
        assert verdict["after"] < UNHEALTHY_WITHIN, verdict
        handover = unreleased_handover(history, name, "wedged")

        def killed() -> list[dict[str, Any]]:
            return [
                e
                for e in pod_events(e2e_cluster, name)
                if e.get("reason") == "Killing" and "failed liveness probe" in e.get("message", "")
            ]

        # The chart's probe: every 10 s, 3 failures in a row.
        wait_until(killed, 60, "the kubelet to kill the wedged container")
        killed_after = time.monotonic() - wedged
        probed = [
            e
            for e in pod_events(e2e_cluster, name)
            if e.get("reason") == "Unhealthy"
            and "Liveness probe failed: HTTP probe failed with statuscode: 503" in e["message"]
        ]
        assert probed, "the kubelet's liveness probe did not see /healthz answer 503"
    finally:
        # The kubelet has sent SIGTERM (or the test failed): let the threads go.
        with contextlib.suppress(BrokenPipeError):  # it ended early: its error is below
            freezer.stdin.write("\n")
            freezer.stdin.close()
        thawed = freezer.stdout.read()
        freezer.wait(timeout=30)
    assert '"thawed"' in thawed, thawed
    wait_until(lambda: restarts(e2e_cluster, name) > before, 90, "the container's restart")
    restarted_after = time.monotonic() - wedged
    judged = recovered_window(e2e_cluster, history, logs, start)
    assert_each_tick_once(judged, at_least=8)
    # The wedged replica, let go after the kubelet's SIGTERM, stopped on it: its lines after the
    # thaw show the signal and the stop, and nothing run as leader after the takeover.
    stopped = [e for e in logs.events("jobs.stopped") if e["pod"] == name]
    assert stopped, "the wedged replica, let go, did not stop on the kubelet's SIGTERM"
    record(
        "wedged_leader_liveness",
        {
            "healthz_503_after_seconds": verdict["after"],
            "takeover_gap_seconds": round(handover.gap_seconds, 3),
            "killed_by_kubelet_after_seconds": round(killed_after, 1),
            "restarted_after_seconds": round(restarted_after, 1),
            "restarts": restarts(e2e_cluster, name) - before,
            "ticks_in_window": len(judged.ticks),
            "duplicates": 0,
            "missing": 0,
        },
    )

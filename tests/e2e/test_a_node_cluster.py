"""k8slease's single-node cluster on its own: it starts, runs a pod, and stops leaving no
process, mount, link or cgroup behind. Runs first in the suite (file order), before the
session's cluster starts, and only where the node cluster is the suite's cluster."""

from __future__ import annotations

import subprocess

import pytest

from k8slease.testing.cluster import Cluster
from k8slease.testing.cluster.node import leftovers
from k8slease.testing.cluster.versions import PAUSE_IMAGE
from tests.e2e.e2e_clusters import choose, required

pytestmark = pytest.mark.kind


def host_links() -> list[str]:
    lines = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True)
    return sorted(line.split(":")[1].strip() for line in lines.stdout.splitlines())


def test_the_cluster_runs_a_pod_and_stops_leaving_nothing_behind() -> None:
    chosen, reason = choose()
    if chosen is None and required():
        pytest.fail(f"CI with Go and root: the node cluster must run here, but {reason}")
    if chosen != "node":
        pytest.skip(f"the suite runs on {chosen or 'no cluster'}, not the node cluster {reason}")
    links = host_links()
    cluster = Cluster()
    cluster.start()
    try:
        directory, cgroup_root = cluster.directory, cluster.cgroup_root
        assert cluster.start_seconds is not None
        cluster.kubectl(
            "run",
            "sleeper",
            f"--image={PAUSE_IMAGE}",
            "--image-pull-policy=Never",
            "--restart=Never",
        )
        cluster.kubectl("wait", "--for=condition=Ready", "pod/sleeper", "--timeout=120s")
        # Something to clean up: a running container in a cgroup under the cluster's root.
        assert leftovers(directory, cgroup_root), "a running cluster shows nothing to clean up"
    finally:
        cluster.stop()
    assert leftovers(directory, cgroup_root) == []
    assert host_links() == links

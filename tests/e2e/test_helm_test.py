"""`helm test`: the chart's test hook (templates/tests/leader-test.yaml) runs `k8slease status`
in a pod of its own, under a read-only ServiceAccount of its own, and passes once a replica of
the example app leads its group; with no replica running it fails, saying so. Its objects are
gone after a pass (the hooks' delete policy), so nothing of it outlives `helm uninstall`."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from tests.e2e.app_pods import APP, NAMESPACE, REPLICAS, steady, wait_until
from tests.e2e.ticks import GROUP

pytestmark = pytest.mark.kind

TEST_OBJECTS = ("pod", "serviceaccount", "role", "rolebinding")


def hook_objects(cluster: Any, release: str) -> list[str]:
    """The test hook's objects still in the namespace (kind/name)."""
    listed = cluster.kubectl(
        "get", ",".join(TEST_OBJECTS), "-n", NAMESPACE, "-o", "name", "--ignore-not-found"
    ).split()
    return [name for name in listed if name.split("/", 1)[1].startswith(f"{release}-test")]


def test_helm_test_passes_with_a_leader(e2e_cluster: Any, helm_release: Any, app: Any) -> None:
    said = e2e_cluster.helm("test", helm_release.name, "-n", NAMESPACE, "--timeout", "180s")
    suites = said.split("TEST SUITE:")[1:]
    leader_suite = [s for s in suites if s.split()[0] == f"{helm_release.name}-test-leader"]
    assert leader_suite and "Phase:          Succeeded" in leader_suite[0], said
    assert all("Succeeded" in s for s in suites), said
    assert hook_objects(e2e_cluster, helm_release.name) == []


def test_helm_test_fails_without_a_leader(e2e_cluster: Any, helm_release: Any, app: Any) -> None:
    e2e_cluster.kubectl("scale", f"deployment/{APP}", "-n", NAMESPACE, "--replicas=0")
    try:
        # Each replica releases the group's Lease on its SIGTERM: no leader, at once.
        wait_until(
            lambda: (
                not e2e_cluster.kubectl(
                    "get", "lease", GROUP, "-n", NAMESPACE, "-o", "jsonpath={.spec.holderIdentity}"
                ).strip()
            ),
            60,
            "the leader to release the group's Lease",
        )
        with pytest.raises(subprocess.CalledProcessError) as failed:
            e2e_cluster.helm("test", helm_release.name, "-n", NAMESPACE, "--timeout", "180s")
        assert "failed" in (failed.value.stderr or "") + (failed.value.stdout or "")
        pod = f"{helm_release.name}-test-leader"
        said = e2e_cluster.kubectl("logs", pod, "-n", NAMESPACE)
        assert f"group {GROUP}: no leader" in said, said
        assert "(none)" in said, said
    finally:
        leftovers = hook_objects(e2e_cluster, helm_release.name)
        if leftovers:  # a failed test keeps its pod for `kubectl logs`: remove it
            e2e_cluster.kubectl("delete", *leftovers, "-n", NAMESPACE, "--wait=false")
        e2e_cluster.kubectl("scale", f"deployment/{APP}", "-n", NAMESPACE, f"--replicas={REPLICAS}")
    steady(e2e_cluster)

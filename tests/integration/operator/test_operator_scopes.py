"""The operator watching every namespace (``--all-namespaces``, the chart's cluster-wide mode)."""

from __future__ import annotations

from pathlib import Path

from kubernetes import client

from k8slease.election.elector import LeaderElector
from k8slease.operator.crd import install_crd
from k8slease.testing.server import APIServer
from tests.support.operators import operator_process, wait_status
from tests.support.timing import JOBS_FAST as FAST


def test_all_namespaces_keeps_groups_in_every_namespace(
    k8s_fresh_apiserver: APIServer, tmp_path: Path
) -> None:
    server = k8s_fresh_apiserver  # to itself: the operator sees every namespace
    api = server.api_client()
    install_crd(api)
    core = client.CoreV1Api(api)
    electors = []
    for ns in ("team-a", "team-b"):
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
        elector = LeaderElector(
            f"{ns}-jobs", namespace=ns, identity=f"{ns}-pod", api_client=server.api_client(), **FAST
        )
        electors.append(elector.start())
    log = tmp_path / "operator.log"
    try:
        declared = [
            "--auto-create-group",
            "team-a/team-a-jobs",
            "--auto-create-group",
            "team-b-jobs",
        ]
        with operator_process(server.kubeconfig, None, *declared, log=log) as proc:
            for ns in ("team-a", "team-b"):
                status = wait_status(
                    api,
                    ns,
                    f"{ns}-jobs",
                    lambda s: bool(s.get("leader")),
                    f"the auto-created group in {ns} to show its leader",
                )
                assert status["leader"] == f"{ns}-pod"
            assert proc.poll() is None, log.read_text()[-3000:]
    finally:
        for elector in electors:
            elector.stop()

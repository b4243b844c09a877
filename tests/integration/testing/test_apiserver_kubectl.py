"""kubectl against each API server: discovery, client-side apply, Table output."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from k8slease.testing import APIServer

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")

#: The product's CRD, from the one place it is defined (the chart's crds/, symlinked here).
SJG_CRD: dict[str, Any] = yaml.safe_load(
    (Path(__file__).resolve().parents[3] / "k8slease" / "operator" / "crd.yaml").read_text()
)


def kubectl(server: APIServer, tmp_path: Path, *args: str, stdin: str | None = None) -> str:
    """Run kubectl against ``server``; fail the test with its stderr if it fails."""
    command = [
        "kubectl",
        "--kubeconfig",
        str(server.kubeconfig),
        "--cache-dir",
        str(tmp_path / "cache"),
    ]
    done = subprocess.run(
        [*command, *args], input=stdin, capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, f"kubectl {' '.join(args)} failed: {done.stderr}"
    return done.stdout


def apply(server: APIServer, tmp_path: Path, body: dict[str, Any]) -> str:
    """``kubectl apply -f -`` of ``body`` (client-side validation off: no OpenAPI here)."""
    return kubectl(server, tmp_path, "apply", "--validate=false", "-f", "-", stdin=json.dumps(body))


def rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.strip().splitlines()]


def test_kubectl_get_leases_all_namespaces(k8s_fresh_apiserver: APIServer, tmp_path: Path) -> None:
    k8s_embedded_apiserver = k8s_fresh_apiserver
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "leader", "namespace": "kube-system"},
        "spec": {"holderIdentity": "pod-a", "leaseDurationSeconds": 15},
    }
    out = apply(k8s_embedded_apiserver, tmp_path, lease)
    assert "lease.coordination.k8s.io/leader created" in out
    lease["spec"]["holderIdentity"] = "pod-b"
    out = apply(k8s_embedded_apiserver, tmp_path, lease)
    assert "configured" in out  # a strategic merge PATCH
    table = rows(kubectl(k8s_embedded_apiserver, tmp_path, "get", "leases", "-A"))
    assert table[0] == ["NAMESPACE", "NAME", "HOLDER", "AGE"]
    # (a real kube-apiserver also keeps its own identity Lease in kube-system)
    assert ["kube-system", "leader", "pod-b"] in [row[:3] for row in table[1:]]


def test_kubectl_apply_and_get_custom_resources(
    k8s_fresh_apiserver: APIServer, tmp_path: Path
) -> None:
    server = k8s_fresh_apiserver
    kubectl(server, tmp_path, "apply", "--validate=false", "-f", "-", stdin=json.dumps(SJG_CRD))
    name = SJG_CRD["metadata"]["name"]
    kubectl(server, tmp_path, "wait", "--for=condition=Established", f"crd/{name}")
    group = {
        "apiVersion": "k8slease.io/v1alpha1",
        "kind": "ScheduledJobGroup",
        "metadata": {"name": "nightly", "namespace": "default"},
        "spec": {"jobs": [{"name": "report", "schedule": "0 3 * * *"}]},
    }
    assert "created" in kubectl(
        server, tmp_path, "apply", "--validate=false", "-f", "-", stdin=json.dumps(group)
    )
    group["spec"]["jobs"].append({"name": "cleanup", "schedule": "0 4 * * *"})
    assert "configured" in kubectl(
        server, tmp_path, "apply", "--validate=false", "-f", "-", stdin=json.dumps(group)
    )
    status = {
        "status": {"leader": "pod-a", "transitions": 2, "lastFailoverTime": "2020-01-01T00:00:00Z"}
    }
    kubectl(
        server, tmp_path, "patch", "sjg", "nightly", "--subresource=status", "--type=merge",
        "-p", json.dumps(status),
    )  # fmt: skip
    table = rows(kubectl(server, tmp_path, "get", "scheduledjobgroups"))
    assert table[0] == ["NAME", "LEADER", "TRANSITIONS", "LAST", "FAILOVER", "AGE"]
    name, leader, transitions, last_failover, _age = table[1]
    assert (name, leader, transitions) == ("nightly", "pod-a", "2")
    assert last_failover.endswith(("y", "d"))
    assert rows(kubectl(server, tmp_path, "get", "sjg", "-A"))[1][:2] == ["default", "nightly"]
    stored = json.loads(kubectl(server, tmp_path, "get", "sjg", "nightly", "-o", "json"))
    assert stored["metadata"]["generation"] == 2 and len(stored["spec"]["jobs"]) == 2
    assert "kubectl.kubernetes.io/last-applied-configuration" in stored["metadata"]["annotations"]
    assert "deleted" in kubectl(server, tmp_path, "delete", "sjg", "nightly")
    assert kubectl(server, tmp_path, "get", "sjg") == ""  # "No resources found" is on stderr

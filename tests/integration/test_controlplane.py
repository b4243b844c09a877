"""The real control plane itself: the CLI, TLS, identities from TokenRequest, /metrics.

These take ``k8s_real_apiserver``: they are skipped (with the reason) where the real tier is
off, and error where it is required but cannot start.
"""

from __future__ import annotations

import json
import re
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from kubernetes import client

from k8slease.testing import ControlPlane
from k8slease.testing.controlplane import apimetrics as metrics
from tests.support.processes import serving


def test_cli_writes_the_kubeconfig_when_ready_and_removes_everything_on_sigterm(
    k8s_real_apiserver: ControlPlane, tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "admin.kubeconfig"
    with serving(
        "k8slease", "controlplane", "--kubeconfig", str(kubeconfig), stop_within=30
    ) as line:
        match = re.match(
            r"serving (https://127\.0\.0\.1:\d+) \(kubeconfig: (.+); data: (.+);", line
        )
        assert match, line
        url, data = match[1], Path(match[3])
        assert kubeconfig.exists() and (data / "etcd").is_dir()
        assert json.loads(kubeconfig.read_text())["clusters"][0]["cluster"]["server"] == url
        version = subprocess.run(
            ["kubectl", "--kubeconfig", str(kubeconfig), "get", "--raw", "/version"],
            capture_output=True, text=True, timeout=30, check=True,
        )  # fmt: skip
        assert json.loads(version.stdout)["gitVersion"] == "v1.37.2"
    assert not data.exists() and not kubeconfig.exists()


def test_the_serving_certificate_verifies_against_the_plane_ca_only(
    k8s_real_apiserver: ControlPlane,
) -> None:
    url = f"{k8s_real_apiserver.url}/version"
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        urllib.request.urlopen(url, timeout=10, context=ssl.create_default_context())
    trusting = ssl.create_default_context(cafile=str(k8s_real_apiserver.ca_file))
    with urllib.request.urlopen(url, timeout=10, context=trusting) as response:
        assert json.loads(response.read())["major"] == "1"


def test_a_service_account_token_acts_as_that_account(
    k8s_real_apiserver: ControlPlane, k8s_namespace: str
) -> None:
    admin = k8s_real_apiserver.api_client()
    core = client.CoreV1Api(admin)
    core.create_namespaced_service_account(k8s_namespace, {"metadata": {"name": "replica"}})
    request = core.create_namespaced_service_account_token(
        "replica", k8s_namespace, {"spec": {"expirationSeconds": 600}}
    )
    token = request.status.token
    as_account = k8s_real_apiserver.api_client(token=token)
    review = client.AuthenticationV1Api(as_account).create_self_subject_review({})
    assert review.status.user_info.username == f"system:serviceaccount:{k8s_namespace}:replica"
    with pytest.raises(client.ApiException) as denied:
        client.CoordinationV1Api(as_account).list_namespaced_lease(k8s_namespace)
    assert denied.value.status == 403
    kubectl = subprocess.run(
        ["kubectl", "--kubeconfig", str(k8s_real_apiserver.kubeconfig_for_token(token)),
         "auth", "whoami", "-o", "json"],
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    assert json.loads(kubectl.stdout)["status"]["userInfo"]["username"].endswith(":replica")
    as_account.close()
    admin.close()


def test_metrics_count_the_requests_made(
    k8s_real_apiserver: ControlPlane, k8s_namespace: str
) -> None:
    def creates() -> float:
        return metrics.total(
            k8s_real_apiserver.metrics(), "apiserver_request_total",
            resource="leases", verb="POST", code="201",
        )  # fmt: skip

    before = creates()
    with k8s_real_apiserver.api_client() as api_client:
        leases = client.CoordinationV1Api(api_client)
        for name in ("a", "b", "c"):
            leases.create_namespaced_lease(k8s_namespace, {"metadata": {"name": name}})
    assert creates() == before + 3


@pytest.mark.usefixtures("k8s_real_apiserver")  # gates on the real tier
def test_an_audit_log_names_each_object_requested() -> None:
    with ControlPlane(audit=True) as plane, plane.api_client() as api_client:
        client.CoreV1Api(api_client).create_namespace({"metadata": {"name": "audited"}})
        leases = client.CoordinationV1Api(api_client)
        leases.create_namespaced_lease("audited", {"metadata": {"name": "one"}})
        leases.read_namespaced_lease("one", "audited")
        entries = [json.loads(line) for line in plane.audit_log.read_text().splitlines()]
    ours = [
        (e["verb"], e["objectRef"].get("name"), e["responseStatus"]["code"])
        for e in entries
        if e.get("objectRef", {}).get("resource") == "leases"
        and e["objectRef"].get("namespace") == "audited"
    ]
    assert ours == [("create", "one", 201), ("get", "one", 200)]

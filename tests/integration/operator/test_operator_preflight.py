"""The operator's start: a missing CRD or namespace ends it with the fix in the message (not a
404 logged forever); ``--install-crd`` installs the CRD and starts; bad settings never give a
traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from k8slease.lease.record import LeaseRecord, new_lease
from k8slease.lease.transport import LeaseTransport
from k8slease.names import LABEL_GROUP, LABEL_ROLE, ROLE_LEADER
from k8slease.operator.crd import CRD_NAME, crd_manifest
from k8slease.testing.server import APIServer
from tests.support.operators import REPO, operator_process, wait_status

NS = "preflight"


@pytest.fixture
def bare_server() -> Iterator[APIServer]:
    """An API server without the CRD, with the namespace the tests watch."""
    with APIServer() as srv:
        api = srv.api_client()
        client.CoreV1Api(api).create_namespace({"metadata": {"name": NS}})
        api.close()
        yield srv


def run_operator(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = dict(os.environ, **(env or {}))
    environ.pop("KUBERNETES_SERVICE_HOST", None)
    return subprocess.run(
        [sys.executable, "-m", "k8slease", "operator", *args],
        cwd=REPO,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_missing_crd_names_the_command_that_installs_it(bare_server: APIServer) -> None:
    result = run_operator("--kubeconfig", str(bare_server.kubeconfig), "--namespace", NS)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert f"the CustomResourceDefinition {CRD_NAME} is not installed" in result.stderr
    # --validate=false: the embedded server serves no OpenAPI document (test_crd_hint_runs.py)
    assert "k8slease operator --print-crd | kubectl apply --validate=false -f -" in result.stderr
    assert (
        "kubectl apply --validate=false -f charts/k8slease/crds/scheduledjobgroups.yaml"
        in result.stderr
    )
    assert (REPO / "charts/k8slease/crds/scheduledjobgroups.yaml").is_file()
    assert "--install-crd" in result.stderr


def test_print_crd_prints_the_packaged_definition() -> None:
    import yaml

    result = run_operator("--print-crd")
    assert result.returncode == 0
    assert yaml.safe_load(result.stdout) == crd_manifest()


def test_missing_namespace_is_named(bare_server: APIServer) -> None:
    result = run_operator(
        "--kubeconfig", str(bare_server.kubeconfig), "--install-crd", "--namespace", "nope"
    )
    assert result.returncode == 1, result.stderr
    assert "namespace 'nope' does not exist" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--kubeconfig", "/nonexistent/kubeconfig"], {}, "cannot load a Kubernetes configuration"),
        (["--kubeconfig", "BAD"], {}, "cannot load a Kubernetes configuration"),
        ([], {"POD_NAMESPACE": "Bad_NS!"}, "POD_NAMESPACE='Bad_NS!' is not a namespace name"),
        (["--namespace", "UPPER"], {}, "--namespace='UPPER' is not a namespace name"),
        (
            [],
            {"K8SLEASE_OPERATOR_EVALUATE_INTERVAL": "soon"},
            "K8SLEASE_OPERATOR_EVALUATE_INTERVAL='soon' is not a number",
        ),
        (
            ["--auto-create-group", "Bad Group/x/y"],
            {},
            "--auto-create-group='Bad Group/x/y' is not GROUP, NAMESPACE/GROUP, '*' or",
        ),
        (
            [],
            {"K8SLEASE_OPERATOR_AUTO_CREATE_GROUPS": "billing,Bad_Group"},
            "auto_create_groups='Bad_Group' is not GROUP, NAMESPACE/GROUP",
        ),
    ],
)
def test_bad_settings_end_with_a_message_not_a_traceback(
    tmp_path: Path, args: list[str], env: dict[str, str], message: str
) -> None:
    bad = tmp_path / "bad-kubeconfig"
    bad.write_text("garbage: [\n")
    args = [str(bad) if a == "BAD" else a for a in args]
    if "--kubeconfig" not in args:
        args += ["--kubeconfig", str(bad)]
    result = run_operator(*args, env=env)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_unreachable_api_server_is_named(tmp_path: Path) -> None:
    with APIServer() as srv:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(srv.kubeconfig.read_text())
        url = srv.url
    result = run_operator("--kubeconfig", str(kubeconfig), "--namespace", NS)  # server gone
    assert result.returncode == 1
    # one line: no urllib3 "Retrying (Retry(total=2 ...))" warning per attempt before it
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"k8slease operator: cannot use the API server at {url}: ")
    assert "Connection refused" in lines[0]


def _printer_columns(crd: dict[str, Any]) -> list[str]:
    return [c["name"] for c in crd["spec"]["versions"][0]["additionalPrinterColumns"]]


def test_install_crd_upgrades_an_older_crd_and_the_operator_runs(bare_server: APIServer) -> None:
    api = bare_server.api_client()
    ext = client.ApiextensionsV1Api(api)
    older = crd_manifest()
    older["spec"]["versions"][0]["additionalPrinterColumns"] = [
        c
        for c in older["spec"]["versions"][0]["additionalPrinterColumns"]
        if c["name"] != "Expired"
    ]
    ext.create_custom_resource_definition(older)
    now = datetime.now(UTC)
    labels = {LABEL_GROUP: "g", LABEL_ROLE: ROLE_LEADER}
    lease = new_lease("g", NS, LeaseRecord("replica-a", 15, now, now, 0, 1), labels=labels)
    LeaseTransport(api, NS).create(lease)
    with operator_process(bare_server.kubeconfig, NS, "--install-crd"):
        status = wait_status(api, NS, "g", lambda s: s.get("leader") == "replica-a", "g up")
    assert status["group"] == "g"
    installed = api.sanitize_for_serialization(ext.read_custom_resource_definition(CRD_NAME))
    assert _printer_columns(installed) == _printer_columns(crd_manifest())
    assert "Expired" in _printer_columns(installed)
    api.close()

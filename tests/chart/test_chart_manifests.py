"""manifests/ is the chart rendered with charts/manifests-values.yaml, and says what the issue asks:
CRD, operator, RBAC, and an example app Deployment with 3 replicas using the Downward API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from charts import render_manifests as rm


def test_manifests_match_the_chart() -> None:
    problems = rm.drift(rm.MANIFESTS_DIR)
    assert not problems, (
        "manifests/ drifted from charts/k8slease; run `make manifests` and commit the result:\n"
        + "\n".join(problems)
    )


def test_drift_is_detected(tmp_path: Path) -> None:
    rm.write(tmp_path)
    assert rm.drift(tmp_path) == []
    operator = tmp_path / rm.COMPONENT_FILES["operator"]
    operator.write_text(operator.read_text().replace("replicas: 1", "replicas: 2"))
    (tmp_path / "99-leftover.yaml").write_text(rm.HEADER + "{}\n")
    problems = rm.drift(tmp_path)
    assert len(problems) == 2
    assert any("-  replicas: 2" in p and "+  replicas: 1" in p for p in problems)
    assert any("99-leftover.yaml" in p for p in problems)
    # --write repairs it, and keeps hand-written files.
    (tmp_path / "notes.yaml").write_text("kind: Hand\n")
    rm.write(tmp_path)
    assert rm.drift(tmp_path) == [] and (tmp_path / "notes.yaml").exists()
    assert not (tmp_path / "99-leftover.yaml").exists()


def test_check_command_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert rm.main(["--write", str(tmp_path)]) == 0
    assert rm.main(["--check", str(tmp_path)]) == 0
    (tmp_path / rm.CRDS_FILE).unlink()
    assert rm.main(["--check", str(tmp_path)]) == 1
    assert "run `make manifests`" in capsys.readouterr().err


def _manifest_objects() -> dict[str, list[dict[str, Any]]]:
    return {
        path.name: rm.load_documents(path.read_text())
        for path in sorted(rm.MANIFESTS_DIR.glob("*.yaml"))
    }


def test_manifests_hold_crd_operator_rbac_and_example_app() -> None:
    files = _manifest_objects()
    assert list(files) == [
        "00-namespace.yaml",
        "01-crds.yaml",
        "02-operator.yaml",
        "03-elector-rbac.yaml",
        "04-example-app.yaml",
        "05-admission-policy.yaml",
    ]
    kinds = {name: [o["kind"] for o in objects] for name, objects in files.items()}
    assert kinds["00-namespace.yaml"] == ["Namespace"]
    assert kinds["01-crds.yaml"] == ["CustomResourceDefinition"]
    assert kinds["02-operator.yaml"] == ["ServiceAccount", "Role", "RoleBinding", "Deployment"]
    # the shared Role (for apps the user binds) and the example app group's narrowed one
    assert kinds["03-elector-rbac.yaml"] == ["Role", "Role", "RoleBinding"]
    assert kinds["04-example-app.yaml"] == ["ServiceAccount", "Deployment", "ScheduledJobGroup"]
    assert kinds["05-admission-policy.yaml"] == [
        "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
    ] * 2  # fmt: skip
    cluster_scoped = {"Namespace", "CustomResourceDefinition", "ValidatingAdmissionPolicy",
                      "ValidatingAdmissionPolicyBinding"}  # fmt: skip
    for name, objects in files.items():
        for obj in objects:
            if obj["kind"] not in cluster_scoped:
                assert obj["metadata"]["namespace"] == "k8slease", (name, obj["kind"])


def test_example_app_manifest_has_three_replicas_and_downward_api() -> None:
    objects = _manifest_objects()["04-example-app.yaml"]
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    assert deployment["spec"]["replicas"] == 3
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    env = {item["name"]: item.get("valueFrom") for item in container["env"]}
    assert env["POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["POD_NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    elector_binding = next(
        o for o in _manifest_objects()["03-elector-rbac.yaml"] if o["kind"] == "RoleBinding"
    )
    assert {
        "kind": "ServiceAccount",
        "name": deployment["spec"]["template"]["spec"]["serviceAccountName"],
        "namespace": "k8slease",
    } in elector_binding["subjects"]


def test_manifest_namespace_enforces_restricted_pod_security() -> None:
    (namespace,) = _manifest_objects()["00-namespace.yaml"]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"

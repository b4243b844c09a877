"""The chart's `helm test` hook (templates/tests/leader-test.yaml): rendered with the example
app only, every object of it a test hook deleted once the test passed, its pod hardened like
the others, its ServiceAccount its own and read-only, and never in the plain manifests."""

from __future__ import annotations

from typing import Any

import helm_python
import pytest

from charts import render_manifests as rm

WITH_APP: dict[str, Any] = {"exampleApp": {"enabled": True}}
HOOK_KINDS = ["Pod", "Role", "RoleBinding", "ServiceAccount"]


def _hooks(values: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        o
        for o in rm.render_objects(values)
        if "helm.sh/hook" in (o["metadata"].get("annotations") or {})
    ]


def test_rendered_with_the_example_app_only() -> None:
    assert _hooks({}) == []
    assert _hooks({**WITH_APP, "tests": {"enabled": False}}) == []
    assert sorted(o["kind"] for o in _hooks(WITH_APP)) == HOOK_KINDS


def test_every_object_is_a_test_hook_deleted_after_a_pass() -> None:
    for obj in _hooks(WITH_APP):
        annotations = obj["metadata"]["annotations"]
        assert annotations["helm.sh/hook"] == "test", obj["kind"]
        policy = set(annotations["helm.sh/hook-delete-policy"].split(","))
        assert policy == {"before-hook-creation", "hook-succeeded"}, obj["kind"]
        assert obj["metadata"]["labels"]["app.kubernetes.io/component"] == "test"
    # The account and its rights exist before the pod that uses them.
    weights = {
        o["kind"]: int(o["metadata"]["annotations"]["helm.sh/hook-weight"])
        for o in _hooks(WITH_APP)
    }
    assert weights["Pod"] > max(weights[k] for k in ("ServiceAccount", "Role", "RoleBinding"))


def test_its_account_is_its_own_and_read_only() -> None:
    hooks = {o["kind"]: o for o in _hooks({"exampleApp": {"enabled": True, "group": "ledger"}})}
    account = hooks["ServiceAccount"]["metadata"]["name"]
    assert hooks["Pod"]["spec"]["serviceAccountName"] == account
    assert hooks["RoleBinding"]["subjects"] == [
        {"kind": "ServiceAccount", "name": account, "namespace": rm.NAMESPACE}
    ]
    assert hooks["RoleBinding"]["roleRef"]["name"] == hooks["Role"]["metadata"]["name"]
    assert hooks["Role"]["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["list"]},
        {
            "apiGroups": ["k8slease.io"],
            "resources": ["scheduledjobgroups"],
            "verbs": ["get"],
            "resourceNames": ["ledger"],
        },
    ]
    # No other binding of the chart names the test's account, nor does the test's name another.
    others = [
        o
        for o in rm.render_objects({"exampleApp": {"enabled": True, "group": "ledger"}})
        if o["kind"] == "RoleBinding" and o not in hooks.values()
    ]
    assert all(s["name"] != account for b in others for s in b["subjects"])


def test_the_pod_checks_the_group_with_k8slease_status_and_is_hardened() -> None:
    values = {
        "exampleApp": {"enabled": True, "group": "ledger"},
        "tests": {"leaderTimeoutSeconds": 7},
    }
    (pod,) = [o for o in _hooks(values) if o["kind"] == "Pod"]
    spec = pod["spec"]
    assert spec["restartPolicy"] == "Never"
    assert spec["activeDeadlineSeconds"] == 7 + 60
    (container,) = spec["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["K8SLEASE_GROUP"] == "ledger" and env["LEADER_TIMEOUT_SECONDS"] == "7"
    assert '"k8slease", "status", group' in container["args"][0]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    context = container["securityContext"]
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert container["resources"]["limits"]["memory"]


def test_the_plain_manifests_have_no_hooks() -> None:
    assert _hooks(rm.manifest_values()), "the manifests' values render the test hook"
    for text in rm.manifest_files().values():
        assert "helm.sh/hook" not in text


@pytest.mark.parametrize(
    "tests",
    [{"leaderTimeoutSeconds": 0}, {"leaderTimeoutSeconds": "60"}, {"typo": True}],
)
def test_bad_values_are_refused_by_the_schema(tests: dict[str, Any]) -> None:
    with pytest.raises(helm_python.HelmValuesError):
        rm.render_objects({**WITH_APP, "tests": tests})

"""The chart's ValidatingAdmissionPolicy (issue 27): rendered where the cluster supports it, off
by a value, and its rules built from the groups' values. Its behaviour on a real kube-apiserver
is tested in tests/realserver/test_admission.py."""

from __future__ import annotations

from typing import Any

from charts import render_manifests as rm

GROUPS = {
    "admissionPolicy": {
        "groups": [
            {"name": "billing", "serviceAccounts": ["billing-app", "billing-peer"]},
            {"name": "reports", "namespace": "other", "serviceAccounts": ["r"], "users": ["bob"]},
        ],
        "breakGlass": {"users": ["alice"], "groups": ["ops"]},
    }
}


def policies(values: dict[str, Any], kube_version: str = "1.33") -> list[dict[str, Any]]:
    return [
        o for o in rm.render_objects(values, kube_version=kube_version)
        if o["apiVersion"].startswith("admissionregistration.k8s.io/")
    ]  # fmt: skip


def test_on_by_default_from_1_30_and_off_by_a_value() -> None:
    assert [o["kind"] for o in policies({})] == [
        "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
    ] * 2  # fmt: skip
    assert policies({}, kube_version="1.29") == [], "no GA ValidatingAdmissionPolicy before 1.30"
    assert policies({"admissionPolicy": {"enabled": False}}) == []


def test_every_object_is_valid_for_its_kubernetes_version() -> None:
    for version in ("1.30", "1.33", "1.36"):
        for obj in policies(GROUPS, kube_version=version):
            assert rm.validate_against_kubernetes(obj, version) is None, obj["kind"]


def test_group_writers_and_own_groups_rules_name_the_declared_accounts() -> None:
    leases = next(
        o for o in policies(GROUPS)
        if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"].endswith("-leases")
    )  # fmt: skip
    rules = leases["spec"]["validations"]
    writers = [r for r in rules if "group-writers" in r.get("messageExpression", "")]
    assert len(writers) == 2
    billing = next(
        r for r in writers if "group billing in namespace k8slease" in r["messageExpression"]
    )
    assert "'system:serviceaccount:k8slease:billing-app'" in billing["expression"]
    assert "'system:serviceaccount:k8slease:billing-peer'" in billing["expression"]
    reports = next(
        r for r in writers if "group reports in namespace other" in r["messageExpression"]
    )
    assert "'system:serviceaccount:other:r', 'bob'" in reports["expression"]
    own = [r for r in rules if "own-groups-only" in r.get("message", "")]
    assert len(own) == 4, "one per writer"
    assert all("variables.breakGlass" in r["expression"] for r in writers + own)
    breakglass = next(v for v in leases["spec"]["variables"] if v["name"] == "breakGlass")
    assert "['alice']" in breakglass["expression"] and "['ops']" in breakglass["expression"]
    bounds = [r for r in rules if "lease-bounds" in r.get("message", "")]
    assert any("<= 604800" in r["expression"] for r in bounds)
    binding = next(
        o for o in policies(GROUPS)
        if o["kind"] == "ValidatingAdmissionPolicyBinding"
        and o["spec"]["policyName"].endswith("-leases")
    )  # fmt: skip
    (selector,) = binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
    assert selector["values"] == ["k8slease", "other"]


def test_the_example_apps_group_is_guarded_when_it_is_enabled() -> None:
    leases = policies({"exampleApp": {"enabled": True}})[0]
    messages = [r.get("messageExpression", "") for r in leases["spec"]["validations"]]
    assert any("billing-app may write the Leases of group billing" in m for m in messages)


def test_operator_only_rule_names_the_operator_account() -> None:
    operator_only = next(
        o for o in policies({})
        if o["kind"] == "ValidatingAdmissionPolicy"
        and o["metadata"]["name"].endswith("-operator-only")
    )  # fmt: skip
    variable = operator_only["spec"]["variables"][0]["expression"]
    assert (
        "request.userInfo.username == 'system:serviceaccount:k8slease:k8slease-operator'"
        in variable
    )


def test_the_suites_policy_holds_the_admin_to_every_rule_in_every_test_namespace() -> None:
    """--admission-policy (tests/admission_policy.py): no break glass, the admin declared the
    ScheduledJobGroup writer, and the bindings match every namespace but the system ones."""
    from tests import admission_policy

    objects = admission_policy.policy_objects("1.37")
    bindings = [o for o in objects if o["kind"] == "ValidatingAdmissionPolicyBinding"]
    assert len(bindings) == 2
    for binding in bindings:
        (expression,) = binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
        assert expression["operator"] == "NotIn"
        assert set(expression["values"]) == {"kube-system", "kube-public", "kube-node-lease"}
    text = str([o["spec"] for o in objects if o["kind"] == "ValidatingAdmissionPolicy"])
    assert "system:masters" not in text, "break glass emptied: the admin is held to the rules"
    assert "'k8slease-admin'" in text


def _lease_rules(values: dict[str, Any]) -> list[str]:
    leases = next(
        o for o in policies(values)
        if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"].endswith("-leases")
    )  # fmt: skip
    return [r["expression"] for r in leases["spec"]["validations"]]


def test_the_operator_may_update_the_groups_leases_only_while_it_reads_journals() -> None:
    operator = "system:serviceaccount:k8slease:k8slease-operator"
    update = f"(variables.user == '{operator}' && request.operation == 'UPDATE')"
    only_update = f"variables.user != '{operator}' || (request.operation == 'UPDATE' && "
    reading = _lease_rules(GROUPS)
    group_writers = [r for r in reading if "billing-app" in r and "variables.user in" in r]
    assert group_writers and all(update in r for r in group_writers)
    (journals,) = [r for r in reading if r.startswith(only_update)]  # never a create
    assert "object.metadata.labels['k8slease.io/role'] == 'job'" in journals
    assert "object.spec.holderIdentity == oldObject.spec.holderIdentity" in journals
    for off in ({"operator": {"readJournals": False}}, {"operator": {"enabled": False}}):
        rules = _lease_rules({**GROUPS, **off})
        assert not any(operator in r for r in rules)
    deployment = next(
        o for o in rm.render_objects({"operator": {"readJournals": False}})
        if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("-operator")
    )  # fmt: skip
    assert "--no-read-journals" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]

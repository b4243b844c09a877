"""The elector Role narrowed to one group's Leases (issue 27): a binding that names its group (and
its jobs) gets get and update on ``<group>`` and ``<group>.<job>`` only. create, list and watch
cannot be narrowed by name the way the library uses them (tests/realserver/test_rbac_narrowed.py
shows why on a real kube-apiserver, and that the narrowed Role is enough)."""

from __future__ import annotations

from typing import Any

import pytest

from charts import render_manifests as rm

NARROWED = {
    "elector": {
        "bindings": [
            {"serviceAccount": "billing-app", "group": "billing", "jobs": ["invoices", "dunning"]},
            {"serviceAccount": "billing-peer", "group": "billing", "jobs": ["invoices"]},
            {"serviceAccount": "reports", "namespace": "team-a", "group": "reports"},
            {"serviceAccount": "legacy"},
        ]
    }
}
LEASES = ("coordination.k8s.io", "leases")


def _elector_rbac(values: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(kind, namespace, name) -> object, for the elector's Roles and RoleBindings."""
    return {
        (o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]): o
        for o in rm.render_objects(values)
        if o["kind"] in ("Role", "RoleBinding")
        and o["metadata"]["labels"]["app.kubernetes.io/component"] == "elector"
    }


def _lease_rules(role: dict[str, Any]) -> list[tuple[tuple[str, ...], tuple[str, ...] | None]]:
    """(sorted verbs, sorted resourceNames or None) of each rule on Leases."""
    return sorted(
        (
            tuple(sorted(rule["verbs"])),
            tuple(sorted(rule["resourceNames"])) if "resourceNames" in rule else None,
        )
        for rule in role["rules"]
        if rule["apiGroups"] == [LEASES[0]] and rule["resources"] == [LEASES[1]]
    )


def test_a_group_binding_gets_get_and_update_on_its_group_leases_only() -> None:
    objects = _elector_rbac(NARROWED)
    billing = objects[("Role", "k8slease", "k8slease-elector-billing")]
    assert _lease_rules(billing) == [
        (("create", "list", "watch"), None),
        (("get", "update"), ("billing", "billing.dunning", "billing.invoices")),
    ]
    assert [r for r in billing["rules"] if r["resources"] == ["events"]] == [
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}
    ]
    reports = objects[("Role", "team-a", "k8slease-elector-reports")]
    assert _lease_rules(reports)[1] == (("get", "update"), ("reports",)), "no jobs: leader only"


def test_accounts_of_one_group_share_its_role_and_others_keep_the_shared_one() -> None:
    objects = _elector_rbac(NARROWED)
    subjects = {
        key[2]: sorted((s["namespace"], s["name"]) for s in binding["subjects"])
        for key, binding in objects.items()
        if key[0] == "RoleBinding"
    }
    assert subjects == {
        "k8slease-elector-billing": [("k8slease", "billing-app"), ("k8slease", "billing-peer")],
        "k8slease-elector-reports": [("team-a", "reports")],
        "k8slease-elector": [("k8slease", "legacy")],
    }
    assert _lease_rules(objects[("Role", "k8slease", "k8slease-elector")]) == [
        (("create", "get", "list", "update", "watch"), None)
    ], "a binding without a group keeps the namespace-wide Role"


def test_the_example_apps_role_names_its_group_and_declared_jobs() -> None:
    objects = _elector_rbac(rm.manifest_values())
    role = objects[("Role", "k8slease", "k8slease-elector-billing")]
    assert _lease_rules(role)[1] == (("get", "update"), ("billing", "billing.nightly-invoices"))
    (binding,) = [o for k, o in objects.items() if k[0] == "RoleBinding"]
    assert binding["roleRef"]["name"] == "k8slease-elector-billing"
    assert [s["name"] for s in binding["subjects"]] == ["billing-app"]
    # its own group and jobs, whatever the operator is told to expect (the e2e tests empty that)
    values = {"exampleApp": {"enabled": True, "group": "b2", "scheduledJobGroup": {"jobs": []}}}
    role = _elector_rbac(values)[("Role", "k8slease", "k8slease-elector-b2")]
    assert _lease_rules(role)[1] == (("get", "update"), ("b2", "b2.nightly-invoices"))


@pytest.mark.parametrize("fast", [False, True])
def test_the_example_apps_jobs_are_the_demo_apps_locking_jobs(fast: bool) -> None:
    """exampleApp.jobs must name every job of billing_app.py that takes a lock, or its replicas
    are refused their job's Lease: read from the app's own Jobs, not from a copy."""
    from k8slease.cli.demoapp.billing_app import build_jobs

    jobs = build_jobs(namespace="x", fast=fast)
    locking = sorted(name for name, spec in jobs.specs.items() if spec.coordinated)
    default = rm.render_objects({"exampleApp": {"enabled": True}})
    (role,) = [
        o for o in default if o["kind"] == "Role" and o["metadata"]["name"].endswith("-billing")
    ]
    assert _lease_rules(role)[1][1] == tuple(
        sorted(["billing", *(f"billing.{j}" for j in locking)])
    )


def test_without_created_roles_group_accounts_bind_the_shared_role() -> None:
    values = {"elector": {**NARROWED["elector"], "createRole": False}}
    objects = _elector_rbac(values)
    assert not [k for k in objects if k[0] == "Role"]
    bound = {
        (key[1], s["name"], binding["roleRef"]["name"])
        for key, binding in objects.items()
        for s in binding["subjects"]
    }
    assert bound == {
        ("k8slease", "billing-app", "k8slease-elector"),
        ("k8slease", "billing-peer", "k8slease-elector"),
        ("k8slease", "legacy", "k8slease-elector"),
        ("team-a", "reports", "k8slease-elector"),
    }


def test_a_group_binding_declares_its_account_a_writer_to_the_admission_policy() -> None:
    (leases,) = [
        o for o in rm.render_objects(NARROWED, kube_version="1.33")
        if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"].endswith("-leases")
    ]  # fmt: skip
    rules = leases["spec"]["validations"]
    writers = {
        r["messageExpression"].split("group ")[1].split(" in namespace ")[0]: r["expression"]
        for r in rules
        if "group-writers" in r.get("messageExpression", "")
    }
    assert set(writers) == {"billing", "reports"}, "one rule per group, the two billing merged"
    assert "['system:serviceaccount:k8slease:billing-app', " in writers["billing"]
    assert "'system:serviceaccount:k8slease:billing-peer']" in writers["billing"]
    assert "['system:serviceaccount:team-a:reports']" in writers["reports"]
    own = [r["message"] for r in rules if "own-groups-only" in r.get("message", "")]
    assert not [m for m in own if "legacy" in m], "a binding without a group declares nothing"


def test_a_group_declared_twice_merges_its_writers() -> None:
    values = {
        **NARROWED,
        "admissionPolicy": {"groups": [{"name": "billing", "users": ["alice"]}]},
    }
    (leases,) = [
        o for o in rm.render_objects(values, kube_version="1.33")
        if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"].endswith("-leases")
    ]  # fmt: skip
    billing = [
        r["expression"] for r in leases["spec"]["validations"]
        if "group billing in" in r.get("messageExpression", "")
    ]  # fmt: skip
    assert len(billing) == 1
    assert (
        "['alice', 'system:serviceaccount:k8slease:billing-app', "
        "'system:serviceaccount:k8slease:billing-peer']" in billing[0]
    )


@pytest.mark.parametrize(
    ("binding", "complaint"),
    [
        ({"serviceAccount": "a", "jobs": ["x"]}, "'group' required, if 'jobs' exists"),
        ({"serviceAccount": "a", "group": "Billing"}, "/elector/bindings/0/group"),
        ({"serviceAccount": "a", "group": "b", "jobs": ["bad.name"]}, "/jobs/0"),
        ({"serviceAccount": "a", "group": "b", "jobs": ["x", "x"]}, "/jobs"),
    ],
)
def test_bad_group_bindings_are_refused_by_the_schema(
    binding: dict[str, Any], complaint: str
) -> None:
    with pytest.raises(Exception, match="schema") as info:
        rm.render_objects({"elector": {"bindings": [binding]}})
    assert complaint in str(info.value)


def test_the_notes_name_each_groups_leases() -> None:
    notes = rm.render_notes(NARROWED)
    assert (
        'Group "billing" in k8slease: billing-app, billing-peer may get and update only the '
        "Leases billing, billing.invoices, billing.dunning" in notes
    )
    assert 'Group "reports" in team-a: reports may get and update only the Leases reports' in notes
    assert "these ServiceAccounts: k8slease/legacy." in notes

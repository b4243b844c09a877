"""RBAC audit of everything the chart can render: least privilege, no wildcards, no Secrets,
nothing cluster-scoped unless the values ask for a cluster-wide operator."""

from __future__ import annotations

from typing import Any

import pytest

from charts import render_manifests as rm

ROLE_KINDS = {"Role", "ClusterRole"}
BINDING_KINDS = {"RoleBinding", "ClusterRoleBinding"}
CLUSTER_SCOPED_RBAC = {"ClusterRole", "ClusterRoleBinding"}

#: (apiGroup, resource) -> verbs: the whole of what an app replica may do.
ELECTOR_GRANTS = {
    ("coordination.k8s.io", "leases"): {"get", "list", "watch", "create", "update"},
    ("", "events"): {"create"},
}
#: The whole of what the operator may do in a namespace it watches with operator.readJournals
#: off: it never writes Leases. (tests/realserver/test_rbac_least_privilege.py shows on a real
#: server that each of these verbs is needed.)
OPERATOR_OBSERVING = {
    ("k8slease.io", "scheduledjobgroups"): {"list", "watch", "create"},
    ("k8slease.io", "scheduledjobgroups/status"): {"patch"},
    ("coordination.k8s.io", "leases"): {"list", "watch"},
    ("", "events"): {"create"},
}
#: With operator.readJournals (the default): it also watches the groups' Pods, and reads and
#: updates a job Lease to merge a dead replica's journal into it.
OPERATOR_GRANTS = {
    **OPERATOR_OBSERVING,
    ("coordination.k8s.io", "leases"): {"get", "list", "watch", "update"},
    ("", "pods"): {"list", "watch"},
}
#: Only with operator.clusterWide=true: kopf watches the CRD to notice it changing.
CLUSTER_WIDE_EXTRA = {
    ("apiextensions.k8s.io", "customresourcedefinitions"): {"list", "watch"},
}

VALUE_SETS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "manifests": rm.manifest_values(),
    "cluster-wide": {"operator": {"clusterWide": True}, "exampleApp": {"enabled": True}},
    "multi-namespace": {
        "operator": {"watchNamespaces": ["team-a", "team-b"]},
        "elector": {
            "bindings": [
                {"serviceAccount": "billing"},
                {"serviceAccount": "reports", "namespace": "team-a"},
                {"serviceAccount": "ledger", "namespace": "team-c"},
            ]
        },
        "exampleApp": {"enabled": True},
    },
    "no-operator": {"operator": {"enabled": False}},
    "no-journals": {"operator": {"readJournals": False}},
    "narrowed": {
        "elector": {
            "bindings": [
                {"serviceAccount": "billing", "group": "billing", "jobs": ["invoices"]},
                {"serviceAccount": "reports", "namespace": "team-a", "group": "reports"},
            ]
        },
        "exampleApp": {"enabled": True, "group": "demo"},
    },
}


def _grants(role: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    grants: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                grants.setdefault((group, resource), set()).update(rule["verbs"])
    return grants


def _rbac(values: dict[str, Any]) -> list[dict[str, Any]]:
    return [o for o in rm.render_objects(values) if o["kind"] in ROLE_KINDS | BINDING_KINDS]


def _component(obj: dict[str, Any]) -> str:
    component: str = obj["metadata"]["labels"]["app.kubernetes.io/component"]
    return component


@pytest.mark.parametrize("values_name", sorted(VALUE_SETS))
def test_no_wildcards_no_secrets_no_escalation(values_name: str) -> None:
    for role in _rbac(VALUE_SETS[values_name]):
        if role["kind"] not in ROLE_KINDS:
            continue
        assert "aggregationRule" not in role
        for rule in role["rules"]:
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[field], (role["metadata"]["name"], rule)
                assert all("*" not in item for item in rule[field]), rule
            assert "secrets" not in rule["resources"]
            assert not {"escalate", "bind", "impersonate", "delete", "deletecollection"} & set(
                rule["verbs"]
            ), rule
            assert "resourceNames" not in rule or rule["resourceNames"]
            assert "nonResourceURLs" not in rule


@pytest.mark.parametrize("values_name", sorted(VALUE_SETS))
def test_elector_role_grants_exactly_leases_and_events(values_name: str) -> None:
    roles = [o for o in _rbac(VALUE_SETS[values_name]) if _component(o) == "elector"]
    assert {r["kind"] for r in roles} <= {"Role", "RoleBinding"}, "elector is never cluster-wide"
    for role in roles:
        if role["kind"] == "Role":
            assert _grants(role) == ELECTOR_GRANTS


@pytest.mark.parametrize("values_name", sorted(VALUE_SETS))
def test_operator_rbac_is_exactly_what_it_needs(values_name: str) -> None:
    values = VALUE_SETS[values_name]
    cluster_wide = values.get("operator", {}).get("clusterWide", False)
    roles = [o for o in _rbac(values) if _component(o) == "operator" and o["kind"] in ROLE_KINDS]
    if values.get("operator", {}).get("enabled", True) is False:
        assert roles == []
        return
    assert roles
    journals = values.get("operator", {}).get("readJournals", True)
    grants = OPERATOR_GRANTS if journals else OPERATOR_OBSERVING
    for role in roles:
        if cluster_wide:
            assert role["kind"] == "ClusterRole"
            assert _grants(role) == grants | CLUSTER_WIDE_EXTRA
        else:
            assert role["kind"] == "Role"
            assert _grants(role) == grants


@pytest.mark.parametrize("values_name", sorted(VALUE_SETS))
def test_cluster_scope_only_when_asked(values_name: str) -> None:
    values = VALUE_SETS[values_name]
    cluster_objects = [o for o in _rbac(values) if o["kind"] in CLUSTER_SCOPED_RBAC]
    if values.get("operator", {}).get("clusterWide", False):
        assert {(o["kind"], _component(o)) for o in cluster_objects} == {
            ("ClusterRole", "operator"),
            ("ClusterRoleBinding", "operator"),
        }
    else:
        assert cluster_objects == []


@pytest.mark.parametrize("values_name", sorted(VALUE_SETS))
def test_bindings_point_at_roles_the_chart_renders(values_name: str) -> None:
    objects = _rbac(VALUE_SETS[values_name])
    roles = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objects}
    for binding in (o for o in objects if o["kind"] in BINDING_KINDS):
        ref = binding["roleRef"]
        assert ref["apiGroup"] == "rbac.authorization.k8s.io"
        namespace = None if ref["kind"] == "ClusterRole" else binding["metadata"]["namespace"]
        assert (ref["kind"], namespace, ref["name"]) in roles, binding["metadata"]
        for subject in binding["subjects"]:
            assert subject["kind"] == "ServiceAccount", "only ServiceAccounts, never users/groups"
            assert subject["namespace"]
            assert not subject["name"].startswith("system:")


def test_elector_bindings_bind_the_listed_service_accounts_per_namespace() -> None:
    objects = _rbac(VALUE_SETS["multi-namespace"])
    bound = {
        (b["metadata"]["namespace"], s["namespace"], s["name"])
        for b in objects
        if b["kind"] == "RoleBinding" and _component(b) == "elector"
        for s in b["subjects"]
    }
    assert bound == {
        ("k8slease", "k8slease", "billing"),
        ("k8slease", "k8slease", "billing-app"),
        ("team-a", "team-a", "reports"),
        ("team-c", "team-c", "ledger"),
    }
    role_namespaces = {
        o["metadata"]["namespace"]
        for o in objects
        if o["kind"] == "Role" and _component(o) == "elector"
    }
    assert role_namespaces == {"k8slease", "team-a", "team-c"}


def test_operator_roles_follow_watched_namespaces() -> None:
    objects = _rbac(VALUE_SETS["multi-namespace"])
    namespaces = {
        (o["kind"], o["metadata"]["namespace"]) for o in objects if _component(o) == "operator"
    }
    assert namespaces == {
        ("Role", "team-a"),
        ("RoleBinding", "team-a"),
        ("Role", "team-b"),
        ("RoleBinding", "team-b"),
    }
    for binding in (
        o for o in objects if o["kind"] == "RoleBinding" and _component(o) == "operator"
    ):
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "k8slease-operator", "namespace": "k8slease"}
        ]


def test_app_service_accounts_get_no_operator_rights() -> None:
    """The example app's ServiceAccount is bound to its group's elector Role and nothing else."""
    objects = _rbac(VALUE_SETS["cluster-wide"])
    refs = {
        (b["roleRef"]["kind"], b["roleRef"]["name"])
        for b in objects
        if b["kind"] in BINDING_KINDS and any(s["name"] == "billing-app" for s in b["subjects"])
    }
    assert refs == {("Role", "k8slease-elector-billing")}

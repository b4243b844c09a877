"""RBAC on a real kube-apiserver, least privilege: every verb the chart's Roles (and the
cluster-wide operator's ClusterRole) grant is needed. For each, a new ServiceAccount is bound to
a copy of the Role without it, and a k8slease operation run as that account is refused. The
chart's RBAC is applied by the module-scoped ``cluster`` fixture (tests/realserver/conftest.py);
that the accounts work and are refused what they must not do is test_rbac_accounts.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
from kubernetes import client

from tests.realserver.accounts import grants
from tests.realserver.forbidden import ForbiddenCalls, record_forbidden
from tests.realserver.operator_runs import OperatorRun, operator_run
from tests.realserver.rbac_cluster import (
    APP,
    TICK,
    Cluster,
    elector,
    events_about,
    failing_job,
    jobs_with,
)
from tests.support.jobleases import lost_run_lease
from tests.support.pods import default_account, ended_pod


def _elector_refused(cluster: Cluster, calls: ForbiddenCalls, verb: str, account: str) -> None:
    candidate = elector(cluster.client_as(account), cluster.namespace, f"lp-{uuid.uuid4().hex[:6]}")
    candidate.start()
    try:
        calls.wait(verb, "/leases")
    finally:
        candidate.stop(5)


def _jobs_list_refused(cluster: Cluster, calls: ForbiddenCalls, account: str) -> None:
    jobs = jobs_with(cluster.client_as(account), cluster.namespace, "listing", lambda c: None)
    try:
        calls.wait("list", "/leases")
    finally:
        jobs.stop()


def _failure_event_refused(cluster: Cluster, calls: ForbiddenCalls, account: str) -> None:
    group = f"ev{uuid.uuid4().hex[:6]}"
    jobs = jobs_with(cluster.client_as(account), cluster.namespace, group, failing_job)
    try:
        assert jobs.fire("run", TICK) == "failed"
        calls.wait("create", "/events")
        assert events_about(cluster, f"{group}.run") == []
    finally:
        jobs.stop()


ElectorCheck = Callable[[Cluster, ForbiddenCalls, str], None]

#: What breaks without each verb of the elector Role: the k8slease request that is refused.
ELECTOR_NEEDS: dict[tuple[str, str, str], tuple[str, ElectorCheck]] = {
    ("coordination.k8s.io", "leases", "get"): (
        "the elector cannot read its Lease",
        lambda c, f, a: _elector_refused(c, f, "get", a),
    ),
    ("coordination.k8s.io", "leases", "create"): (
        "the elector cannot create its Lease",
        lambda c, f, a: _elector_refused(c, f, "create", a),
    ),
    ("coordination.k8s.io", "leases", "update"): (
        "the leader cannot renew its Lease",
        lambda c, f, a: _elector_refused(c, f, "update", a),
    ),
    ("coordination.k8s.io", "leases", "watch"): (
        "candidates cannot watch the Lease (failover waits for a poll)",
        lambda c, f, a: _elector_refused(c, f, "watch", a),
    ),
    ("coordination.k8s.io", "leases", "list"): (
        "Jobs' lock informer cannot list the group's job Leases",
        _jobs_list_refused,
    ),
    ("", "events", "create"): ("a failed run posts no Event", _failure_event_refused),
}


def test_every_elector_grant_has_a_check(cluster: Cluster) -> None:
    assert grants(cluster.roles["elector"]) == set(ELECTOR_NEEDS)


@pytest.mark.parametrize("grant", sorted(ELECTOR_NEEDS), ids=lambda g: f"{g[1]}-{g[2]}")
def test_elector_role_without_a_verb_breaks_something(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch, grant: tuple[str, str, str]
) -> None:
    account = cluster.account_without("elector", *grant)
    calls = record_forbidden(monkeypatch)
    _, check = ELECTOR_NEEDS[grant]
    check(cluster, calls, account)


OperatorCheck = Callable[[Cluster, OperatorRun], None]


def _lease_leader(cluster: Cluster, name: str) -> Callable[[], None]:
    """Start (as the app) a leader of group ``name``; returns how to stop it."""
    leader = elector(cluster.client_as(APP), cluster.namespace, name).start()
    assert leader.wait_until_leading(10)
    return lambda: leader.stop(5)


def _operator_refused(what: str) -> OperatorCheck:
    def check(cluster: Cluster, run: OperatorRun) -> None:
        stop = _lease_leader(cluster, f"op-{uuid.uuid4().hex[:6]}")
        try:
            run.wait_log(what)
        finally:
            stop()

    return check


def _journal_refused(what: str) -> OperatorCheck:
    """A replica died with a succeeded run its job Lease records lost: the operator cannot
    merge its journal, and logs ``what``."""

    def check(cluster: Cluster, run: OperatorRun) -> None:
        group = f"jr{uuid.uuid4().hex[:6]}"
        message = lost_run_lease(cluster.admin, cluster.namespace, group, f"{group}-app")
        core = client.CoreV1Api(cluster.admin)
        default_account(core, cluster.namespace)
        ended_pod(
            core, cluster.namespace, f"{group}-app", group=group, message=message,
            container_id=f"containerd://{group}",
        )  # fmt: skip
        run.wait_log(what)

    return check


#: What breaks without each verb of the operator Role: the refusal the operator logs while a
#: group's leader runs. (The chart granted more before these tests: scheduledjobgroups get,
#: update and patch, scheduledjobgroups/status get and update, leases get. Without any of them
#: the operator still created the group, wrote its status and posted its Events: removed.)
OPERATOR_NEEDS: dict[tuple[str, str, str], tuple[str, OperatorCheck]] = {
    ("k8slease.io", "scheduledjobgroups", "list"): (
        "kopf cannot list the groups: no status is ever written",
        _operator_refused(r"GET \S+/scheduledjobgroups -> APIForbiddenError")),
    ("k8slease.io", "scheduledjobgroups", "watch"): (
        "kopf cannot watch the groups: no status is ever written",
        _operator_refused(r"GET \S+/scheduledjobgroups\?watch=true\S* -> APIForbiddenError")),
    ("k8slease.io", "scheduledjobgroups", "create"): (
        "no group is created for Leases that have none",
        _operator_refused(r"operator\.create_failed.*status=403")),
    ("k8slease.io", "scheduledjobgroups/status", "patch"): (
        "no status is written",
        _operator_refused(r"operator\.status_write_failed.*status=403")),
    ("coordination.k8s.io", "leases", "list"): (
        "kopf cannot list the Leases: no leader is ever seen",
        _operator_refused(r"GET \S+/leases\?labelSelector=\S+ -> APIForbiddenError")),
    ("coordination.k8s.io", "leases", "watch"): (
        "kopf cannot watch the Leases: leader changes are not seen",
        _operator_refused(r"GET \S+/leases\?watch=true\S* -> APIForbiddenError")),
    ("", "events", "create"): (
        "no LeaderElected (or any) Event is posted",
        _operator_refused(r"event\.post_failed.*403")),
    ("", "pods", "list"): (
        "kopf cannot list the groups' Pods: no journal is ever read",
        _journal_refused(r"GET \S+/pods\?labelSelector=\S+ -> APIForbiddenError")),
    ("", "pods", "watch"): (
        "kopf cannot watch the groups' Pods: a replica's death is not seen",
        _journal_refused(r"GET \S+/pods\?watch=true\S* -> APIForbiddenError")),
    ("coordination.k8s.io", "leases", "get"): (
        "a dead replica's journal cannot be judged against its Lease",
        _journal_refused(r"operator\.journal_merge_failed.*(?i:forbidden|403)")),
    ("coordination.k8s.io", "leases", "update"): (
        "a dead replica's journal cannot be merged: its run stays recorded lost",
        _journal_refused(r"operator\.journal_merge_failed.*(?i:forbidden|403)")),
}  # fmt: skip


def test_every_operator_grant_has_a_check(cluster: Cluster) -> None:
    assert grants(cluster.roles["operator"]) == set(OPERATOR_NEEDS)


#: What the cluster-wide operator's ClusterRole grants beyond the namespaced Role's rules (which
#: it shares, and which the checks above cover). (It granted CRD get too: nothing needs it.)
CLUSTER_WIDE_NEEDS: dict[tuple[str, str, str], tuple[str, OperatorCheck]] = {
    ("apiextensions.k8s.io", "customresourcedefinitions", "list"): (
        "kopf cannot list CRDs: it retries for a minute, then never notices the CRD change",
        _operator_refused(r"GET \S+/customresourcedefinitions -> APIForbiddenError")),
    ("apiextensions.k8s.io", "customresourcedefinitions", "watch"): (
        "kopf cannot watch CRDs: it never notices the CRD change",
        _operator_refused(
            r"GET \S+/customresourcedefinitions\?watch=true\S* -> APIForbiddenError")),
}  # fmt: skip


def test_cluster_wide_operator_works_as_its_account(cluster: Cluster) -> None:
    log = cluster.tmp / "operator-cluster-wide.log"
    kubeconfig = cluster.kubeconfig_as(cluster.cluster_wide_account)
    with operator_run(kubeconfig, cluster.namespace, log, all_namespaces=True) as run:
        stop = _lease_leader(cluster, "wide")
        try:
            status = run.wait_status(cluster.admin, "wide", lambda s: s.get("leader"))
            assert status["leader"]
        finally:
            stop()
        run.assert_no_forbidden()


def test_every_cluster_wide_grant_has_a_check(cluster: Cluster) -> None:
    extra = grants(cluster.roles["operator-cluster-wide"]) - grants(cluster.roles["operator"])
    assert extra == set(CLUSTER_WIDE_NEEDS)


@pytest.mark.parametrize("grant", sorted(CLUSTER_WIDE_NEEDS), ids=lambda g: f"{g[1]}-{g[2]}")
def test_cluster_role_without_a_verb_breaks_something(
    cluster: Cluster, grant: tuple[str, str, str]
) -> None:
    account = cluster.account_without("operator-cluster-wide", *grant)
    _, check = CLUSTER_WIDE_NEEDS[grant]
    log = cluster.tmp / f"operator-{account}.log"
    kubeconfig = cluster.kubeconfig_as(account)
    with operator_run(kubeconfig, cluster.namespace, log, all_namespaces=True) as run:
        check(cluster, run)


@pytest.mark.parametrize("grant", sorted(OPERATOR_NEEDS), ids=lambda g: f"{g[1]}-{g[2]}")
def test_operator_role_without_a_verb_breaks_something(
    cluster: Cluster, grant: tuple[str, str, str]
) -> None:
    account = cluster.account_without("operator", *grant)
    _, check = OPERATOR_NEEDS[grant]
    log = cluster.tmp / f"operator-{account}.log"
    with operator_run(cluster.kubeconfig_as(account), cluster.namespace, log) as run:
        check(cluster, run)

"""RBAC on a real kube-apiserver, the chart's accounts at work: the chart's ServiceAccounts,
Roles and bindings are applied (the module-scoped ``cluster`` fixture of conftest.py), tokens
come from the TokenRequest API, and the elector, Jobs and the operator run *as* those accounts.
They work; and they are refused (403) what they must not do. (That every verb the chart grants
is needed is test_rbac_least_privilege.py.)
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import kubernetes.client
import kubernetes.watch
import pytest
from kubernetes.client.exceptions import ApiException

from k8slease.errors import Forbidden
from k8slease.lease.transport import LeaseTransport
from k8slease.lease.view import LeaseView
from k8slease.names import CRD_GROUP, CRD_PLURAL, CRD_VERSION
from tests.realserver.forbidden import record_forbidden
from tests.realserver.operator_runs import operator_run
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


def posted_about(cluster: Cluster, name: str, *, within: float = 10.0) -> list[Any]:
    """The Events about ``name`` once one came (replicas post them from a thread of their own,
    not before ``fire`` returns), watched for up to ``within`` seconds."""
    core = kubernetes.client.CoreV1Api(cluster.admin)
    watch: Any = kubernetes.watch.Watch()  # type: ignore[no-untyped-call]
    selector = f"involvedObject.name={name}"
    for _ in watch.stream(
        core.list_namespaced_event,
        cluster.namespace,
        field_selector=selector,
        timeout_seconds=int(within),
    ):
        watch.stop()
    return events_about(cluster, name)


# --- the chart's accounts work -------------------------------------------------------------------


def test_elector_leads_as_the_app_account(cluster: Cluster) -> None:
    a = elector(cluster.client_as(APP), cluster.namespace, "works", "replica-a").start()
    b = elector(cluster.client_as(APP), cluster.namespace, "works", "replica-b")
    try:
        assert a.wait_until_leading(10)
        b.start()
        a.stop(5)  # releases: b takes over (read, update, watch all allowed)
        assert b.wait_until_leading(10)
    finally:
        a.stop(5)
        b.stop(5)


def test_jobs_claim_ticks_and_report_failures_as_the_app_account(cluster: Cluster) -> None:
    ran: list[datetime | None] = []
    one = jobs_with(
        cluster.client_as(APP), cluster.namespace, "nightly", lambda c: ran.append(c.tick)
    )
    two = jobs_with(
        cluster.client_as(APP), cluster.namespace, "nightly", lambda c: ran.append(c.tick)
    )
    broken = jobs_with(cluster.client_as(APP), cluster.namespace, "broken", failing_job)
    try:
        assert one.fire("run", TICK) == "succeeded"
        assert two.fire("run", TICK) is None, "the tick was claimed once"
        assert ran == [TICK]
        assert broken.fire("run", TICK) == "failed"
        assert [e.type for e in posted_about(cluster, "broken.run")] == ["Warning"]
    finally:
        for jobs in (one, two, broken):
            jobs.stop()


def test_operator_records_the_leader_as_its_account(cluster: Cluster) -> None:
    app = cluster.client_as(APP)
    with operator_run(
        cluster.kubeconfig_as(cluster.operator_account),
        cluster.namespace,
        cluster.tmp / "operator-works.log",
    ) as run:
        leader = elector(app, cluster.namespace, "observed", "replica-a").start()
        try:
            assert leader.wait_until_leading(10)
            status = run.wait_status(cluster.admin, "observed", lambda s: s.get("leader"))
            assert status["leader"] == "replica-a"
            assert run.wait_event(cluster.admin, "observed", "LeaderElected")
        finally:
            leader.stop(5)
        run.assert_no_forbidden()


def test_operator_merges_a_journal_as_its_account(cluster: Cluster) -> None:
    message = lost_run_lease(cluster.admin, cluster.namespace, "journaled", "journaled-app")
    core = kubernetes.client.CoreV1Api(cluster.admin)
    default_account(core, cluster.namespace)
    with operator_run(
        cluster.kubeconfig_as(cluster.operator_account),
        cluster.namespace,
        cluster.tmp / "operator-journals.log",
    ) as run:
        ended_pod(
            core, cluster.namespace, "journaled-app", group="journaled", message=message,
            container_id="containerd://journaled",
        )  # fmt: skip
        run.wait_log(r"operator\.journal_merged")
        run.assert_no_forbidden()
    job = LeaseView.decode(LeaseTransport(cluster.admin, cluster.namespace).get("journaled.run"))
    assert (job.job.count("lost"), job.job.count("succeeded")) == (0, 1)


# --- what they must not do ----------------------------------------------------------------------


@pytest.mark.parametrize("account", ["app", "operator"])
def test_no_account_reads_secrets(cluster: Cluster, account: str) -> None:
    name = APP if account == "app" else cluster.operator_account
    core = kubernetes.client.CoreV1Api(cluster.client_as(name))
    for call in (
        lambda: core.list_namespaced_secret(cluster.namespace),
        lambda: core.read_namespaced_secret("any", cluster.namespace),
        lambda: core.list_secret_for_all_namespaces(),
    ):
        with pytest.raises(ApiException) as info:
            call()
        assert info.value.status == 403


def test_app_account_has_no_leases_in_another_namespace(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    transport = LeaseTransport(cluster.client_as(APP), cluster.other)
    with pytest.raises(Forbidden):
        transport.list()
    with pytest.raises(Forbidden):
        transport.get("any")
    with pytest.raises(Forbidden):
        transport.create(
            {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": "x"}, "spec": {}}
        )  # fmt: skip
    calls = record_forbidden(monkeypatch)
    outside = elector(cluster.client_as(APP), cluster.other, "outside").start()
    try:
        calls.wait("get", f"/namespaces/{cluster.other}/leases/outside")
        calls.wait("watch", f"/namespaces/{cluster.other}/leases")
        assert not outside.is_leader
    finally:
        outside.stop(5)


def test_app_account_cannot_write_scheduledjobgroups(cluster: Cluster) -> None:
    api = kubernetes.client.CustomObjectsApi(cluster.client_as(APP))
    body = {
        "apiVersion": f"{CRD_GROUP}/{CRD_VERSION}",
        "kind": "ScheduledJobGroup",
        "metadata": {"name": "not-yours"},
        "spec": {},
    }
    with pytest.raises(ApiException) as info:
        api.create_namespaced_custom_object(
            CRD_GROUP, CRD_VERSION, cluster.namespace, CRD_PLURAL, body
        )
    assert info.value.status == 403
    with pytest.raises(ApiException) as info:
        api.patch_namespaced_custom_object_status(
            CRD_GROUP,
            CRD_VERSION,
            cluster.namespace,
            CRD_PLURAL,
            "not-yours",
            {"status": {"leader": "me"}},
        )
    assert info.value.status == 403


def test_operator_account_cannot_create_or_delete_leases(cluster: Cluster) -> None:
    """It may update one (merging a dead replica's journal:
    test_operator_merges_a_journal_as_its_account), never create or delete one."""
    admin_leases = LeaseTransport(cluster.admin, cluster.namespace)
    existing = admin_leases.create(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "held"},
            "spec": {},
        }
    )
    transport = LeaseTransport(cluster.client_as(cluster.operator_account), cluster.namespace)
    with pytest.raises(Forbidden):
        transport.create(
            {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": "mine"},
                "spec": {},
            }
        )
    with pytest.raises(Forbidden):
        transport.delete("held")
    assert existing

"""RBAC on a real kube-apiserver: the chart's ServiceAccounts, Roles and bindings are applied,
tokens come from the TokenRequest API, and the elector, Jobs and the operator run *as* those
accounts. They work; they are refused (403) what they must not do; and every verb the chart
grants is needed: with it removed from the Role, a k8slease operation is refused.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import kubernetes.client
import kubernetes.watch
import pytest
from kubernetes.client.exceptions import ApiException

from charts import render_manifests as rm
from k8slease import Jobs, LeaderElector, Mode
from k8slease.errors import Forbidden
from k8slease.lease.transport import LeaseTransport
from k8slease.names import CRD_GROUP, CRD_PLURAL, CRD_VERSION
from k8slease.testing.pytest_plugin import wait_established
from tests.realserver.accounts import (
    Access,
    chart_rbac,
    create_all,
    grants,
    request_token,
    service_account_user,
    wait_for_access,
    without,
)
from tests.realserver.forbidden import ForbiddenCalls, record_forbidden
from tests.realserver.operator_runs import OperatorRun, operator_run
from tests.support.rest import Rest
from tests.support.timing import NEVER
from tests.support.timing import OPERATOR_FAST as FAST

TICK = datetime(2026, 1, 1, 2, 0, tzinfo=UTC)
APP = "app"


@dataclass
class Cluster:
    """The chart's RBAC applied in a fresh release namespace of the real server."""

    server: Any
    admin: Any
    rest: Rest
    namespace: str
    other: str
    fullname: str
    roles: dict[str, dict[str, Any]]
    tmp: Path
    clients: list[Any] = field(default_factory=list)

    @property
    def operator_account(self) -> str:
        return f"{self.fullname}-operator"

    @property
    def cluster_wide_account(self) -> str:
        """The operator account of the chart installed with operator.clusterWide=true."""
        return f"{self.fullname}-cw-operator"

    def client_as(self, service_account: str) -> Any:
        token = request_token(self.admin, self.namespace, service_account)
        client = self.server.api_client(token=token)
        self.clients.append(client)
        return client

    def kubeconfig_as(self, service_account: str) -> Path:
        token = request_token(self.admin, self.namespace, service_account)
        target = self.tmp / f"{service_account}-{uuid.uuid4().hex[:6]}.kubeconfig"
        written: Path = self.server.kubeconfig_for_token(token, target)
        return written

    def account_without(self, component: str, group: str, resource: str, verb: str) -> str:
        """A new ServiceAccount bound to ``component``'s Role (or ClusterRole) minus one verb;
        returns its name once the authorizer refuses that verb and allows the rest."""
        role = self.roles[component]
        cluster_scoped = role["kind"] == "ClusterRole"
        name = f"{component}-no-{verb}-{resource.replace('/', '-')}"[:50] + uuid.uuid4().hex[:5]
        variant = without(role, group, resource, verb)
        where = {} if cluster_scoped else {"namespace": self.namespace}
        variant["metadata"] = {"name": name, **where}
        binding = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding" if cluster_scoped else "RoleBinding",
            "metadata": {"name": name, **where},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": role["kind"],
                "name": name,
            },
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": self.namespace}],
        }
        account = {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": self.namespace},
        }
        create_all(self.rest, [account, variant, binding])
        user = service_account_user(self.namespace, name)
        scope = "" if cluster_scoped else self.namespace
        kept_group, kept_resource, kept_verb = sorted(grants(variant))[0]
        resource_name, _, sub = kept_resource.partition("/")
        wait_for_access(
            self.admin, user, Access(kept_verb, resource_name, kept_group, scope, sub), True
        )
        resource_name, _, sub = resource.partition("/")
        wait_for_access(self.admin, user, Access(verb, resource_name, group, scope, sub), False)
        return name


@pytest.fixture(scope="module")
def cluster(k8s_real_apiserver: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    admin = k8s_real_apiserver.api_client()
    rest = Rest(admin)
    token = uuid.uuid4().hex[:6]
    namespace, other = f"rbac-{token}", f"rbac-other-{token}"
    for name in (namespace, other):
        answer = rest.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        assert answer.status == 201, answer.body
    (crd,) = rm.crd_objects()
    assert rest.create(crd).status in (201, 409)
    wait_established(admin, crd["metadata"]["name"])
    fullname = f"rb-{token}"
    values = {"fullnameOverride": fullname, "elector": {"bindings": [{"serviceAccount": APP}]}}
    objects = chart_rbac(namespace, values)
    app_account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": APP, "namespace": namespace},
    }
    create_all(rest, [app_account, *objects])
    roles = {
        o["metadata"]["labels"]["app.kubernetes.io/component"]: o
        for o in objects
        if o["kind"] == "Role"
    }
    assert set(roles) == {"elector", "operator"}
    wide = chart_rbac(namespace, {"fullnameOverride": f"{fullname}-cw",
                                  "operator": {"clusterWide": True}})  # fmt: skip
    wide = [o for o in wide if o["metadata"]["labels"]["app.kubernetes.io/component"] == "operator"]
    create_all(rest, wide)
    (roles["operator-cluster-wide"],) = [o for o in wide if o["kind"] == "ClusterRole"]
    state = Cluster(
        k8s_real_apiserver,
        admin,
        rest,
        namespace,
        other,
        fullname,
        roles,
        tmp_path_factory.mktemp("rbac"),
    )
    for component, account in (("elector", APP), ("operator", state.operator_account),
                               ("operator-cluster-wide", state.cluster_wide_account)):  # fmt: skip
        kept = sorted(grants(roles[component]))[0]
        user = service_account_user(namespace, account)
        resource, _, sub = kept[1].partition("/")
        scope = "" if roles[component]["kind"] == "ClusterRole" else namespace
        wait_for_access(admin, user, Access(kept[2], resource, kept[0], scope, sub), True)
    yield state
    for client in state.clients:
        client.close()
    admin.close()


def elector(api: Any, namespace: str, name: str, identity: str = "a") -> LeaderElector:
    return LeaderElector(name, namespace=namespace, identity=identity, api_client=api, **FAST)


def jobs_with(api: Any, namespace: str, group: str, job: Callable[..., Any]) -> Jobs:
    jobs = Jobs(group, namespace=namespace, identity=f"{group}-replica", api_client=api)
    jobs.cron(NEVER, mode=Mode.ONCE_PER_TICK, name="run", lock_at_most_for=60)(job)
    jobs.start()
    return jobs


def failing_job(ctx: Any) -> None:
    raise RuntimeError("this run fails on purpose")


def events_about(cluster: Cluster, name: str) -> list[Any]:
    core = kubernetes.client.CoreV1Api(cluster.admin)
    found = core.list_namespaced_event(
        cluster.namespace, field_selector=f"involvedObject.name={name}"
    )
    return list(found.items)


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


def test_operator_account_cannot_write_leases(cluster: Cluster) -> None:
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
        transport.replace("held", {**existing, "spec": {"holderIdentity": "operator"}})
    with pytest.raises(Forbidden):
        transport.delete("held")


# --- least privilege: every granted verb is needed -----------------------------------------------


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

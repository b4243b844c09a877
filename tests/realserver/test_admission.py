"""The chart's ValidatingAdmissionPolicy on a real kube-apiserver (issue 27).

RBAC lets an app's ServiceAccount write every Lease of its namespace. Measured before the policy,
as ``billing-app`` with the chart's Role: another group's leader Lease rewritten with a
2,147,483,647 s duration, a Lease that is not k8slease's rewritten, a ``LeaderElected`` Event
forged as ``k8slease-operator``. With the chart's policy installed each is refused with a message
naming the rule, and what the library and the operator write is still allowed.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest

from charts import render_manifests as rm
from k8slease import Jobs, LeaderElector, Mode
from k8slease.names import CRD_GROUP, CRD_VERSION, LABEL_GROUP, LABEL_ROLE
from k8slease.testing.pytest_plugin import wait_established
from tests.realserver.accounts import Accounts, chart_rbac, create_all, request_token
from tests.realserver.operator_runs import operator_run
from tests.support.jobleases import lost_run_lease
from tests.support.pods import default_account, ended_pod
from tests.support.polling import poll
from tests.support.rest import Answer, Rest
from tests.support.timing import NEVER
from tests.support.timing import OPERATOR_FAST as FAST

TICK = datetime(2026, 1, 1, 2, 0, tzinfo=UTC)
BILLING, REPORTS, SJG_WRITER = "billing-app", "reports-app", "gitops"


@dataclass
class Guarded(Accounts):
    fullname: str
    tmp: Path

    def kubeconfig_as(self, account: str) -> Path:
        token = request_token(self.admin, self.namespace, account)
        target = self.tmp / f"{account}-{uuid.uuid4().hex[:6]}.kubeconfig"
        written: Path = self.server.kubeconfig_for_token(token, target)
        return written


def lease(namespace: str, name: str, group: str | None, **spec: Any) -> dict[str, Any]:
    labels = {LABEL_GROUP: group, LABEL_ROLE: "leader"} if group else {}
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"holderIdentity": "someone", "leaseDurationSeconds": 15, **spec},
    }


def put(rest: Rest, current: dict[str, Any], **spec: Any) -> Answer:
    """Update ``current`` (as read) with ``spec`` merged in, the way an elector writes."""
    body = {**current, "spec": {**current["spec"], **spec}}
    return rest.request("PUT", rest.path(body, name=True), body=body)


def refused(answer: Answer, rule: str) -> None:
    assert answer.status in (403, 422), (answer.status, answer.body)
    assert f"k8slease rule {rule}" in answer.body["message"], answer.body["message"]


@pytest.fixture(scope="module")
def guarded(k8s_real_apiserver: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Guarded]:
    admin = k8s_real_apiserver.api_client()
    rest = Rest(admin)
    token = uuid.uuid4().hex[:6]
    namespace, fullname = f"adm-{token}", f"adm-{token}"
    assert rest.create({"apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": namespace}}).status == 201  # fmt: skip
    (crd,) = rm.crd_objects()
    assert rest.create(crd).status in (201, 409)
    wait_established(admin, crd["metadata"]["name"])
    values = {
        "fullnameOverride": fullname,
        "elector": {"bindings": [{"serviceAccount": BILLING}, {"serviceAccount": REPORTS}]},
        "admissionPolicy": {
            "groups": [
                {"name": "billing", "serviceAccounts": [BILLING]},
                {"name": "reports", "serviceAccounts": [REPORTS]},
            ],
            "scheduledJobGroupWriters": {
                "users": [f"system:serviceaccount:{namespace}:{SJG_WRITER}"],
                "groups": [],
            },
        },
    }
    code = kubernetes.client.VersionApi(admin).get_code()
    version = f"{code.major}.{code.minor.rstrip('+')}"
    objects = rm.render_objects(values, namespace=namespace, kube_version=version)
    policies = [o for o in objects if o["apiVersion"].startswith("admissionregistration")]
    assert [o["kind"] for o in policies].count("ValidatingAdmissionPolicy") == 2
    accounts = [
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": name, "namespace": namespace}}
        for name in (BILLING, REPORTS, SJG_WRITER)
    ]  # fmt: skip
    # the gitops account may create ScheduledJobGroups by RBAC: only the policy can refuse it
    sjg_role = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "sjg-writer", "namespace": namespace},
        "rules": [{"apiGroups": [CRD_GROUP], "resources": ["scheduledjobgroups"],
                   "verbs": ["create", "update", "get"]}],
    }  # fmt: skip
    sjg_binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "sjg-writer", "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": "sjg-writer"},
        "subjects": [{"kind": "ServiceAccount", "name": REPORTS, "namespace": namespace},
                     {"kind": "ServiceAccount", "name": SJG_WRITER, "namespace": namespace}],
    }  # fmt: skip
    create_all(rest, [*accounts, *chart_rbac(namespace, values), sjg_role, sjg_binding])
    create_all(rest, policies)
    state = Guarded(
        k8s_real_apiserver, admin, rest, namespace, fullname, tmp_path_factory.mktemp("adm")
    )
    # the policy reaches the admission plugin through an informer: wait until it refuses
    assert rest.create(lease(namespace, "reports", "reports")).status == 201  # break-glass admin
    as_billing = state.rest_as(BILLING)
    poll(
        "refusal by the admission policy",
        lambda: (
            as_billing.create(lease(namespace, f"probe-{uuid.uuid4().hex[:4]}", "reports")).status
            != 201
        ),
        30,
        every=0.2,
    )
    yield state
    for obj in policies:
        rest.request("DELETE", rest.path(obj, name=True))
    for client in state.clients:
        client.close()
    admin.close()


def read(rest: Rest, namespace: str, name: str) -> dict[str, Any]:
    answer = rest.request(
        "GET", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
    )
    assert answer.status == 200, answer.body
    body: dict[str, Any] = answer.body
    return body


# --- the abuses of the issue are refused, each naming its rule -----------------------------------


def test_another_groups_leader_lease_cannot_be_rewritten(guarded: Guarded) -> None:
    app = guarded.rest_as(BILLING)
    current = read(app, guarded.namespace, "reports")  # reading stays allowed
    refused(put(app, current, leaseDurationSeconds=2_147_483_647, holderIdentity="billing"),
            "group-writers")  # fmt: skip
    relabelled = {
        **current,
        "metadata": {**current["metadata"], "labels": {LABEL_GROUP: "billing"}},
    }
    refused(app.request("PUT", app.path(relabelled, name=True), body=relabelled), "group-writers")


def test_a_lease_that_is_not_k8sleases_cannot_be_written(guarded: Guarded) -> None:
    ns = guarded.namespace
    assert guarded.rest.create(lease(ns, "kube-thing", None)).status == 201
    app = guarded.rest_as(BILLING)
    refused(put(app, read(app, ns, "kube-thing"), holderIdentity="billing"), "own-groups-only")
    refused(app.create(lease(ns, "unrelated", None)), "own-groups-only")


def test_leases_of_made_up_groups_cannot_be_created(guarded: Guarded) -> None:
    """30 labelled Leases made the operator create 30 ScheduledJobGroups: now the first one is
    refused at admission (and the operator would not create them unasked either)."""
    app = guarded.rest_as(BILLING)
    refused(app.create(lease(guarded.namespace, "spam-0", "spam-0")), "own-groups-only")


def test_own_lease_with_absurd_values_is_refused(guarded: Guarded) -> None:
    ns = guarded.namespace
    app = guarded.rest_as(BILLING)
    refused(app.create(lease(ns, "billing.absurd", "billing", leaseDurationSeconds=2_147_483_647)),
            "lease-bounds")  # fmt: skip
    refused(app.create(lease(ns, "billing.ansi", "billing", holderIdentity="a\x1b[2Jb")),
            "lease-bounds")  # fmt: skip
    hostile = lease(ns, "billing.tok", "billing")
    for key, value in (
        ("k8slease.io/fencing-token", "minus one"),
        ("k8slease.io/claimed-tick", "yesterday"),
        ("k8slease.io/run-counts", '{"succeeded": -1}'),
        ("k8slease.io/last-run", "not json"),
    ):
        hostile["metadata"]["annotations"] = {key: value}
        refused(app.create(hostile), "lease-bounds")


def test_events_in_the_operators_name_are_refused(guarded: Guarded) -> None:
    app = guarded.rest_as(BILLING)
    event = {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"forged.{uuid.uuid4().hex[:8]}", "namespace": guarded.namespace},
        "involvedObject": {"kind": "ScheduledJobGroup", "name": "billing",
                           "namespace": guarded.namespace},
        "reason": "LeaderElected", "message": "billing-app-evil became leader", "type": "Normal",
        "source": {"component": "k8slease-operator"},
    }  # fmt: skip
    refused(app.create(event), "operator-events")
    event["source"] = {"component": "billing"}
    event["metadata"]["name"] += "x"
    assert app.create(event).status == 201, "its own Events stay allowed"


def test_only_the_operator_and_declared_writers_write_scheduledjobgroups(guarded: Guarded) -> None:
    body = {
        "apiVersion": f"{CRD_GROUP}/{CRD_VERSION}", "kind": "ScheduledJobGroup",
        "metadata": {"name": "forged", "namespace": guarded.namespace}, "spec": {},
    }  # fmt: skip
    refused(guarded.rest_as(REPORTS).create(body), "operator-only")  # RBAC allows it
    assert guarded.rest_as(SJG_WRITER).create(body).status == 201, "a declared writer may"


# --- what the library and the operator write is still allowed ------------------------------------


def test_elections_locks_and_the_operator_work_under_the_policy(guarded: Guarded) -> None:
    ns = guarded.namespace
    body = {
        "apiVersion": f"{CRD_GROUP}/{CRD_VERSION}", "kind": "ScheduledJobGroup",
        "metadata": {"name": "billing", "namespace": ns}, "spec": {},
    }  # fmt: skip
    assert guarded.rest.create(body).status == 201  # Helm's install: the break-glass admin
    ran: list[datetime | None] = []
    with operator_run(
        guarded.kubeconfig_as(f"{guarded.fullname}-operator"), ns, guarded.tmp / "op.log"
    ) as run:
        a = LeaderElector("billing", namespace=ns, identity="billing-0",
                          api_client=guarded.client_as(BILLING), **FAST)  # fmt: skip
        b = LeaderElector("billing", namespace=ns, identity="billing-1",
                          api_client=guarded.client_as(BILLING), **FAST)  # fmt: skip
        jobs = Jobs("billing", namespace=ns, identity="billing-0",
                    api_client=guarded.client_as(BILLING))  # fmt: skip
        jobs.cron(NEVER, mode=Mode.ONCE_PER_TICK, name="invoices", lock_at_most_for=600)(
            lambda ctx: ran.append(ctx.tick)
        )
        try:
            a.start()
            assert a.wait_until_leading(10)
            b.start()
            a.stop(5)  # a graceful release, then b's takeover: every Lease write allowed
            assert b.wait_until_leading(10)
            jobs.start()
            assert jobs.fire("invoices", TICK) == "succeeded"
            assert ran == [TICK]
            status = run.wait_status(guarded.admin, "billing",
                                     lambda s: s.get("leader") == "billing-1")  # fmt: skip
            assert status["leader"] == "billing-1"
            assert run.wait_event(guarded.admin, "billing", "LeaderElected")
        finally:
            jobs.stop()
            a.stop(5)
            b.stop(5)
        run.assert_no_forbidden()


def test_the_operator_merges_a_dead_replicas_journal_under_the_policy(guarded: Guarded) -> None:
    """The group-writers rule lets the operator's account update a declared group's Lease: it
    merges a journal into it (creating one stays refused, by RBAC first)."""
    ns = guarded.namespace
    message = lost_run_lease(guarded.admin, ns, "billing", "billing-app-0")  # break-glass admin
    core = kubernetes.client.CoreV1Api(guarded.admin)
    default_account(core, ns)
    with operator_run(
        guarded.kubeconfig_as(f"{guarded.fullname}-operator"), ns, guarded.tmp / "journals.log"
    ) as run:
        ended_pod(
            core, ns, "billing-app-0", group="billing", message=message,
            container_id="containerd://billing-app-0",
        )  # fmt: skip
        run.wait_log(r"operator\.journal_merged")
        run.assert_no_forbidden()
    merged = read(guarded.rest, ns, "billing.run")
    assert "k8slease.io/journals-merged" in merged["metadata"]["annotations"]


def test_the_operators_lease_updates_are_bounded_to_merging_journals(guarded: Guarded) -> None:
    """Its Role may update any Lease of the namespace (RBAC cannot narrow it); the policy lets
    it release a job lock and write the job annotations, never grant a Lease or touch another's
    (rule operator-journals), for declared groups and others alike."""
    ns = guarded.namespace
    as_operator = guarded.rest_as(f"{guarded.fullname}-operator")
    lost_run_lease(guarded.admin, ns, "undeclared", "undeclared-app-0")
    job = read(guarded.rest, ns, "undeclared.run")
    refused(put(as_operator, job, holderIdentity="intruder"), "operator-journals")
    assert guarded.rest.create(lease(ns, "undeclared", "undeclared")).status == 201
    leader = read(guarded.rest, ns, "undeclared")
    refused(put(as_operator, leader, holderIdentity=""), "operator-journals")
    allowed = put(as_operator, job, leaseDurationSeconds=1)  # holder and token as they were
    assert allowed.status == 200, allowed.body

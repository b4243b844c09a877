"""The elector Role narrowed to one group's Leases, on a real kube-apiserver (issue 27).

A binding that names its group (``elector.bindings[].group`` and ``jobs``) gets a Role whose get
and update carry ``resourceNames``: the leader Lease and one lock per declared job. Here, as that
ServiceAccount (a TokenRequest token): elections, a graceful handover, a takeover after expiry
and job locks all work; another group's Lease is refused with 403 on get and update. And what
Kubernetes' RBAC can and cannot name, asked of the real server: a create is never matched by
name, a list or watch only when it selects one name with ``metadata.name`` (Jobs' informer
selects by label), so create, list and watch stay unnamed in the chart.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from k8slease import Jobs, LeaderElector, Mode
from k8slease.names import LABEL_GROUP, LABEL_ROLE
from tests.realserver.accounts import (
    Access,
    Accounts,
    chart_rbac,
    create_all,
    service_account_user,
    wait_for_access,
)
from tests.realserver.forbidden import record_forbidden
from tests.support.rest import Answer, Rest
from tests.support.timing import NEVER
from tests.support.timing import OPERATOR_FAST as FAST

TICK = datetime(2026, 1, 1, 2, 0, tzinfo=UTC)
BILLING, REPORTS = "billing-app", "reports-app"
VALUES = {
    "elector": {
        "bindings": [
            {"serviceAccount": BILLING, "group": "billing", "jobs": ["invoices"]},
            {"serviceAccount": REPORTS, "group": "reports"},
        ]
    }
}


@dataclass
class Narrowed(Accounts):
    def lease_path(self, name: str = "") -> str:
        base = f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases"
        return f"{base}/{name}" if name else base


@pytest.fixture(scope="module")
def narrowed(k8s_real_apiserver: Any) -> Iterator[Narrowed]:
    admin = k8s_real_apiserver.api_client()
    rest = Rest(admin)
    namespace = f"narrow-{uuid.uuid4().hex[:6]}"
    assert rest.create({"apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": namespace}}).status == 201  # fmt: skip
    accounts = [
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": name, "namespace": namespace}}
        for name in (BILLING, REPORTS)
    ]  # fmt: skip
    values = {"fullnameOverride": "nr", "operator": {"enabled": False}, **VALUES}
    rbac = chart_rbac(namespace, values)
    roles = {o["metadata"]["name"] for o in rbac if o["kind"] == "Role"}
    assert roles == {"nr-elector", "nr-elector-billing", "nr-elector-reports"}
    create_all(rest, [*accounts, *rbac])
    for account, lease in ((BILLING, "billing.invoices"), (REPORTS, "reports")):
        user = service_account_user(namespace, account)
        wait_for_access(admin, user, Access("update", "leases", "coordination.k8s.io",
                                            namespace, name=lease), True)  # fmt: skip
    state = Narrowed(k8s_real_apiserver, admin, rest, namespace)
    yield state
    for client in state.clients:
        client.close()
    admin.close()


def elector(api: Any, namespace: str, name: str, identity: str, **options: Any) -> LeaderElector:
    return LeaderElector(
        name, namespace=namespace, identity=identity, api_client=api, **{**FAST, **options}
    )


def lease_body(name: str, group: str) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name, "labels": {LABEL_GROUP: group, LABEL_ROLE: "leader"}},
        "spec": {"holderIdentity": f"{group}-0", "leaseDurationSeconds": 15},
    }  # fmt: skip


# --- the narrowed Role is enough ------------------------------------------------------------------


def test_elections_handover_and_takeover_after_expiry_work(narrowed: Narrowed) -> None:
    ns = narrowed.namespace
    a = elector(narrowed.client_as(BILLING), ns, "billing", "billing-0", release_on_stop=False)
    b = elector(narrowed.client_as(BILLING), ns, "billing", "billing-1")
    c = elector(narrowed.client_as(BILLING), ns, "billing", "billing-2")
    try:
        a.start()  # creates the Lease (create is unnamed), then renews it (update, named)
        assert a.wait_until_leading(10)
        b.start()
        a.stop(5)  # no release: b takes over once the Lease expired (get, watch, update)
        assert b.wait_until_leading(10)
        c.start()
        b.stop(5)  # a graceful release (update), and c takes over at once
        assert c.wait_until_leading(10)
    finally:
        for one in (a, b, c):
            one.stop(5)


def test_job_locks_claim_a_tick_once_and_settle(narrowed: Narrowed) -> None:
    ran: list[str] = []

    def replica(identity: str) -> Jobs:
        jobs = Jobs("billing", namespace=narrowed.namespace, identity=identity,
                    api_client=narrowed.client_as(BILLING))  # fmt: skip
        jobs.cron(NEVER, mode=Mode.ONCE_PER_TICK, name="invoices", lock_at_most_for=60)(
            lambda ctx: ran.append(ctx.identity)
        )
        jobs.start()
        return jobs

    one, two = replica("billing-0"), replica("billing-1")
    try:
        assert one.fire("invoices", TICK) == "succeeded"
        assert two.fire("invoices", TICK) is None, "the tick was claimed once"
        assert one.fire("invoices", TICK + timedelta(days=1)) == "succeeded", "the next one"
        assert ran == ["billing-0", "billing-0"]
    finally:
        one.stop()
        two.stop()
    lease = narrowed.rest.request("GET", narrowed.lease_path("billing.invoices")).body
    annotations = lease["metadata"]["annotations"]
    assert annotations["k8slease.io/completed-tick"].startswith("2026-01-02"), "settled (update)"


# --- and it refuses another group's Leases --------------------------------------------------------


def test_another_groups_lease_is_refused_on_get_and_update(narrowed: Narrowed) -> None:
    created = narrowed.rest.create({**lease_body("reports", "reports"),
                                    "metadata": {**lease_body("reports", "reports")["metadata"],
                                                 "namespace": narrowed.namespace}})  # fmt: skip
    assert created.status in (201, 409), created.body
    current = narrowed.rest.request("GET", narrowed.lease_path("reports")).body
    billing = narrowed.rest_as(BILLING)
    assert billing.request("GET", narrowed.lease_path("reports")).status == 403
    hijack = {**current, "spec": {**current["spec"], "leaseDurationSeconds": 2_147_483_647,
                                  "holderIdentity": "billing-evil"}}  # fmt: skip
    answer: Answer = billing.request("PUT", narrowed.lease_path("reports"), body=hijack)
    assert answer.status == 403, answer.body
    assert 'cannot update resource "leases"' in answer.body["message"]
    after = narrowed.rest.request("GET", narrowed.lease_path("reports")).body
    assert after["spec"] == current["spec"], "the other group's Lease is untouched"
    # its own group's Leases stay readable and writable (the admin wrote none of them)
    assert billing.request("GET", narrowed.lease_path("billing.invoices")).status in (200, 404)


def test_an_elector_for_another_group_never_leads(
    narrowed: Narrowed, monkeypatch: pytest.MonkeyPatch
) -> None:
    """billing-app's elector for a group not its own: its first read is refused, so it neither
    creates the Lease nor leads (create alone would be allowed, and the policy's own-groups-only
    refuses that)."""
    calls = record_forbidden(monkeypatch)
    name = f"other-{uuid.uuid4().hex[:4]}"
    stray = elector(narrowed.client_as(BILLING), narrowed.namespace, name, "billing-0")
    try:
        stray.start()
        calls.wait("get", f"/leases/{name}")
        assert not stray.wait_until_leading(FAST["lease_duration"])
    finally:
        stray.stop(5)
    assert narrowed.rest.request("GET", narrowed.lease_path(name)).status == 404


def test_an_undeclared_job_runs_at_most_once_then_is_refused(
    narrowed: Narrowed, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The price of naming: a job not listed under ``jobs`` may create its Lease (create is
    unnamed) and run that tick, but can neither settle it nor claim another (get and update of
    ``billing.<job>`` are refused): one run, then every tick lost, loudly. Never a run
    without a claim written first."""
    calls = record_forbidden(monkeypatch)
    ran: list[datetime | None] = []
    jobs = Jobs("billing", namespace=narrowed.namespace, identity="billing-0",
                api_client=narrowed.client_as(BILLING))  # fmt: skip
    jobs.cron(NEVER, mode=Mode.ONCE_PER_TICK, name="undeclared", lock_at_most_for=60)(
        lambda ctx: ran.append(ctx.tick)
    )
    jobs.start()
    try:
        # the informer lists by label (allowed): once synced, it knows the Lease is absent and
        # the first tick is claimed by a create, with no get
        assert jobs._informer is not None and jobs._informer.synced.wait(10)
        first, second, third = (TICK + timedelta(days=d) for d in range(3))
        assert jobs.fire("undeclared", first) == "succeeded"
        calls.wait("update", "/leases/billing.undeclared")  # the settling write
        assert jobs.fire("undeclared", second) != "succeeded"
        assert jobs.fire("undeclared", third) != "succeeded"
        assert ran == [first]
    finally:
        jobs.stop()


# --- what RBAC can name, asked of the real server -------------------------------------------------


def _probe_role(narrowed: Narrowed, verbs: list[str], names: list[str]) -> Rest:
    """A fresh account bound to a Role granting only ``verbs`` on the Leases ``names``."""
    account = f"probe-{uuid.uuid4().hex[:5]}"
    meta = {"name": account, "namespace": narrowed.namespace}
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta,
        "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                   "verbs": verbs, "resourceNames": names}],
    }  # fmt: skip
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account},
        "subjects": [{"kind": "ServiceAccount", **meta}],
    }  # fmt: skip
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta}
    create_all(narrowed.rest, [sa, role, binding])
    user = service_account_user(narrowed.namespace, account)
    access = Access(verbs[0], "leases", "coordination.k8s.io", narrowed.namespace, name=names[0])
    wait_for_access(narrowed.admin, user, access, True)
    return narrowed.rest_as(account)


def test_rbac_never_matches_a_create_by_name(narrowed: Narrowed) -> None:
    name = f"named-{uuid.uuid4().hex[:4]}"
    probe = _probe_role(narrowed, ["create"], [name])
    body = {**lease_body(name, "billing")}
    body["metadata"] = {**body["metadata"], "namespace": narrowed.namespace}
    answer = probe.create(body)
    assert answer.status == 403, "create with resourceNames grants nothing"
    assert 'cannot create resource "leases"' in answer.body["message"]


def test_rbac_matches_a_list_or_watch_by_name_only_for_a_metadata_name_selector(
    narrowed: Narrowed,
) -> None:
    probe = _probe_role(narrowed, ["list", "watch"], ["billing"])
    path = narrowed.lease_path()
    by_name = {"fieldSelector": "metadata.name=billing"}  # what the elector watches
    by_label = {"labelSelector": f"{LABEL_GROUP}=billing,{LABEL_ROLE}=job"}  # Jobs' informer
    watch = {"watch": "true", "timeoutSeconds": "1"}
    assert probe.request("GET", path, query=by_name).status == 200
    assert probe.request("GET", path).status == 403, "a plain list is of the type, not a name"
    assert probe.request("GET", path, query=by_label).status == 403
    assert probe.request("GET", path, query={**watch, **by_name}).status == 200
    assert probe.request("GET", path, query={**watch, **by_label}).status == 403

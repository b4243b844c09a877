"""The chart's RBAC applied in a fresh namespace of the real kube-apiserver, as the RBAC tests
(test_rbac_accounts.py, test_rbac_least_privilege.py) use it: :class:`Cluster` (its accounts'
clients and kubeconfigs from TokenRequest tokens, and an account bound to a Role minus one verb)
and what those tests run as an account: an elector, a ``Jobs`` group with one job, and the
Events posted about a name. The module-scoped ``cluster`` fixture that builds it is in
tests/realserver/conftest.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import kubernetes.client

from k8slease import Jobs, LeaderElector, Mode
from tests.realserver.accounts import (
    Access,
    create_all,
    grants,
    request_token,
    service_account_user,
    wait_for_access,
    without,
)
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

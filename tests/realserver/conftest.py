"""Tests that only a real kube-apiserver can answer: RBAC, the chart's install, differential
fidelity. They take ``k8s_real_apiserver`` (the plugin skips or fails them when the real
control plane is unavailable, by its own policy).

``cluster``, the chart's RBAC applied in a fresh namespace, is shared by the two RBAC modules
(test_rbac_accounts.py, test_rbac_least_privilege.py): module-scoped, so each of them applies
it once, in namespaces of its own."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from charts import render_manifests as rm
from k8slease.testing.pytest_plugin import wait_established
from tests.realserver.accounts import (
    Access,
    chart_rbac,
    create_all,
    grants,
    service_account_user,
    wait_for_access,
)
from tests.realserver.rbac_cluster import APP, Cluster
from tests.support.rest import Rest

TALLY = pytest.StashKey[Counter[str]]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[TALLY] = Counter()


@pytest.fixture
def fidelity_tally(request: pytest.FixtureRequest) -> Counter[str]:
    """Counters the differential test adds to; shown at the end of the run."""
    return request.config.stash[TALLY]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    tally = terminalreporter.config.stash.get(TALLY, Counter())
    if tally["sequences"]:
        terminalreporter.write_line(
            f"differential fidelity: {tally['sequences']} sequences, {tally['pairs']} response "
            f"pairs compared, {tally['differences']} differences "
            f"({tally['known']} known and documented in docs/fidelity.md)"
        )


@pytest.fixture(scope="module")
def cluster(k8s_real_apiserver: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The chart's RBAC (the app's and the operator's accounts, Roles and bindings, and the
    cluster-wide operator's) in a fresh release namespace, with another namespace beside it;
    once each of them is seen by the authorizer."""
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

"""RBAC with the pods' own projected ServiceAccount tokens: each pod's token (read from the
pod, where the kubelet projected it) can do what the pod needs and gets 403 for what it must
not do: the app's for another group's Leases (its narrowed Role names its own group's Leases
for get and update; a create, which RBAC cannot name, is refused by the chart's admission policy,
rule own-groups-only) and for anything outside its Role; the operator's for any Lease write but
the merge of a dead replica's journal into a job Lease (its Role may update Leases; the admission
policy's rule operator-journals refuses the rest) and for Secrets.

The requests are made from the test with each token (a Python client inside the pods would
cost them memory they do not have: the operator's container is limited to 256 MiB).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client, config

pytestmark = pytest.mark.kind

NAMESPACE = "k8slease-e2e"
OTHER_GROUP = "reports"
TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"


def running_pod(cluster: Any, name: str) -> str:
    pods = json.loads(
        cluster.kubectl(
            "get", "pods", "-n", NAMESPACE, "-l", f"app.kubernetes.io/name={name}", "-o", "json"
        )
    )["items"]
    running = [
        p["metadata"]["name"]
        for p in pods
        if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    ]
    assert running, f"no running pod of {name}"
    return str(running[0])


def as_pod(cluster: Any, pod: str) -> client.ApiClient:
    """An API client that authenticates with ``pod``'s own projected token, and nothing else."""
    token = cluster.kubectl("exec", "-n", NAMESPACE, pod, "--", "cat", TOKEN).strip()
    assert token.count(".") == 2, "not a JWT"
    admin = client.Configuration()
    config.load_kube_config(config_file=str(cluster.kubeconfig_path), client_configuration=admin)
    own = client.Configuration()
    own.host, own.ssl_ca_cert = admin.host, admin.ssl_ca_cert
    own.api_key = {"authorization": f"Bearer {token}"}
    return client.ApiClient(own)


def statuses(api: client.ApiClient, why: dict[str, str] | None = None) -> dict[str, int]:
    """Each call, made with ``api``'s token, and the HTTP status it got (``why``: the body of
    each refusal)."""
    leases, core = client.CoordinationV1Api(api), client.CoreV1Api(api)
    groups = client.CustomObjectsApi(api)

    def status(call: Callable[[], object], name: str = "") -> int:
        try:
            call()
        except client.ApiException as error:
            if why is not None:
                why[name] = str(error.body)
            return int(error.status)
        return 200

    def update_other() -> None:
        # read by a list (the operator may list Leases but not get one), then write it back
        listed = leases.list_namespaced_lease(
            NAMESPACE, field_selector=f"metadata.name={OTHER_GROUP}"
        )
        (lease,) = listed.items
        lease.spec.holder_identity = "intruder"
        leases.replace_namespaced_lease(OTHER_GROUP, NAMESPACE, lease)

    new = {
        "metadata": {"name": f"{OTHER_GROUP}.job", "labels": {"k8slease.io/group": OTHER_GROUP}},
        "spec": {"holderIdentity": "intruder", "leaseDurationSeconds": 10},
    }
    return {
        "get own group": status(lambda: leases.read_namespaced_lease("billing", NAMESPACE)),
        "list leases": status(lambda: leases.list_namespaced_lease(NAMESPACE)),
        "get other group": status(lambda: leases.read_namespaced_lease(OTHER_GROUP, NAMESPACE)),
        "update other group": status(update_other, "update other group"),
        "create in other group": status(
            lambda: leases.create_namespaced_lease(NAMESPACE, new), "create in other group"
        ),
        "leases in kube-system": status(lambda: leases.list_namespaced_lease("kube-system")),
        "secrets": status(lambda: core.list_namespaced_secret(NAMESPACE)),
        "pods": status(lambda: core.list_namespaced_pod(NAMESPACE)),
        "scheduledjobgroups": status(
            lambda: groups.list_namespaced_custom_object(
                "k8slease.io", "v1alpha1", NAMESPACE, "scheduledjobgroups"
            )
        ),
    }


@pytest.fixture
def other_group(e2e_cluster: Any, helm_release: Any) -> Iterator[None]:
    """A Lease of another group, written by the admin (break-glass: system:masters)."""
    e2e_cluster.kubectl(
        "apply",
        "-n",
        NAMESPACE,
        "-f",
        "-",
        input=json.dumps(
            {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": OTHER_GROUP, "labels": {"k8slease.io/group": OTHER_GROUP}},
                "spec": {"holderIdentity": "reports-0", "leaseDurationSeconds": 15},
            }
        ),
    )
    yield
    e2e_cluster.kubectl("delete", "lease", OTHER_GROUP, "-n", NAMESPACE, "--ignore-not-found")


def holder_of_other_group(cluster: Any) -> str:
    lease = json.loads(cluster.kubectl("get", "lease", OTHER_GROUP, "-n", NAMESPACE, "-o", "json"))
    return str(lease["spec"]["holderIdentity"])


def test_the_app_pods_token_reaches_its_group_and_nothing_else(
    e2e_cluster: Any, other_group: None
) -> None:
    why: dict[str, str] = {}
    with as_pod(e2e_cluster, running_pod(e2e_cluster, "billing-app")) as api:
        seen = statuses(api, why)
    assert seen == {
        "get own group": 200,
        "list leases": 200,  # a list cannot be narrowed by name (Jobs' informer lists by label)
        "get other group": 403,  # the Role names billing's own Leases (exampleApp.jobs)
        "update other group": 403,  # likewise: RBAC, before admission
        "create in other group": 403,  # RBAC cannot name a create: the admission policy refuses
        "leases in kube-system": 403,  # the Role is namespaced
        "secrets": 403,
        "pods": 403,
        "scheduledjobgroups": 403,  # the operator's business
    }, seen
    assert "cannot update resource" in why["update other group"], why
    # the Role may create any Lease: the refusal is the admission policy's, naming its rule
    assert "k8slease rule own-groups-only" in why["create in other group"], why
    assert holder_of_other_group(e2e_cluster) == "reports-0"


def test_the_operator_pods_token_reads_leases_and_writes_none_but_journals(
    e2e_cluster: Any, other_group: None
) -> None:
    why: dict[str, str] = {}
    with as_pod(e2e_cluster, running_pod(e2e_cluster, "k8slease")) as api:
        seen = statuses(api, why)
    assert seen == {
        "get own group": 200,  # a journal's merge reads the job Lease first
        "list leases": 200,
        "get other group": 200,
        "update other group": 403,  # granting a Lease: refused by the admission policy
        "create in other group": 403,
        "leases in kube-system": 403,  # its Role is namespaced (clusterWide is off)
        "secrets": 403,
        "pods": 200,  # it watches the groups' Pods for journals
        "scheduledjobgroups": 200,
    }, seen
    assert "k8slease rule operator-journals" in why["update other group"]
    assert holder_of_other_group(e2e_cluster) == "reports-0"

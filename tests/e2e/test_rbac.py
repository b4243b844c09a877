"""RBAC with the pods' own projected ServiceAccount tokens: each pod, asking the API server
as itself (in-cluster configuration, from inside the pod), can do what it needs and gets 403
for what it must not do: the app for another group's Leases (the chart's admission policy,
rule own-groups-only) and for anything outside its Role; the operator for any Lease write (it
only reads Leases) and for Secrets."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytestmark = pytest.mark.kind

NAMESPACE = "k8slease-e2e"
OTHER_GROUP = "reports"

#: Run inside a pod: each call, made with the pod's own token, and the HTTP status it got.
PROBE = """
import json, sys
from kubernetes import client, config
config.load_incluster_config()
ns = open("/var/run/secrets/kubernetes.io/serviceaccount/namespace").read()
leases, core = client.CoordinationV1Api(), client.CoreV1Api()

def status(call):
    try:
        call()
    except client.ApiException as error:
        return error.status
    return 200

def update_other():
    lease = leases.read_namespaced_lease(sys.argv[1], ns)
    lease.spec.holder_identity = "intruder"
    leases.replace_namespaced_lease(sys.argv[1], ns, lease)

new = {"metadata": {"name": sys.argv[1] + ".job", "labels": {"k8slease.io/group": sys.argv[1]}},
       "spec": {"holderIdentity": "intruder", "leaseDurationSeconds": 10}}
print(json.dumps({
    "read own group": status(lambda: leases.read_namespaced_lease("billing", ns)),
    "list leases": status(lambda: leases.list_namespaced_lease(ns)),
    "read other group": status(lambda: leases.read_namespaced_lease(sys.argv[1], ns)),
    "update other group": status(update_other),
    "create in other group": status(lambda: leases.create_namespaced_lease(ns, new)),
    "lease in kube-system": status(lambda: leases.list_namespaced_lease("kube-system")),
    "secrets": status(lambda: core.list_namespaced_secret(ns)),
    "pods": status(lambda: core.list_namespaced_pod(ns)),
}))
"""


def probe(cluster: Any, pod: str) -> dict[str, int]:
    out = cluster.kubectl("exec", "-n", NAMESPACE, pod, "--", "python", "-c", PROBE, OTHER_GROUP)
    result: dict[str, int] = json.loads(out.strip().splitlines()[-1])
    return result


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


@pytest.fixture
def other_group(e2e_cluster: Any, helm_release: Any) -> Any:
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


def test_the_app_pods_token_reaches_its_group_and_nothing_else(
    e2e_cluster: Any, other_group: Any
) -> None:
    seen = probe(e2e_cluster, running_pod(e2e_cluster, "billing-app"))
    assert seen == {
        "read own group": 200,
        "list leases": 200,
        "read other group": 200,  # the Role reads every Lease of the namespace
        "update other group": 403,  # the admission policy: own-groups-only
        "create in other group": 403,
        "lease in kube-system": 403,  # the Role is namespaced
        "secrets": 403,
        "pods": 403,
    }, seen
    holder = json.loads(
        e2e_cluster.kubectl("get", "lease", OTHER_GROUP, "-n", NAMESPACE, "-o", "json")
    )["spec"]["holderIdentity"]
    assert holder == "reports-0"


def test_the_operator_pods_token_reads_leases_and_writes_none(
    e2e_cluster: Any, other_group: Any
) -> None:
    seen = probe(e2e_cluster, running_pod(e2e_cluster, "k8slease"))
    assert seen == {
        "read own group": 200,
        "list leases": 200,
        "read other group": 200,
        "update other group": 403,  # the operator never writes a Lease
        "create in other group": 403,
        "lease in kube-system": 403,
        "secrets": 403,
        "pods": 403,
    }, seen

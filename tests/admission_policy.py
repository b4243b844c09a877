"""``--admission-policy``: run the real-server tests with the chart's ValidatingAdmissionPolicy on.

The chart's policies and bindings (``charts/k8slease/templates/admission-policy.yaml``) are
rendered for the real control plane's version and installed once per session, so every Lease,
ScheduledJobGroup and Event write the library, the operator and the tests make goes through
them. What the suite exercises, and what it cannot:

* ``lease-bounds`` applies to everyone, so every Lease write of the suite is checked against it:
  a library write it refuses is a policy bug.
* A CEL expression that fails at run time (a field missing on some object) refuses the write
  (``failurePolicy: Fail``): any such bug shows as a refused write too.
* The tests act as the control plane's admin (``k8slease-admin``, group ``system:masters``). Break
  glass is emptied so the admin is held to every rule; it is declared the ScheduledJobGroup
  writer (the in-process operator of the integration tests runs as it). The tests' groups have
  random names, so no group is declared: ``group-writers`` and ``own-groups-only`` are not
  exercised here, tests/realserver/test_admission.py covers them with ServiceAccount tokens.
* The bindings match every namespace but the system ones (the tests make a namespace each);
  a test that starts its own control plane (``k8s_fresh_apiserver``) has no policy.
"""

from __future__ import annotations

import uuid
from typing import Any

import kubernetes.client

from charts import render_manifests as rm
from k8slease.testing.controlplane.certs import ADMIN_USER
from tests.support.polling import poll

OPTION = "--admission-policy"
RELEASE_NAMESPACE = "k8slease-policy"
SYSTEM_NAMESPACES = ["kube-system", "kube-public", "kube-node-lease"]
LABEL_GROUP = "k8slease.io/group"


def policy_values() -> dict[str, Any]:
    """The chart values the suite installs the policy with (see the module docstring)."""
    return {
        "fullnameOverride": "suite",
        "admissionPolicy": {
            "enabled": True,
            "breakGlass": {"users": [], "groups": []},
            "scheduledJobGroupWriters": {"users": [ADMIN_USER], "groups": []},
        },
    }


def policy_objects(kube_version: str) -> list[dict[str, Any]]:
    """The chart's policies and bindings, the bindings widened to every non-system namespace."""
    objects = rm.render_objects(
        policy_values(), namespace=RELEASE_NAMESPACE, kube_version=kube_version
    )
    chosen = [o for o in objects if o["apiVersion"].startswith("admissionregistration.k8s.io/")]
    kinds = sorted(o["kind"] for o in chosen)
    if kinds != ["ValidatingAdmissionPolicy"] * 2 + ["ValidatingAdmissionPolicyBinding"] * 2:
        raise AssertionError(f"the chart rendered {kinds} for Kubernetes {kube_version}")
    selector = {
        "namespaceSelector": {
            "matchExpressions": [
                {
                    "key": "kubernetes.io/metadata.name",
                    "operator": "NotIn",
                    "values": SYSTEM_NAMESPACES,
                }
            ]
        }
    }
    for obj in chosen:
        if obj["kind"] == "ValidatingAdmissionPolicyBinding":
            obj["spec"]["matchResources"] = selector
    return chosen


def _absurd_lease(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": f"policy-probe-{uuid.uuid4().hex[:6]}",
            "labels": {LABEL_GROUP: "policy-probe"},
        },
        "spec": {"holderIdentity": "probe", "leaseDurationSeconds": 2_147_483_647},
    }


def install(admin: Any, *, timeout: float = 30.0) -> list[dict[str, Any]]:
    """Install the chart's policy on the server ``admin`` (an ApiClient) talks to; returns the
    objects installed once the policy refuses a probe (it reaches the admission plugin through
    an informer, a moment after it is written)."""
    code = kubernetes.client.VersionApi(admin).get_code()
    version = f"{code.major}.{code.minor.rstrip('+')}"
    objects = policy_objects(version)
    api = kubernetes.client.AdmissionregistrationV1Api(admin)
    for obj in objects:
        if obj["kind"] == "ValidatingAdmissionPolicy":
            api.create_validating_admission_policy(obj)
        else:
            api.create_validating_admission_policy_binding(obj)
    core = kubernetes.client.CoreV1Api(admin)
    probe_ns = f"policy-probe-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": probe_ns}})
    leases = kubernetes.client.CoordinationV1Api(admin)

    def refused() -> bool:
        try:
            leases.create_namespaced_lease(probe_ns, _absurd_lease(probe_ns))
        except kubernetes.client.ApiException as exc:
            if "k8slease rule lease-bounds" in str(exc.body):
                return True
            raise
        return False

    poll("the admission policy taking effect", refused, timeout, every=0.2)
    return objects


def uninstall(admin: Any, objects: list[dict[str, Any]]) -> None:
    api = kubernetes.client.AdmissionregistrationV1Api(admin)
    for obj in objects:
        name = obj["metadata"]["name"]
        if obj["kind"] == "ValidatingAdmissionPolicy":
            api.delete_validating_admission_policy(name)
        else:
            api.delete_validating_admission_policy_binding(name)

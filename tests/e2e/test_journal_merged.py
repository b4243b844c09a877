"""A replica that dies holding a run record it could not write: the kubelet carries its journal
to the operator, which writes the record (issue 26).

A pod of the chart's app (its ServiceAccount, the group's label, the restricted Pod Security
Standard) runs a job lock: it claims a tick, runs it, and its release cannot be written (its
transport cut off from the API server, in the process: the one simulated part). The record is
kept, written through to ``/dev/termination-log``, and the process ends. The real kubelet copies
the file into the Pod's status, the chart's operator (its RBAC and admission policy) reads it,
releases the lock the dead replica's grant still held, and records the run ``succeeded``.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from tests.e2e.app_pods import APP, NAMESPACE, wait_until
from tests.e2e.ticks import GROUP

pytestmark = pytest.mark.kind

#: The replica: one claim, one run, a release that gets no answer, then the process ends.
REPLICA = """
import os
from datetime import UTC, datetime
from k8slease.errors import Unavailable
from k8slease.jobs.journal import RunJournal, journal_path
from k8slease.jobs.jobwiring import JobWiring
from k8slease.jobs.lock import Grant, JobLock
from k8slease.kube.apiclient import default_api_client
from k8slease.lease.transport import LeaseTransport

path = journal_path("auto")
assert path == "/dev/termination-log", path
transport = LeaseTransport(default_api_client(), os.environ["POD_NAMESPACE"])
wiring = JobWiring(
    transport=transport, group=os.environ["GROUP"], identity=os.environ["POD_NAME"],
    journal=RunJournal.at(path),
)
lock = JobLock(wiring, job="journaled", lock_at_most_for=600, ordered=False)
grant = lock.try_acquire(datetime.now(UTC).replace(microsecond=0))
assert isinstance(grant, Grant), grant

def cut_off(*args, **kwargs):
    raise Unavailable("cut off from the API server", status=None)

transport.replace = cut_off
lock.finish(grant, "succeeded")
print("kept:", open(path).read())
"""


def _pod(name: str, image: str) -> dict[str, Any]:
    restricted = {
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    field = {"valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    namespace = {"valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"k8slease.io/group": GROUP}},
        "spec": {
            "serviceAccountName": APP,
            "restartPolicy": "Never",
            "securityContext": {"runAsUser": 10001, "runAsGroup": 10001},
            "containers": [
                {
                    "name": "replica",
                    "image": image,
                    "imagePullPolicy": "Never",
                    "command": ["python", "-c", REPLICA],
                    "env": [
                        {"name": "POD_NAME", **field},
                        {"name": "POD_NAMESPACE", **namespace},
                        {"name": "GROUP", "value": GROUP},
                    ],
                    "securityContext": restricted,
                }
            ],
        },
    }


def _lease(cluster: Any) -> dict[str, Any]:
    lease: dict[str, Any] = json.loads(
        cluster.kubectl("get", "lease", f"{GROUP}.journaled", "-n", NAMESPACE, "-o", "json")
    )
    return lease


def test_a_dead_replicas_journal_reaches_the_job_lease_through_the_kubelet(
    e2e_cluster: Any, helm_release: Any, k8slease_image: str
) -> None:
    name = f"journaled-{uuid.uuid4().hex[:6]}"
    e2e_cluster.kubectl("apply", "-f", "-", input=json.dumps(_pod(name, k8slease_image)))
    try:

        def ended() -> dict[str, Any] | None:
            pod = json.loads(e2e_cluster.kubectl("get", "pod", name, "-n", NAMESPACE, "-o", "json"))
            for status in pod.get("status", {}).get("containerStatuses") or []:
                terminated = (status.get("state") or {}).get("terminated")
                if terminated:
                    return dict(terminated)
            return None

        terminated = wait_until(ended, 120, "the replica's container to end")
        logs = e2e_cluster.kubectl("logs", name, "-n", NAMESPACE)
        assert terminated["exitCode"] == 0, logs
        assert "k8slease.io/kept-runs" in terminated.get("message", ""), (terminated, logs)

        def merged() -> dict[str, Any] | None:
            lease = _lease(e2e_cluster)
            annotations = lease["metadata"].get("annotations") or {}
            return lease if "k8slease.io/journals-merged" in annotations else None

        lease = wait_until(merged, 60, "the operator to merge the journal")
        annotations = lease["metadata"]["annotations"]
        assert json.loads(annotations["k8slease.io/journals-merged"]) == [terminated["containerID"]]
        last_run = json.loads(annotations["k8slease.io/last-run"])
        assert (last_run["holder"], last_run["outcome"]) == (name, "succeeded")
        assert json.loads(annotations["k8slease.io/run-counts"]) == {"succeeded": 1}
        assert not lease["spec"].get("holderIdentity"), "the dead replica's lock released"
    finally:
        e2e_cluster.kubectl("delete", "pod", name, "-n", NAMESPACE, "--wait=false")
        e2e_cluster.kubectl(
            "delete", "lease", f"{GROUP}.journaled", "-n", NAMESPACE, "--ignore-not-found"
        )

"""A replica's Pod whose container has ended, as the kubelet leaves it: its termination message
in ``status.containerStatuses[].state.terminated`` (the operator reads journals from there)."""

from __future__ import annotations

from datetime import UTC, datetime

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from k8slease.names import LABEL_GROUP


def default_account(core: client.CoreV1Api, namespace: str) -> None:
    """Create ``namespace``'s ``default`` ServiceAccount unless it exists: a Pod needs it, and a
    control plane without a controller manager makes none."""
    try:
        core.create_namespaced_service_account(namespace, {"metadata": {"name": "default"}})
    except ApiException as exc:
        if exc.status != 409:
            raise


def ended_pod(
    core: client.CoreV1Api,
    namespace: str,
    name: str,
    *,
    group: str,
    message: str,
    container_id: str,
) -> None:
    """Create Pod ``name`` of ``group`` and write its status as a kubelet would once its one
    container ended (killed, exit 137) with ``message`` as its termination message."""
    core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": name, "labels": {LABEL_GROUP: group}},
            "spec": {
                "containers": [{"name": "app", "image": "k8slease:test"}],
                "automountServiceAccountToken": False,
            },
        },
    )
    pod = core.read_namespaced_pod(name, namespace)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    terminated = {
        "exitCode": 137,
        "reason": "Error",
        "message": message,
        "startedAt": now,
        "finishedAt": now,
        "containerID": container_id,
    }
    status = {
        "phase": "Failed",
        "containerStatuses": [
            {
                "name": "app",
                "image": "k8slease:test",
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "state": {"terminated": terminated},
            }
        ],
    }
    body = {"metadata": {"resourceVersion": pod.metadata.resource_version}, "status": status}
    core.patch_namespaced_pod_status(name, namespace, body)

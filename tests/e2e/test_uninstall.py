"""`helm uninstall` removes every object the release installed and leaves what docs/install.md
says it leaves: the ScheduledJobGroup CRD (Helm never deletes a chart's CRDs) and the Leases
the app's replicas wrote (not the chart's objects), all found by the label the docs give for
deleting them. The next test that needs the release installs it again."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from tests.support.polling import poll

pytestmark = pytest.mark.kind

NAMESPACE = "k8slease-e2e"
CRD = "scheduledjobgroups.k8slease.io"


def rendered_objects(manifest: str) -> list[tuple[str, str, str | None]]:
    """(kind with API group, name, namespace or None) of every object of a release manifest."""
    found = []
    for document in yaml.safe_load_all(manifest):
        if not document:
            continue
        group = document["apiVersion"].rpartition("/")[0]
        kind = document["kind"] + (f".{group}" if group else "")
        namespace = document["metadata"].get("namespace")
        found.append((kind, document["metadata"]["name"], namespace))
    return found


def exists(cluster: Any, kind: str, name: str, namespace: str | None) -> bool:
    where = ["-n", namespace] if namespace else []
    listed = cluster.kubectl("get", kind, name, *where, "--ignore-not-found", "-o", "name")
    return bool(listed.strip())


def test_helm_uninstall_removes_what_it_installed_and_leaves_the_leases(
    e2e_cluster: Any, helm_release: Any
) -> None:
    # A release that has run: the app's replicas have written their Leases.
    poll(
        "job Lease written by the app",
        lambda: (
            "billing.nightly-invoices"
            in e2e_cluster.kubectl("get", "leases", "-n", NAMESPACE, "-o", "name")
        ),
        120,
        every=1,
    )
    objects = rendered_objects(
        e2e_cluster.helm("get", "manifest", helm_release.name, "-n", NAMESPACE)
    )
    kinds = {kind.partition(".")[0] for kind, _, _ in objects}
    assert {"Deployment", "ServiceAccount", "Role", "RoleBinding", "ScheduledJobGroup"} <= kinds
    leases = e2e_cluster.kubectl("get", "leases", "-n", NAMESPACE, "-o", "name").split()

    said = e2e_cluster.helm(
        "uninstall", helm_release.name, "-n", NAMESPACE, "--wait", "--timeout", "180s"
    )

    assert f'release "{helm_release.name}" uninstalled' in said
    left = [o for o in objects if exists(e2e_cluster, *o)]
    assert left == [], f"helm uninstall left objects of the release: {left}"
    # The Deployments are gone; their pods go by the garbage collector, each within its
    # termination grace period (30 s).
    poll(
        "end of the release's pods",
        lambda: (
            not json.loads(e2e_cluster.kubectl("get", "pods", "-n", NAMESPACE, "-o", "json"))[
                "items"
            ]
        ),
        90,
        every=1,
    )
    # What it leaves, as docs/install.md says: the CRD, and the Leases the replicas wrote,
    # which the documented label selector finds (for `kubectl delete lease -l ...`).
    assert exists(e2e_cluster, "customresourcedefinition", CRD, None)
    labelled = e2e_cluster.kubectl(
        "get", "leases", "-n", NAMESPACE, "-l", "k8slease.io/group", "-o", "name"
    ).split()
    app_leases = [lease for lease in leases if lease.startswith("lease.coordination.k8s.io/bil")]
    assert app_leases and sorted(labelled) == sorted(app_leases), (leases, labelled)
    assert not helm_release.installed()

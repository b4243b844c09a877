"""The operator under the kopf CLI (``kopf run -m k8slease.operator.handlers``) never writes to a
Lease: every Lease write the API server saw during the run is one the test made itself. On the
embedded server the requests are counted by its stats, on the real control plane by its audit
log (per namespace).

kopf runs in a subprocess rather than in-process (``KopfRunner``) so that the handlers do not
stay in kopf's process-wide default registry and run in other tests' operators."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from k8slease.lease.record import LeaseRecord, lease_with_record, new_lease
from k8slease.lease.transport import LeaseTransport
from k8slease.names import LABEL_GROUP, LABEL_ROLE, ROLE_LEADER
from k8slease.operator.crd import install_crd
from k8slease.testing.controlplane import audit
from k8slease.testing.server import APIServer
from tests.support.operators import FAST_ENV, get_group, stop_process, wait_condition, wait_status

LEASE_WRITES = ("create", "update", "patch", "delete", "deletecollection")


class Counted:
    """A server, a fresh namespace on it, and the requests made there since the start."""

    def __init__(self, server: Any, namespace: str) -> None:
        self.server, self.namespace = server, namespace
        self.kubeconfig = server.kubeconfig
        self._since = 0 if server.embedded else audit.size(server.audit_log)

    def api_client(self) -> client.ApiClient:
        return self.server.api_client()

    def count(self, verb: str, resource: str) -> int:
        if self.server.embedded:
            return int(self.server.stats.count(verb, resource))
        found = audit.events(self.server.audit_log, self._since)
        return audit.count(found, verb, resource, namespace=self.namespace)


@pytest.fixture
def server(k8s_apiserver: Any) -> Iterator[Counted]:
    """A fresh embedded server (its stats count everything), or the real control plane."""
    namespace = f"nowrites-{uuid.uuid4().hex[:6]}"
    with APIServer() if k8s_apiserver.embedded else nullcontext(k8s_apiserver) as target:
        api = target.api_client()
        install_crd(api)
        client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
        api.close()
        yield Counted(target, namespace)


@contextmanager
def kopf_run(server: Counted, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    # the groups are auto-created: declared for every group (the setting as an environment
    # variable, as kopf run takes it)
    env = dict(
        os.environ,
        KUBECONFIG=str(server.kubeconfig),
        K8SLEASE_OPERATOR_AUTO_CREATE_GROUPS="*",
        **FAST_ENV,
    )
    env.pop("KUBERNETES_SERVICE_HOST", None)
    kopf = Path(sys.executable).with_name("kopf")
    args = [
        str(kopf),
        "run",
        "--standalone",
        "--namespace",
        server.namespace,
        "-m",
        "k8slease.operator.handlers",
    ]
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            yield proc
        finally:
            stop_process(proc)


def lease_writes(server: Counted) -> int:
    return sum(server.count(verb, "leases") for verb in LEASE_WRITES)


def test_operator_makes_no_lease_writes(server: Counted, tmp_path: Path) -> None:
    api = server.api_client()
    NS = server.namespace
    transport = LeaseTransport(api, NS)
    ours = 0
    log = tmp_path / "kopf.log"
    with kopf_run(server, log) as proc:
        now = datetime.now(UTC)
        leases = {}
        for group in ("w1", "w2", "w3"):
            record = LeaseRecord("replica-a", 5, now, now, 0, 1)
            labels = {LABEL_GROUP: group, LABEL_ROLE: ROLE_LEADER}
            leases[group] = transport.create(new_lease(group, NS, record, labels=labels))
            ours += 1
        for group in leases:  # the operator is up and has seen the first holder
            wait_status(api, NS, group, lambda s: s.get("leader") == "replica-a", f"{group} up")
        for step in range(1, 6):  # renewals, then a takeover, in every group
            now += timedelta(milliseconds=200)
            holder = "replica-a" if step < 5 else "replica-b"
            for group, lease in leases.items():
                transitions, token = (0, 1) if step < 5 else (1, 2)
                record = LeaseRecord(holder, 1, now, now, transitions, token)
                leases[group] = transport.replace(group, lease_with_record(lease, record))
                ours += 1
        for group in leases:
            status = wait_status(
                api, NS, group, lambda s: s.get("leader") == "replica-b", f"{group} status"
            )
            assert status["failovers"][-1]["reason"] == "expired"
        # Nobody renews now: the operator keeps evaluating (LeaderElected turns False) on its own.
        for group in leases:
            wait_condition(api, NS, group, "LeaderElected", reason="LeaseExpired")
        writes_seen = lease_writes(server)
        patches = server.count("patch", "scheduledjobgroups/status")
        assert proc.poll() is None, log.read_text()[-3000:]
    assert writes_seen == ours
    assert server.count("patch", "leases") == 0
    for group in leases:
        lease = transport.get(group)
        annotations = lease["metadata"].get("annotations") or {}
        assert not [k for k in annotations if "kopf" in k], annotations
        assert not lease["metadata"].get("finalizers")
        assert get_group(api, NS, group) is not None
    # status writes were coalesced: far fewer than one per Lease change
    assert 3 <= patches <= 3 * 6, patches
    api.close()

"""The operator (``python -m k8slease operator``) merges a dead replica's journal into its job
Lease, on each API server (issue 26): a run that succeeded while its replica was cut off, whose
release was never written, and which a takeover recorded ``lost``, gets its real outcome back
from the termination message the replica's container left in its Pod's status.

The replica is a real :class:`~k8slease.jobs.lock.JobLock` writing its journal to a file; its
death is the Pod's status a kubelet would write (the e2e suite has a real kubelet do it)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch

from k8slease.errors import Unavailable
from k8slease.jobs.jobwiring import JobWiring
from k8slease.jobs.journal import RunJournal
from k8slease.jobs.lock import Grant, JobLock
from k8slease.jobs.lockrules import Verdict
from k8slease.lease.keptruns import merged_journals
from k8slease.lease.transport import LeaseTransport
from k8slease.lease.view import LeaseView
from k8slease.operator.crd import install_crd
from k8slease.testing.server import APIServer
from tests.support.fakeclock import FakeClock
from tests.support.operators import operator_process, wait_for
from tests.support.pods import default_account, ended_pod

NS = "journals"
GROUP = "nightly"
CONTAINER = "containerd://4f6b0c1d2e3a"


class CutOff(LeaseTransport):
    """A replica's transport that can be cut off from the API server (``down``)."""

    down = False

    def get(self, name: str) -> dict[str, Any]:
        if self.down:
            raise Unavailable("cut off", status=None)
        return super().get(name)

    def replace(self, name: str, body: Any) -> dict[str, Any]:
        if self.down:
            raise Unavailable("cut off", status=None)
        return super().replace(name, body)


@pytest.fixture(scope="module")
def server(k8s_apiserver: APIServer) -> Iterator[APIServer]:
    """The session's server with the CRD, ``NS`` and its default ServiceAccount (which a Pod
    needs on a control plane without a controller manager to make it)."""
    api = k8s_apiserver.api_client()
    install_crd(api)
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": NS}})
    default_account(core, NS)
    api.close()
    yield k8s_apiserver


def _lock(server: APIServer, identity: str, clock: FakeClock, **options: Any) -> JobLock:
    transport = CutOff(server.api_client(), NS, request_timeout=5)
    wiring = JobWiring(transport=transport, group=GROUP, identity=identity, clock=clock, **options)
    return JobLock(wiring, job="invoices", lock_at_most_for=30, ordered=False)


def _lease(api: client.ApiClient, name: str) -> LeaseView:
    return LeaseView.decode(LeaseTransport(api, NS).get(name))


def test_a_dead_replicas_journal_gives_its_run_recorded_lost_its_real_outcome(
    server: APIServer, tmp_path: Path
) -> None:
    api = server.api_client()
    clock = FakeClock(wall=datetime.now(UTC))
    journal = tmp_path / "termination-log"
    r0 = _lock(server, "replica-0", clock, journal=RunJournal(str(journal)))
    r1 = _lock(server, "replica-1", clock)
    grant = r0.try_acquire(clock.now())
    assert isinstance(grant, Grant)
    assert r1.try_acquire(clock.now()) is Verdict.ALREADY_CLAIMED  # r1 starts timing the lock
    r0.transport.down = True  # type: ignore[attr-defined]
    r0.finish(grant, "succeeded")  # its release cannot be written: kept, in its journal too
    clock.advance(31)
    taken = r1.try_acquire(clock.now())  # r0's lock expired: r1 takes over, r0's tick lost
    assert isinstance(taken, Grant)
    r1.finish(taken, "succeeded")
    name = f"{GROUP}.invoices"
    before = _lease(api, name).job
    assert (before.count("lost"), before.count("succeeded")) == (1, 1)
    core = client.CoreV1Api(api)

    with operator_process(server.kubeconfig, NS, log=tmp_path / "operator.log") as proc:
        # r0 died, still cut off
        ended_pod(
            core, NS, "replica-0", group=GROUP, message=journal.read_text(), container_id=CONTAINER
        )

        def corrected() -> LeaseView | None:
            assert proc.poll() is None, (tmp_path / "operator.log").read_text()[-3000:]
            view = _lease(api, name)
            return view if merged_journals(view.body) else None

        leases = client.CoordinationV1Api(api)
        after = wait_for(
            "the journal merged into the job Lease",
            corrected,
            changes=lambda seconds: watch.Watch().stream(
                leases.list_namespaced_lease, NS, timeout_seconds=seconds
            ),
            timeout=30,
        )
    assert (after.job.count("lost"), after.job.count("succeeded")) == (0, 2)
    assert after.job.last_run is not None and after.job.last_run.holder == "replica-0"
    assert after.record.holder == "", "the lock left as it was: free"
    assert merged_journals(after.body) == (CONTAINER,)
    log = (tmp_path / "operator.log").read_text()
    assert "operator.journal_merged" in log
    api.close()

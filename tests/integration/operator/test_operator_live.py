"""The real operator (``python -m k8slease operator``) against each API server, with real
electors and job locks: failover history, job runs, missing runs, auto-creation, malformed input
and kubectl's view of it all."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from k8slease.election.elector import LeaderElector
from k8slease.jobs.jobwiring import JobWiring
from k8slease.jobs.lock import JobLock
from k8slease.lease.jobrecord import JobState, lease_with_job_state
from k8slease.lease.record import LeaseRecord, new_lease
from k8slease.lease.transport import LeaseTransport
from k8slease.names import (
    ANN_FENCING_TOKEN,
    ANN_LAST_RUN,
    CRD_GROUP,
    CRD_PLURAL,
    CRD_VERSION,
    LABEL_GROUP,
    LABEL_JOB,
    LABEL_ROLE,
    ROLE_JOB,
)
from k8slease.operator.groups import LABEL_AUTO_CREATED
from k8slease.testing.server import APIServer
from tests.support.operators import (
    condition,
    create_group,
    event_changes,
    get_group,
    group_events,
    operator_process,
    shared_server_fixture,
    wait_condition,
    wait_for,
    wait_status,
)
from tests.support.timing import OPERATOR_FAST as FAST

NS = "ops"


server = shared_server_fixture(NS)  # the session's server, embedded then real


@pytest.fixture(scope="module")
def operator(server: APIServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    log = tmp_path_factory.mktemp("operator") / "operator.log"
    with operator_process(server.kubeconfig, NS, log=log) as proc:  # every group declared
        yield log
        assert proc.poll() is None, f"the operator exited:\n{log.read_text()[-3000:]}"


@pytest.fixture
def api(server: APIServer, operator: Path) -> Iterator[client.ApiClient]:
    api_client = server.api_client()
    yield api_client
    api_client.close()


def elector(server: APIServer, name: str, identity: str, **options: Any) -> LeaderElector:
    return LeaderElector(
        name, namespace=NS, identity=identity, api_client=server.api_client(), **{**FAST, **options}
    )


def failover(
    server: APIServer, api: client.ApiClient, group: str, *, takeover_within: float, **a: Any
) -> dict[str, Any]:
    """replica-a leads ``group`` (elector options ``a``), replica-b waits; a stops (with
    ``release_on_stop=False``, as if it crashed), b leads within ``takeover_within`` s; returns
    the group's status once the operator names b."""
    first = elector(server, group, "replica-a", **a).start()
    assert first.wait_until_leading(5)
    second = elector(server, group, "replica-b").start()
    try:
        wait_status(api, NS, group, lambda s: s.get("leader") == "replica-a", "a leads")
        first.stop(5)
        assert second.wait_until_leading(takeover_within)
        status: dict[str, Any] = wait_status(
            api, NS, group, lambda s: s.get("leader") == "replica-b", "b leads"
        )
    finally:
        first.stop(5)
        second.stop(5)
    return status


def test_released_failover_is_recorded_with_its_gap(
    server: APIServer, api: client.ApiClient
) -> None:
    status = failover(server, api, "fo-released", takeover_within=5)  # b takes over at once
    first, last = status["failovers"][0], status["failovers"][-1]
    assert (first["to"], first["reason"]) == ("replica-a", "first")
    assert (last["from"], last["to"], last["reason"]) == ("replica-a", "replica-b", "released")
    assert 0 <= last["gapSeconds"] < 2.0
    assert status["transitions"] >= 1 and status["fencingToken"] >= 2
    assert {c["identity"] for c in status["candidates"]} == {"replica-a", "replica-b"}
    assert condition(status, "LeaderElected")["status"] == "True"
    assert status["lastFailoverTime"]
    events = wait_for(
        "leadership events",
        lambda: [e for e in group_events(api, NS, "fo-released") if "replica-b" in e["message"]],
        changes=event_changes(api, NS),
    )
    assert (
        events[0]["reason"] == "LeaderElected"
        and "after replica-a released" in events[0]["message"]
    )


def test_expired_failover_is_recorded_with_its_gap(
    server: APIServer, api: client.ApiClient
) -> None:
    # a crashes: the Lease is not released, b must wait for it to expire
    status = failover(server, api, "fo-expired", takeover_within=10, release_on_stop=False)
    last = status["failovers"][-1]
    assert (last["from"], last["to"], last["reason"]) == ("replica-a", "replica-b", "expired")
    # b waits a whole lease duration (2 s) after a's last renewal before it takes over
    assert 1.5 <= last["gapSeconds"] < 8.0


def test_job_runs_appear_with_holder_outcome_and_counts(
    server: APIServer, api: client.ApiClient
) -> None:
    create_group(api, NS, "jobs-grp")
    transport = LeaseTransport(server.api_client(), NS)
    tick = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=2)
    lock_a = JobLock(
        JobWiring(transport=transport, group="jobs-grp", identity="replica-a"),
        job="nightly",
        lock_at_most_for=30,
    )
    lock_b = JobLock(
        JobWiring(transport=transport, group="jobs-grp", identity="replica-b"),
        job="nightly",
        lock_at_most_for=30,
    )
    grant = lock_a.try_acquire(tick)
    assert grant is not None
    lock_a.finish(grant, "succeeded")
    status = wait_status(
        api,
        NS,
        "jobs-grp",
        lambda s: any(j.get("lastRun", {}).get("holder") == "replica-a" for j in s.get("jobs", [])),
        "a's run",
    )
    grant = lock_b.try_acquire(tick + timedelta(minutes=1))
    assert grant is not None
    lock_b.finish(grant, "failed", error="boom")
    status = wait_status(
        api,
        NS,
        "jobs-grp",
        lambda s: s.get("lastRunSummary") == "nightly@replica-b failed",
        "b's failed run",
    )
    (job,) = status["jobs"]
    assert job["lastRun"]["outcome"] == "failed" and job["lastRun"]["error"] == "boom"
    assert job["lastRun"]["tick"] == (tick + timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert job["counts"] == {"succeeded": 1, "failed": 1, "lost": 0}
    assert [r["holder"] for r in job["recentRuns"]] == ["replica-a", "replica-b"]
    events = wait_for(
        "a RunFailed event",
        lambda: [e for e in group_events(api, NS, "jobs-grp") if e["reason"] == "RunFailed"],
        changes=event_changes(api, NS),
    )
    assert events[0]["type"] == "Warning" and "boom" in events[0]["message"]


def test_missing_run_raises_the_condition_and_a_warning(
    server: APIServer, api: client.ApiClient
) -> None:
    spec = {"jobs": [{"name": "report", "schedule": "* * * * *", "graceSeconds": 50}]}
    create_group(api, NS, "missing-grp", spec)
    transport = LeaseTransport(server.api_client(), NS)
    lock = JobLock(
        JobWiring(transport=transport, group="missing-grp", identity="replica-a"),
        job="report",
        lock_at_most_for=30,
    )
    minute = datetime.now(UTC).replace(second=0, microsecond=0)
    grant = lock.try_acquire(minute - timedelta(minutes=5))
    assert grant is not None
    lock.finish(grant, "succeeded")
    status = wait_condition(api, NS, "missing-grp", "RunMissing", status="True")
    assert "job report: no run for tick" in condition(status, "RunMissing")["message"]
    (job,) = status["jobs"]
    assert job["missedTick"] == (minute - timedelta(minutes=4)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert job["missedTicks"] >= 3
    warning = wait_for(
        "a RunMissing event",
        lambda: [e for e in group_events(api, NS, "missing-grp") if e["reason"] == "RunMissing"],
        changes=event_changes(api, NS),
    )
    assert warning[0]["type"] == "Warning"
    # The newest closed tick runs: the alert clears (the next tick closes 50 s after it).
    grant = lock.try_acquire(datetime.now(UTC).replace(second=0, microsecond=0))
    assert grant is not None
    lock.finish(grant, "succeeded")
    wait_condition(api, NS, "missing-grp", "RunMissing", status="False")


def test_groups_with_leases_but_no_object_are_created(
    server: APIServer, api: client.ApiClient
) -> None:
    plain = elector(server, "auto-grp", "replica-a").start()
    custom = elector(server, "auto-custom-election", "replica-c", group="auto-custom").start()
    try:
        status = wait_status(
            api, NS, "auto-grp", lambda s: s.get("leader") == "replica-a", "auto-grp status"
        )
        assert status["failovers"][0]["reason"] == "first"
        obj = get_group(api, NS, "auto-grp")
        assert obj is not None and obj["metadata"]["labels"][LABEL_AUTO_CREATED] == "true"
        status = wait_status(
            api, NS, "auto-custom", lambda s: s.get("leader") == "replica-c", "auto-custom status"
        )
        assert status["leaseName"] == "auto-custom-election"
        obj = get_group(api, NS, "auto-custom")
        assert obj is not None and obj["spec"]["leaseName"] == "auto-custom-election"
    finally:
        plain.stop(5)
        custom.stop(5)


@pytest.mark.admission_refuses("lease-bounds: a fencing token that is not a number")
def test_malformed_leases_and_specs_get_a_message_not_a_crash(
    server: APIServer, operator: Path, api: client.ApiClient
) -> None:
    transport = LeaseTransport(server.api_client(), NS)
    labels = {LABEL_GROUP: "bad-grp", LABEL_ROLE: ROLE_JOB, LABEL_JOB: "sync"}
    body = new_lease("bad-grp.sync", NS, LeaseRecord("replica-x", 15), labels=labels)
    body = lease_with_job_state(body, JobState())
    body["metadata"]["annotations"][ANN_FENCING_TOKEN] = "minus one"
    body["metadata"]["annotations"][ANN_LAST_RUN] = "{not json"
    spec = {"jobs": [{"name": "sync", "schedule": "61 * * * *"}]}  # passes the schema pattern
    # The group first: on seeing the Lease, the operator would create it (every group declared)
    create_group(api, NS, "bad-grp", spec)
    transport.create(body)
    status = wait_status(
        api,
        NS,
        "bad-grp",
        lambda s: "last-run is not JSON" in s.get("message", ""),
        "the Lease's problems in the group's message",
    )
    assert condition(status, "Degraded")["status"] == "True"
    message = status["message"]
    assert "bad schedule '61 * * * *'" in message
    assert "k8slease.io/fencing-token is not a non-negative integer" in message
    assert "last-run is not JSON" in message
    assert condition(status, "Degraded")["reason"] == "MalformedSpec"
    # Fixing the spec clears that part; the operator kept running all along.
    client.CustomObjectsApi(api).patch_namespaced_custom_object(
        CRD_GROUP,
        CRD_VERSION,
        NS,
        CRD_PLURAL,
        "bad-grp",
        {"spec": {"jobs": [{"name": "sync", "schedule": "1 * * * *"}]}},
    )
    status = wait_condition(api, NS, "bad-grp", "Degraded", reason="MalformedLease")
    assert "bad schedule" not in status["message"]


def test_schema_rejects_bad_specs(api: client.ApiClient) -> None:
    for spec in (
        {"historyLimit": 0},
        {"leaseName": "Not A Name"},
        {"jobs": [{"name": "x"}]},
        {"jobs": [{"name": "x", "schedule": "* * *"}]},
        {"jobs": [{"name": "x", "schedule": "* * * * *", "graceSeconds": -1}]},
    ):
        with pytest.raises(client.ApiException) as info:
            create_group(api, NS, "rejected", spec)
        assert info.value.status == 422, spec


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_shows_the_printer_columns(server: APIServer, api: client.ApiClient) -> None:
    a = elector(server, "kubectl-grp", "replica-a").start()
    try:
        wait_status(api, NS, "kubectl-grp", lambda s: s.get("leader") == "replica-a", "status")

        def kubectl(*args: str) -> str:
            command = ["kubectl", "--kubeconfig", str(server.kubeconfig), "-n", NS, *args]
            return subprocess.run(
                command, capture_output=True, text=True, timeout=30, check=True
            ).stdout

        out = kubectl("get", "scheduledjobgroups", "kubectl-grp")
        header, row = out.splitlines()[:2]
        assert header.split() == ["NAME", "LEADER", "TRANSITIONS", "LAST", "FAILOVER", "AGE"]
        assert row.split()[:3] == ["kubectl-grp", "replica-a", "0"]
        wide = kubectl("get", "sjg", "-o", "wide")
        assert "LAST RUN" in wide and "MESSAGE" in wide
        described = kubectl("describe", "scheduledjobgroup", "kubectl-grp")
        assert "Failovers:" in described and "LeaderElected" in described
    finally:
        a.stop(5)

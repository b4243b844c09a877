"""A group with hundreds of job Leases keeps a status the API server stores and that names its
leader (the audit: past etcd's 1.5 MiB every status write failed, for good, and ``kubectl get``
showed no LEADER while one held the Lease). The Leases are written directly, as many replicas'
job locks would have left them: a held lock, a failed last run with a long error."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

from k8slease.lease.jobrecord import JobState, RunRecord, lease_with_job_state
from k8slease.lease.record import LeaseRecord, new_lease
from k8slease.lease.transport import LeaseTransport
from k8slease.names import LABEL_GROUP, LABEL_JOB, LABEL_ROLE, ROLE_JOB, ROLE_LEADER
from k8slease.operator.statusbudget import STATUS_BUDGET
from k8slease.testing.server import APIServer
from tests.support.operators import (
    condition,
    create_group,
    operator_process,
    shared_server_fixture,
    wait_status,
)

NS = "budget"
GROUP = "flood"
JOBS = 900  # about 1.7 MB of status unbounded: more than etcd stores
HOLDER = "replica-" + "x" * 245  # the longest identity kept (253)


server = shared_server_fixture(NS)  # the session's server, embedded then real


def job_lease(i: int, now: datetime) -> dict[str, object]:
    job = f"job-{i:04d}-" + "x" * 54  # the longest label value (63)
    tick = now - timedelta(hours=1, seconds=JOBS - i)
    run = RunRecord(HOLDER, tick, tick, tick + timedelta(seconds=2), "failed", 7, "e" * 1000)
    record = LeaseRecord(HOLDER, 15, now, now, 0, 8)
    labels = {LABEL_GROUP: GROUP, LABEL_ROLE: ROLE_JOB, LABEL_JOB: job}
    body = new_lease(f"{GROUP}.{job}", NS, record, labels=labels)
    state = JobState(claimed_tick=tick, completed_tick=tick, last_run=run, counts={"failed": 1})
    return lease_with_job_state(body, state)


def test_hundreds_of_job_leases_leave_a_status_that_is_written_and_names_the_leader(
    server: APIServer, tmp_path: Path
) -> None:
    api = server.api_client()
    leases = LeaseTransport(api, NS)
    now = datetime.now(UTC)
    create_group(api, NS, GROUP, {"jobs": [{"name": "nightly", "schedule": "0 2 * * *"}]})
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda i: leases.create(job_lease(i, now)), range(JOBS)))
    with operator_process(server.kubeconfig, NS, log=tmp_path / "operator.log") as proc:
        record = LeaseRecord("leader-0", 60, now, now, 0, 1)
        labels = {LABEL_GROUP: GROUP, LABEL_ROLE: ROLE_LEADER}
        leases.create(new_lease(GROUP, NS, record, labels=labels))
        status = wait_status(
            api,
            NS,
            GROUP,
            lambda s: (
                s.get("leader") == "leader-0"
                and len(s.get("jobs", [])) + s.get("jobsOmitted", 0) == JOBS + 1
            ),
            "the leader and every job, listed or counted",
            timeout=60,
        )
        assert proc.poll() is None
    log = (tmp_path / "operator.log").read_text()
    assert "status_write_failed" not in log, log[-3000:]
    assert len(json.dumps(status, separators=(",", ":")).encode()) <= STATUS_BUDGET
    names = [job["name"] for job in status["jobs"]]
    assert "nightly" in names  # expected: kept before any other
    assert len(names) + status["jobsOmitted"] == JOBS + 1
    # the newest runs kept: the job Leases written last
    assert f"job-{JOBS - 1:04d}-" + "x" * 54 in names
    assert f"job-0000-{'x' * 54}" not in names
    degraded = condition(status, "Degraded")
    assert degraded["reason"] == "StatusTrimmed"
    assert f"{status['jobsOmitted']} of {JOBS + 1} jobs left out" in degraded["message"]
    api.close()

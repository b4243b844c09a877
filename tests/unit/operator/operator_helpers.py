"""Lease bodies for operator unit tests, written exactly as the elector and job locks write them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from k8slease.lease.jobrecord import JobState, RunRecord, lease_with_job_state
from k8slease.lease.record import LeaseRecord, new_lease
from k8slease.names import LABEL_GROUP, LABEL_JOB, LABEL_ROLE, ROLE_JOB, ROLE_LEADER

T0 = datetime(2026, 1, 1, 2, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def leader_lease(
    group: str,
    holder: str,
    *,
    renew: float,
    acquire: float = 0.0,
    transitions: int = 0,
    token: int = 1,
    namespace: str = "ns",
    name: str | None = None,
    duration: int = 15,
) -> dict[str, Any]:
    record = LeaseRecord(
        holder=holder,
        duration_seconds=duration,
        acquire_time=at(acquire),
        renew_time=at(renew),
        transitions=transitions,
        fencing_token=token,
    )
    return new_lease(
        name or group,
        namespace,
        record,
        labels={LABEL_GROUP: group, LABEL_ROLE: ROLE_LEADER},
    )


def job_lease(
    group: str,
    job: str,
    holder: str = "",
    *,
    run: RunRecord | None = None,
    claimed: datetime | None = None,
    counts: dict[str, int] | None = None,
    namespace: str = "ns",
) -> dict[str, Any]:
    record = LeaseRecord(holder=holder, duration_seconds=15, renew_time=at(0), fencing_token=3)
    body = new_lease(
        f"{group}.{job}",
        namespace,
        record,
        labels={LABEL_GROUP: group, LABEL_ROLE: ROLE_JOB, LABEL_JOB: job},
    )
    state = JobState(
        claimed_tick=claimed or (run.tick if run else None),
        completed_tick=run.tick if run else None,
        last_run=run,
        counts=counts or {},
    )
    return lease_with_job_state(body, state)


def run_record(
    holder: str, tick: datetime, outcome: str = "succeeded", *, error: str | None = None
) -> RunRecord:
    return RunRecord(
        holder=holder,
        tick=tick,
        started=tick + timedelta(seconds=1),
        finished=tick + timedelta(seconds=3),
        outcome=outcome,  # type: ignore[arg-type]
        fencing_token=3,
        error=error,
    )


def group_object(
    name: str,
    spec: dict[str, Any] | None = None,
    *,
    namespace: str = "ns",
    created: datetime = T0,
    status: dict[str, Any] | None = None,
    uid: str = "uid-1",
    generation: int = 1,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "k8slease.io/v1alpha1",
        "kind": "ScheduledJobGroup",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "generation": generation,
            "creationTimestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
        "spec": spec or {},
    }
    if status is not None:
        body["status"] = status
    return body

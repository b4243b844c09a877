"""A Lease decoded once: what every part of k8slease reads from a Lease, typed, in one value.

A Lease body read from or written to the API server is decoded into a :class:`LeaseView` at the
edge where it arrives (the elector's runner, a job lock, the informer, the operator's handlers)
and the view travels from there: observation, the lock and election rules, the operator's fold.
Nothing downstream parses the body again. The body stays attached, untouched, so that the next
write keeps every field k8slease does not know.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from k8slease.lease.jobrecord import JobState, job_state_from_lease
from k8slease.lease.meta import labels_of, lease_name_of, resource_version
from k8slease.lease.record import LeaseRecord, record_from_lease


@dataclass(frozen=True, slots=True)
class LeaseView:
    """One Lease as k8slease understands it.

    ``record`` is the spec (holder, times, transitions) with the fencing token; ``job`` the job
    annotations (claimed and completed ticks, last run, counts; empty on a leader Lease).
    Decoding never raises: what was malformed is listed in ``record.problems`` and
    ``job.problems``.
    """

    body: dict[str, Any]
    name: str
    resource_version: str
    labels: Mapping[str, Any]
    record: LeaseRecord
    job: JobState

    @classmethod
    def decode(cls, lease: Mapping[str, Any]) -> LeaseView:
        body = dict(lease)
        return cls(
            body=body,
            name=lease_name_of(body),
            resource_version=resource_version(body),
            labels=labels_of(body),
            record=record_from_lease(body),
            job=job_state_from_lease(body),
        )

    @property
    def fencing_token(self) -> int:
        return self.record.fencing_token


def as_view(lease: LeaseView | Mapping[str, Any]) -> LeaseView:
    """``lease`` decoded (a view passes through as it is)."""
    return lease if isinstance(lease, LeaseView) else LeaseView.decode(lease)

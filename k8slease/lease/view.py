"""A Lease decoded once: what every part of k8slease reads from a Lease, typed, in one value.

A Lease body read from or written to the API server is decoded into a :class:`LeaseView` where it
arrives, and only inside ``lease/``: by :class:`~k8slease.lease.store.LeaseStore` (every request
of the elector's runner and the job locks), :func:`~k8slease.lease.store.list_leases` and the
informer, and :func:`received_lease` for a body delivered by another road (the operator's kopf
handlers). The view travels from there: observation, the lock and election rules, the operator's
fold. Nothing downstream parses the body again. The body stays attached, untouched, so that the
next write keeps every field k8slease does not know.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from k8slease.lease.jobrecord import JobState, job_state_from_lease
from k8slease.lease.meta import labels_of, lease_name_of, resource_version, with_annotations
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

    def annotated(self, added: Mapping[str, str]) -> LeaseView:
        """This view with ``added`` among its body's annotations, for the next write to carry
        (keys outside the record and the job state: they decode as before)."""
        return replace(self, body=with_annotations(self.body, added))


def received_lease(body: Mapping[str, Any]) -> LeaseView:
    """Decode a Lease body that did not come through a :class:`~k8slease.lease.store.LeaseStore`
    (a kopf handler's ``body``): the one decoder entry point for code above ``lease/``.

    The body is deep-copied first: its sender may keep and change the mapping it passed (kopf
    reuses its bodies), and a view must never change under its reader.
    """
    return LeaseView.decode(copy.deepcopy(dict(body)))

"""Label and annotation keys that k8slease writes on Leases.

They are the contract between the elector, the job locks and the operator: the operator finds
every Lease of a group with ``k8slease.io/group=<group>`` and reads the rest from annotations.
"""

from __future__ import annotations

from typing import Final

DOMAIN: Final = "k8slease.io"

#: Label on every Lease k8slease creates: the group it belongs to.
LABEL_GROUP: Final = f"{DOMAIN}/group"
#: Label: ``leader`` for a group's election Lease, ``job`` for a per-job lock Lease.
LABEL_ROLE: Final = f"{DOMAIN}/role"
#: Label on job lock Leases: the job's name.
LABEL_JOB: Final = f"{DOMAIN}/job"

#: Label a group's Lease carries (value ``true``) to ask the operator for a ScheduledJobGroup
#: when the group has none (the operator's other way in: its declared ``--auto-create-group``).
LABEL_AUTO_CREATE: Final = f"{DOMAIN}/auto-create"

ROLE_LEADER: Final = "leader"
ROLE_JOB: Final = "job"

#: Annotation: the fencing token of the current grant (a decimal integer that only grows).
ANN_FENCING_TOKEN: Final = f"{DOMAIN}/fencing-token"
#: Annotation on job locks: the newest tick ever claimed (MicroTime), written with the grant.
ANN_CLAIMED_TICK: Final = f"{DOMAIN}/claimed-tick"
#: Annotation on job locks: the newest tick whose run finished (MicroTime).
ANN_COMPLETED_TICK: Final = f"{DOMAIN}/completed-tick"
#: Annotation on job locks: the last run record (JSON, see ``k8slease.lease.jobrecord``).
ANN_LAST_RUN: Final = f"{DOMAIN}/last-run"
#: Annotation on job locks: run counts by outcome (JSON object of integers).
ANN_RUN_COUNTS: Final = f"{DOMAIN}/run-counts"
#: Annotation on job locks: the containers whose journal the operator has merged into the Lease
#: (JSON list of container IDs, newest last), so that no journal is merged twice.
ANN_JOURNALS_MERGED: Final = f"{DOMAIN}/journals-merged"
#: Key of a replica's journal of kept run records (its container's termination message).
JOURNAL_KEY: Final = f"{DOMAIN}/kept-runs"

#: The API group and version of the ScheduledJobGroup custom resource.
CRD_GROUP: Final = DOMAIN
CRD_VERSION: Final = "v1alpha1"
CRD_PLURAL: Final = "scheduledjobgroups"
CRD_KIND: Final = "ScheduledJobGroup"


def job_lease_name(group: str, job: str) -> str:
    """The name of the Lease that locks ``job`` of ``group``: ``<group>.<job>``."""
    return f"{group}.{job}"

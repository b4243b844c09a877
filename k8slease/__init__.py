"""k8slease: run scheduled jobs once, not once per replica, on Kubernetes."""

from __future__ import annotations

from k8slease.election.aio import AsyncLeaderElector
from k8slease.election.elector import LeaderElector, LeadershipContext
from k8slease.election.hooks import LeadershipCallback, NewLeaderCallback
from k8slease.election.timing import ElectionTiming
from k8slease.errors import (
    AlreadyExists,
    ConfigError,
    Conflict,
    Forbidden,
    Invalid,
    K8sLeaseError,
    NotFound,
    TransportError,
    Unavailable,
)
from k8slease.jobs.context import JobContext
from k8slease.jobs.misfire import MisfirePolicy
from k8slease.jobs.registry import Jobs
from k8slease.jobs.spec import JobSpec, Mode
from k8slease.jobs.ticklock import TickLock, TickSkipped
from k8slease.jobs.wrap import wrap
from k8slease.kube.health import HealthServer
from k8slease.lease.jobrecord import JobState, RunRecord
from k8slease.lease.record import LeaseRecord

__version__ = "0.1.0"

__all__ = [
    "AlreadyExists",
    "AsyncLeaderElector",
    "ConfigError",
    "Conflict",
    "ElectionTiming",
    "Forbidden",
    "HealthServer",
    "Invalid",
    "JobContext",
    "JobSpec",
    "JobState",
    "Jobs",
    "K8sLeaseError",
    "LeaderElector",
    "LeadershipCallback",
    "LeadershipContext",
    "LeaseRecord",
    "MisfirePolicy",
    "Mode",
    "NewLeaderCallback",
    "NotFound",
    "RunRecord",
    "TickLock",
    "TickSkipped",
    "TransportError",
    "Unavailable",
    "__version__",
    "wrap",
]

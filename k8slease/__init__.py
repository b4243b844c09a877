"""k8slease: run scheduled jobs once, not once per replica, on Kubernetes."""

from __future__ import annotations

from k8slease.config import ElectionTiming
from k8slease.context import JobContext
from k8slease.elector import LeaderElector, LeadershipContext
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
from k8slease.health import HealthServer
from k8slease.jobrecord import JobState, RunRecord
from k8slease.jobs import Jobs
from k8slease.jobspec import JobSpec, Mode
from k8slease.misfire import MisfirePolicy
from k8slease.record import LeaseRecord
from k8slease.wrap import wrap

__version__ = "0.1.0"

__all__ = [
    "AlreadyExists",
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
    "LeadershipContext",
    "LeaseRecord",
    "MisfirePolicy",
    "Mode",
    "NotFound",
    "RunRecord",
    "TransportError",
    "Unavailable",
    "__version__",
    "wrap",
]

"""What the jobs of one replica share, handed whole to each job's lock and runner.

One object per concern (httpx's style): a :class:`~k8slease.jobs.lock.JobLock` is given this
wiring and its own lock terms, not eight loose keywords repeated at every call site.
:mod:`k8slease.jobs.wiring` assembles it for ``Jobs`` and ``TickLock``; a standalone lock (a test,
a custom integration) builds one with only ``transport``, ``group`` and ``identity``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from k8slease.clock import Clock, SystemClock
from k8slease.jobs.journal import RunJournal
from k8slease.jobs.lockcache import ClaimCache
from k8slease.kube.events import EventRecorder
from k8slease.lease.informer import LeaseInformer
from k8slease.lease.observe import Observations
from k8slease.lease.transport import LeaseTransport
from k8slease.metrics import JobMetrics, NoopJobMetrics
from k8slease.names import LABEL_GROUP, LABEL_ROLE, ROLE_JOB

__all__ = ["JobWiring", "job_informer"]


@dataclass(frozen=True, slots=True, kw_only=True)
class JobWiring:
    """What the jobs of one replica share.

    Who runs them (``group``, ``identity``); the ``transport`` their locks send through and the
    ``events`` recorder they post through (default ``None``: no Events); the ``observations``
    their claims are judged on (default ``None``: each lock keeps its own, on ``clock``) and the
    informer's claim ``cache`` (default none: a claim reads the Lease); the ``metrics`` (default:
    none kept); the ``clock`` (default: the system's); the ``journal`` where a run record whose
    release could not be written is kept (default: none, :mod:`k8slease.jobs.journal`).
    """

    transport: LeaseTransport
    group: str
    identity: str
    clock: Clock = field(default_factory=SystemClock)
    events: EventRecorder | None = None
    observations: Observations | None = None
    cache: ClaimCache | None = None
    metrics: JobMetrics = field(default_factory=NoopJobMetrics)
    journal: RunJournal | None = None

    def watched(self, *, step: float, spread: int) -> tuple[JobWiring, LeaseInformer]:
        """This wiring with claims judged from a started list+watch of the group's job Leases
        (:func:`job_informer`, spacing claims by ``step`` and ``spread``), and that informer
        (the caller stops it)."""
        observations = self.observations or Observations(self.clock)
        informer, cache = job_informer(
            self.transport, observations, group=self.group, step=step, spread=spread
        )
        return replace(self, observations=observations, cache=cache), informer


def job_informer(
    transport: LeaseTransport,
    observations: Observations,
    *,
    group: str,
    step: float,
    spread: int,
) -> tuple[LeaseInformer, ClaimCache]:
    """The started list+watch of ``group``'s job Leases, and the claim cache the locks read."""
    informer = LeaseInformer(
        transport, observations, label_selector=f"{LABEL_GROUP}={group},{LABEL_ROLE}={ROLE_JOB}"
    )
    cache = ClaimCache(observations, informer.synced.is_set, step=step, spread=spread)
    informer.start()
    return informer, cache

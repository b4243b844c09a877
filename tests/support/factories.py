"""Builders of the objects most tests construct (``tests.support.factories``): a ``Jobs`` group
and a per-job ``JobLock``, each with the arguments a test names and nothing else changed.

They exist so a test says only what it varies (its group, identity, clock, timing); every other
option is the library's own default, so a test built through them checks what a user gets.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from kubernetes import client

from k8slease import Jobs
from k8slease.jobs.jobwiring import JobWiring
from k8slease.jobs.lock import JobLock
from k8slease.kube.events import EventRecorder
from k8slease.lease.jobrecord import Outcome, RunRecord
from k8slease.lease.transport import LeaseTransport
from tests.support.fakeclock import FakeClock


def make_jobs(
    group: str,
    api_client: client.ApiClient,
    *,
    identity: str,
    namespace: str = "default",
    **options: Any,
) -> Jobs:
    """A ``Jobs`` group named ``group`` in ``namespace`` as ``identity`` on ``api_client``;
    ``options`` are passed to ``Jobs`` unchanged (clock, election, handle_signals, ...)."""
    return Jobs(group, namespace=namespace, identity=identity, api_client=api_client, **options)


def make_lock(
    transport: LeaseTransport | Any,
    *,
    identity: str,
    lock_at_most_for: float,
    group: str = "g",
    job: str = "job",
    **options: Any,
) -> JobLock:
    """``identity``'s lock on ``group``/``job`` through ``transport`` (a real one or a test
    double) holding for at most ``lock_at_most_for`` s; ``options`` are passed unchanged to the
    lock's ``JobWiring`` (clock, events, observations, cache, journal) or to ``JobLock`` (the
    lock terms: lock_at_least_for, ordered, grace)."""
    terms = {name: options.pop(name) for name in _LOCK_TERMS if name in options}
    wiring = JobWiring(transport=transport, group=group, identity=identity, **options)
    return JobLock(wiring, job=job, lock_at_most_for=lock_at_most_for, **terms)


#: The keywords of ``JobLock`` itself (the rest of a lock's options belong to its wiring).
_LOCK_TERMS = ("lock_at_least_for", "ordered", "grace")


def lock_io(
    server: Any, *, identity: str, wall: datetime, namespace: str = "default"
) -> tuple[LeaseTransport, EventRecorder, FakeClock]:
    """A lock's transport and Event recorder (as ``identity``) on ``server``'s ``namespace``,
    and the fake clock they share, its wall clock at ``wall``."""
    clock = FakeClock(wall=wall)
    transport = LeaseTransport(server.api_client(), namespace, request_timeout=2)
    events = EventRecorder(server.api_client(), namespace, identity=identity, clock=clock)
    return transport, events, clock


#: what the ``new_jobs`` fixture (tests/integration/jobs/conftest.py) returns: :func:`make_jobs`
#: bound to a test's API client and namespace
JobsFactory = Callable[..., Jobs]


def make_replicas(group: str, server: Any, count: int, **options: Any) -> list[Jobs]:
    """``count`` replicas ``r0``, ``r1``, ... of the ``Jobs`` group ``group`` in the default
    namespace of ``server``, each on an API client of its own; ``options`` as in
    :func:`make_jobs`. Not started (``tests.support.lifecycle.all_started``)."""
    return [
        make_jobs(group, server.api_client(), identity=f"r{i}", **options) for i in range(count)
    ]


def hourly_catch_up(
    new_jobs: JobsFactory, group: str, job: Callable[..., Any], *, identity: str, **options: Any
) -> Jobs:
    """A ``Jobs`` group whose one job, ``hourly``, runs ``job`` every hour with 3 h of grace: a
    replica started hours after the last run catches up the latest missed tick."""
    jobs = new_jobs(group, identity=identity, **options)
    jobs.interval(hours=1, name="hourly", grace=3 * 3600, lock_at_most_for=60)(job)
    return jobs


def make_run(
    tick: datetime,
    outcome: Outcome = "succeeded",
    *,
    token: int = 4,
    holder: str = "r0",
    took: float = 1.0,
    error: str | None = None,
) -> RunRecord:
    """``holder``'s run of ``tick`` under grant ``token``, started at the tick, ``took`` seconds."""
    return RunRecord(
        holder=holder,
        tick=tick,
        started=tick,
        finished=tick + timedelta(seconds=took),
        outcome=outcome,
        fencing_token=token,
        error=error,
    )

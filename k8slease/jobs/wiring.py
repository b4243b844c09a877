"""How :class:`~k8slease.jobs.registry.Jobs` wires its jobs: one runner (and lock) per job, and
the scheduler's entries for them.

Kept apart from the ``Jobs`` face so that ``registry.py`` reads as the public surface and its
lifecycle, and this module as the assembly it starts: each coordinated job gets a
:class:`~k8slease.jobs.lock.JobLock` sharing one transport, one informer view and one Event
recorder; each scheduled job gets one APScheduler entry on the ``k8slease`` executor (LEADER jobs
paused until this replica leads) and, for LEADER jobs, a leaderless watch on every replica (a tick
at which nobody leads is reported lost).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Collection, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.schedulers.base import STATE_STOPPED, BaseScheduler
from kubernetes import client

from k8slease.clock import Clock
from k8slease.election.budgets import event_budget
from k8slease.election.machine import ElectionMachine
from k8slease.election.timing import ElectionTiming
from k8slease.jobs.catchup import schedule_catch_up
from k8slease.jobs.context import JobOwner
from k8slease.jobs.dropped import MASK as DROPPED_MASK
from k8slease.jobs.dropped import DroppedTicks, due_between
from k8slease.jobs.executors import TickAsyncIOExecutor, TickThreadPoolExecutor
from k8slease.jobs.jobwiring import JobWiring
from k8slease.jobs.journal import RunJournal
from k8slease.jobs.lock import JobLock
from k8slease.jobs.lostticks import leaderless_watch
from k8slease.jobs.runner import TickRunner
from k8slease.jobs.spec import JobSpec, Mode
from k8slease.kube.eventqueue import QueuedEvents
from k8slease.kube.events import EventRecorder
from k8slease.kube.identity import default_namespace, identity_or_default
from k8slease.kube.validate import validate_job_group, validate_namespace
from k8slease.lease.observe import Observations
from k8slease.lease.transport import LeaseTransport
from k8slease.metrics import JobMetrics

#: The alias of the executor ``Jobs`` adds to the scheduler (it passes the tick to the job).
EXECUTOR_ALIAS = "k8slease"


def job_events(
    api_client: client.ApiClient,
    namespace: str,
    identity: str,
    clock: Clock,
    timing: ElectionTiming | None = None,
) -> QueuedEvents:
    """The Event recorder of a replica's jobs: posts off the scheduler's, the claims' and the
    runs' threads, each request bounded by what ``timing`` (default 60/20/40) tolerates
    (:func:`~k8slease.election.budgets.event_budget`), each connect by its ``request_timeout``."""
    timing = timing or ElectionTiming()
    return QueuedEvents(
        api_client,
        namespace,
        bound=event_budget(timing),
        connect=timing.timeout,
        clock=clock,
        identity=identity,
    )


def job_id(group: str, name: str) -> str:
    """The scheduler's id for job ``name`` of ``group``."""
    return f"k8slease:{group}:{name}"


def leaderless_id(group: str, name: str) -> str:
    """The scheduler's id for the leaderless watch of LEADER job ``name``."""
    return f"{job_id(group, name)}:leaderless"


def job_lock(wiring: JobWiring, spec: JobSpec, *, ordered: bool) -> JobLock:
    """The lock of job ``spec`` (its lock times and grace) on ``wiring``; ``ordered``: whether a
    claim first waits for this replica's turn in the tick's claim order."""
    return JobLock(
        wiring,
        job=spec.name,
        lock_at_most_for=spec.lock_at_most_for,
        lock_at_least_for=spec.lock_at_least_for,
        ordered=ordered,
        grace=spec.grace,
    )


def job_runner(
    wiring: JobWiring,
    spec: JobSpec,
    lock: JobLock | None,
    is_leader: Callable[[], bool] | None = None,
) -> TickRunner:
    """The runner of job ``spec``, claiming through ``lock`` (``None``: uncoordinated)."""
    return TickRunner(
        spec,
        JobOwner(wiring.group, wiring.identity),
        lock=lock,
        is_leader=is_leader,
        metrics=wiring.metrics,
        clock=wiring.clock,
    )


class JobSite(Protocol):
    """Whose jobs a wiring serves: :class:`~k8slease.jobs.registry.Jobs` or
    :class:`~k8slease.jobs.ticklock.TickLock`, each validated at construction."""

    group: str
    namespace: str
    identity: str
    #: seconds: the bound of each request's connect
    request_timeout: float
    #: where the locks keep run records they could not write (:mod:`k8slease.jobs.journal`)
    journal: RunJournal


def site_names(group: str, namespace: str | None, identity: str | None) -> tuple[str, str, str]:
    """A site's group, namespace and identity, validated, the defaults of every k8slease face
    applied (the namespace rule of :func:`~k8slease.kube.identity.default_namespace`, the pod
    name plus a random suffix)."""
    namespace = validate_namespace(namespace or default_namespace())
    return validate_job_group(group), namespace, identity_or_default(identity)


def connect_jobs(
    site: JobSite,
    api_client: client.ApiClient,
    *,
    metrics: JobMetrics,
    clock: Clock,
    timing: ElectionTiming | None = None,
) -> JobWiring:
    """The wiring of ``site``'s jobs: one transport to its namespace (each request's connect
    bounded by its ``request_timeout``), one Event queue (bounded by what ``timing`` tolerates,
    see :func:`job_events`), fresh observations and no informer yet (:meth:`JobWiring.watched`)."""
    transport = LeaseTransport(api_client, site.namespace, request_timeout=site.request_timeout)
    events = job_events(api_client, site.namespace, site.identity, clock, timing)
    return JobWiring(
        group=site.group,
        identity=site.identity,
        transport=transport,
        events=events,
        observations=Observations(clock),
        metrics=metrics,
        clock=clock,
        journal=site.journal,
    )


def make_runners(
    specs: Iterable[JobSpec], wiring: JobWiring, *, is_leader: Callable[[], bool]
) -> dict[str, TickRunner]:
    """One :class:`TickRunner` per job; coordinated jobs get a lock on the shared transport."""
    runners: dict[str, TickRunner] = {}
    for spec in specs:
        lock = None
        if spec.coordinated:
            # only the leader fires LEADER jobs: nobody to take turns with
            lock = job_lock(wiring, spec, ordered=spec.mode is Mode.ONCE_PER_TICK)
        runners[spec.name] = job_runner(wiring, spec, lock, is_leader)
    return runners


def default_scheduler(loop: asyncio.AbstractEventLoop | None) -> BaseScheduler:
    """In UTC: an ``AsyncIOScheduler`` on ``loop`` (``async with jobs``, or ``start`` from a
    coroutine), else a ``BackgroundScheduler``."""
    if loop is not None:
        return AsyncIOScheduler(event_loop=loop, timezone=UTC)
    return BackgroundScheduler(timezone=UTC)


def schedule_jobs(
    scheduler: BaseScheduler,
    specs: Collection[JobSpec],
    runners: Mapping[str, TickRunner],
    *,
    group: str,
    machine: Callable[[], ElectionMachine | None],
    events: EventRecorder | None,
    clock: Clock,
    metrics: JobMetrics,
) -> DroppedTicks:
    """Add the tick executor and each scheduled job to ``scheduler`` (LEADER jobs paused: the
    leader resumes them) and, for LEADER jobs, the leaderless watch every replica runs; returns
    the listener (added too) that reports the ticks the scheduler drops."""
    on_loop = isinstance(scheduler, AsyncIOScheduler)
    executor = (
        TickAsyncIOExecutor()
        if on_loop
        else TickThreadPoolExecutor(max_workers=max(4, len(specs) + 2))
    )
    scheduler.add_executor(executor, alias=EXECUTOR_ALIAS)
    for spec in specs:
        if spec.trigger is None:
            continue
        scheduler.add_job(
            runners[spec.name].bind(on_loop=on_loop),
            trigger=spec.trigger,
            id=job_id(group, spec.name),
            name=spec.name,
            executor=EXECUTOR_ALIAS,
            coalesce=True,
            max_instances=1,
            misfire_grace_time=max(1, math.ceil(spec.grace)),
            replace_existing=True,
            **({"next_run_time": None} if spec.mode is Mode.LEADER else {}),
        )
        if spec.mode is Mode.LEADER:  # every replica: a tick at which nobody leads is lost
            scheduler.add_job(
                leaderless_watch(
                    runners[spec.name].losses, machine=machine, clock=clock, metrics=metrics
                ),
                trigger=spec.trigger,
                id=leaderless_id(group, spec.name),
                name=f"{spec.name} (leaderless watch)",
                # each tick its own run time: after a stall every tick the watch missed is a
                # missed event (DroppedTicks warns, issue 26), not folded into the newest
                coalesce=False,
                max_instances=1,
                replace_existing=True,
            )
    dropped = DroppedTicks(
        group=group,
        names={job_id(group, s.name): s.name for s in specs if s.trigger},
        events=events,
        metrics=metrics,
        watches={
            leaderless_id(group, s.name): s.name
            for s in specs
            if s.trigger and s.mode is Mode.LEADER
        },
    )
    scheduler.add_listener(dropped, DROPPED_MASK)
    return dropped


def set_leader_jobs(
    scheduler: BaseScheduler, specs: Iterable[JobSpec], *, group: str, running: bool
) -> None:
    """Resume (``running``) or pause the scheduled LEADER jobs among ``specs``."""
    for spec in specs:
        if spec.trigger is None:
            continue
        job = scheduler.get_job(job_id(group, spec.name))
        if job is None:
            continue
        if running:
            job.resume()
        else:
            job.pause()


def catch_up(scheduler: BaseScheduler, runners: list[TickRunner], *, now: datetime) -> None:
    """Schedule the catch-up of ``runners``' missed ticks on the ``k8slease`` executor."""
    schedule_catch_up(
        scheduler,
        runners,
        now=now,
        executor=EXECUTOR_ALIAS,
        on_loop=isinstance(scheduler, AsyncIOScheduler),
    )


def unschedule_jobs(
    scheduler: BaseScheduler,
    specs: Iterable[JobSpec],
    *,
    group: str,
    owned: bool,
    dropped: DroppedTicks | None,
    runners: Mapping[str, TickRunner] | None = None,
) -> None:
    """Undo :func:`schedule_jobs`: shut an ``owned`` scheduler down (waiting for running jobs,
    unless it runs on an event loop), else remove what was added to the user's scheduler.

    The ticks that came due while the shutdown waited for a run (its lock held, so no other
    replica could run them) are reported through ``dropped``."""
    if scheduler.state == STATE_STOPPED:
        return
    if owned:
        running = _running_jobs(scheduler, specs, group=group, runners=runners or {})
        scheduler.shutdown(wait=not isinstance(scheduler, AsyncIOScheduler))
        if dropped is not None and running:
            until = datetime.now(UTC)
            dropped.stopped_while_running(
                {
                    name: due_between(trigger, first, until)
                    for name, (trigger, first) in running.items()
                }
            )
        return
    if dropped is not None:
        scheduler.remove_listener(dropped)
    for spec in specs:
        for entry in (job_id(group, spec.name), leaderless_id(group, spec.name)):
            if scheduler.get_job(entry) is not None:
                scheduler.remove_job(entry)


def _running_jobs(
    scheduler: BaseScheduler,
    specs: Iterable[JobSpec],
    *,
    group: str,
    runners: Mapping[str, TickRunner],
) -> dict[str, tuple[Any, datetime | None]]:
    """The jobs whose run holds their lock now: each one's trigger and next run time."""
    running: dict[str, tuple[Any, datetime | None]] = {}
    for spec in specs:
        runner = runners.get(spec.name)
        job = scheduler.get_job(job_id(group, spec.name))
        if runner is None or runner.lock is None or job is None or not runner.lock.running:
            continue
        running[spec.name] = (job.trigger, job.next_run_time)
    return running


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop ``start()`` is called from (an ``AsyncIOScheduler`` binds to it too)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None

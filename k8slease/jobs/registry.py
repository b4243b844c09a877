"""The ``Jobs`` registry: APScheduler jobs that run with the coordination their class needs.

::

    jobs = Jobs("billing")

    @jobs.cron("0 2 * * *", mode=Mode.ONCE_PER_TICK, lock_at_most_for=900, lock_at_least_for=60)
    def nightly_invoices(ctx): ...

    @jobs.interval(seconds=30, mode=Mode.EVERY_REPLICA)
    def refresh_local_cache(ctx): ...

    @jobs.singleton(mode=Mode.LEADER)
    def poll_queue(ctx): ...

    jobs.run()   # or jobs.start() / jobs.stop(), or ``async with jobs:``

Every replica runs the same code. ONCE_PER_TICK ticks are claimed on the job's Lease
(``<group>.<job>``); LEADER jobs run only on the holder of the group's Lease (``<group>``) and
their scheduled ticks are claimed too, so even the rare overlap of two leaders cannot run a tick
twice. See ``docs/architecture.md`` for the flow and ``docs/operations.md`` for sizing.
"""

from __future__ import annotations

import asyncio
import math
import threading
import types
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, tzinfo
from typing import Any, TypeVar, Unpack

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.schedulers.base import STATE_STOPPED, BaseScheduler
from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger
from kubernetes import client

from k8slease.clock import Clock, SystemClock
from k8slease.election.context import LeadershipContext
from k8slease.election.elector import LeaderElector
from k8slease.election.timing import ElectionTiming
from k8slease.errors import ConfigError
from k8slease.jobs.apscompat import check_timezone, translate
from k8slease.jobs.catchup import schedule_catch_up
from k8slease.jobs.dropped import MASK as DROPPED_MASK
from k8slease.jobs.dropped import DroppedTicks
from k8slease.jobs.executors import TickAsyncIOExecutor, TickThreadPoolExecutor
from k8slease.jobs.lock import JobLock
from k8slease.jobs.lockcache import (
    DEFAULT_CLAIM_SPREAD,
    DEFAULT_CLAIM_STEP,
    ClaimCache,
    check_claim_spacing,
)
from k8slease.jobs.misfire import MisfirePolicy
from k8slease.jobs.runner import TickRunner
from k8slease.jobs.singletons import SingletonRun
from k8slease.jobs.spec import JobOptions, JobSpec, Mode, job_name_from
from k8slease.kube.apiclient import (
    api_client_if_configured,
    check_api_client,
    default_api_client,
)
from k8slease.kube.events import EventRecorder
from k8slease.kube.identity import default_identity, default_namespace
from k8slease.kube.options import flag, member
from k8slease.kube.options import seconds as check_seconds
from k8slease.kube.signals import SIGNAL_POLL, GracefulSignals, LoopWaker
from k8slease.kube.validate import validate_lease_name, validate_namespace
from k8slease.lease.informer import LeaseInformer
from k8slease.lease.observe import Observations
from k8slease.lease.transport import LeaseTransport
from k8slease.logs import get_logger
from k8slease.metrics import JobMetrics, default_job_metrics
from k8slease.names import LABEL_GROUP, LABEL_ROLE, ROLE_JOB

log = get_logger("k8slease.jobs")

F = TypeVar("F", bound=Callable[..., Any])

#: Interval ticks are counted from this instant, so that every replica computes the same ticks.
INTERVAL_ANCHOR = datetime(2000, 1, 1, tzinfo=UTC)
EXECUTOR_ALIAS = "k8slease"


class Jobs:
    """Scheduled jobs of one group of replicas, on an APScheduler 3 scheduler.

    ``group`` names the group's leader Lease and prefixes each job's lock Lease. ``namespace``
    defaults to ``POD_NAMESPACE``, then the in-cluster namespace, then ``default``. ``identity``
    defaults to ``POD_NAME`` (or the hostname) plus a random suffix. ``scheduler`` is an APScheduler
    ``BackgroundScheduler`` or ``AsyncIOScheduler`` of yours (default: one in UTC that ``Jobs``
    owns: an ``AsyncIOScheduler`` on the running loop when started from a coroutine, as ``async with
    jobs`` does, else a ``BackgroundScheduler``; ``async def`` jobs run on the loop, or with a
    thread scheduler in a loop of their own per run). ``api_client`` defaults to the in-cluster
    configuration, else the kubeconfig. ``election`` (an :class:`~k8slease.ElectionTiming`; default
    60/20/40 s) times the group's leader election, used only when a LEADER job is registered.
    ``request_timeout`` (seconds, default 10) bounds each lock call. ``metrics`` receives run and
    skip counts (default: Prometheus when prometheus-client is installed). ``clock`` (wall and
    monotonic time) is used by the locks, the runners and the election. ``handle_signals`` (default
    True, as for :class:`~k8slease.LeaderElector`): on ``start`` (so also ``run``, ``with`` and
    ``async with``) from the main thread, SIGTERM and SIGINT stop the jobs (the group Lease is
    released) and then reach the handler that was there before (the default SIGTERM action ends the
    process; SIGINT raises ``KeyboardInterrupt``). ``claim_step``
    (seconds, default 0.5) and ``claim_spread`` (default 3) space the replicas' claims of a tick:
    the replica ranked ``r`` for a tick tries after ``min(r, claim_spread) * claim_step`` seconds,
    and only if it has not seen the claim by then (see ``docs/operations.md``).
    """

    def __init__(
        self,
        group: str,
        *,
        namespace: str | None = None,
        identity: str | None = None,
        scheduler: BaseScheduler | None = None,
        api_client: client.ApiClient | None = None,
        election: ElectionTiming | None = None,
        request_timeout: float = 10.0,
        restart_delay: float = 5.0,
        clock: Clock | None = None,
        metrics: JobMetrics | None = None,
        handle_signals: bool = True,
        claim_step: float = DEFAULT_CLAIM_STEP,
        claim_spread: int = DEFAULT_CLAIM_SPREAD,
    ) -> None:
        self.group = validate_lease_name(group)
        if "." in group:
            raise ConfigError(
                f"group {group!r} must not contain '.' (job Leases are <group>.<job>)"
            )
        self.namespace = validate_namespace(namespace or default_namespace())
        if identity is not None and (not isinstance(identity, str) or not identity.strip()):
            raise ConfigError(f"identity must be a non-empty string, got {identity!r}")
        self.identity = identity or default_identity()
        if len(self.identity) > 253:
            raise ConfigError("identity must be at most 253 characters")
        if scheduler is not None and not isinstance(scheduler, BaseScheduler):
            raise ConfigError(f"scheduler must be an APScheduler 3 scheduler, got {scheduler!r}")
        self._scheduler = scheduler
        self._owns_scheduler = scheduler is None
        # a broken kubeconfig is an error here, not at start()
        self._api_client = (
            api_client_if_configured() if api_client is None else check_api_client(api_client)
        )
        if election is not None and not isinstance(election, ElectionTiming):
            raise ConfigError(f"election must be an ElectionTiming, got {election!r}")
        self.election = election or ElectionTiming()
        self.request_timeout = check_seconds("request_timeout", request_timeout, above=True)
        self.restart_delay = check_seconds("restart_delay", restart_delay)
        check_claim_spacing(claim_step, claim_spread)
        self.claim_step = float(claim_step)
        self.claim_spread = claim_spread
        self._clock = clock or SystemClock()
        self._metrics: JobMetrics = metrics or default_job_metrics()
        self._dropped: DroppedTicks | None = None
        self._specs: dict[str, JobSpec] = {}
        self.runners: dict[str, TickRunner] = {}
        self._elector: LeaderElector | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._informer: LeaseInformer | None = None
        self._singletons: list[SingletonRun] = []
        self._leading: threading.Event | None = None
        self._stopped = threading.Event()
        self._stop_finished = threading.Event()
        self.handle_signals = flag("handle_signals", handle_signals)
        self._signals = GracefulSignals(self.stop, what=f"jobs {group}")
        self._waker: LoopWaker | None = None
        self._started = False
        self._lock = threading.RLock()
        self._log = log.bind(group=group, identity=self.identity)

    # -- registration -------------------------------------------------------------------------

    def add(self, spec: JobSpec) -> JobSpec:
        """Register a job; raises ``ConfigError`` for a bad option or a duplicate name."""
        spec.validate()
        with self._lock:
            if self._started:
                raise ConfigError("register jobs before start()")
            if spec.name in self._specs:
                raise ConfigError(f"a job named {spec.name!r} is already registered")
            self._specs[spec.name] = spec
        return spec

    def cron(
        self,
        expression: str,
        *,
        mode: Mode = Mode.ONCE_PER_TICK,
        name: str | None = None,
        timezone: str | tzinfo = "UTC",
        **options: Unpack[JobOptions],
    ) -> Callable[[F], F]:
        """Register the decorated function on a five-field cron ``expression`` (in ``timezone``).

        ``lock_at_most_for`` (default 600 s) bounds how long a crashed holder blocks the job;
        ``lock_at_least_for`` (default 0) keeps the lock after a fast run. ``misfire`` (default
        COALESCE) and ``grace`` (default 300 s) decide what happens to ticks missed while every
        replica was down. ``fail_open`` runs the job everywhere when the API server is unreachable
        (default: skip).
        """
        zone = check_timezone(timezone)
        try:
            trigger = CronTrigger.from_crontab(expression, timezone=zone)
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"invalid cron expression {expression!r}: {exc}") from None

        return self._registrar(trigger, mode=mode, name=name, **options)

    def interval(
        self,
        *,
        seconds: float = 0,
        minutes: float = 0,
        hours: float = 0,
        days: float = 0,
        weeks: float = 0,
        mode: Mode = Mode.ONCE_PER_TICK,
        name: str | None = None,
        anchor: datetime = INTERVAL_ANCHOR,
        **options: Unpack[JobOptions],
    ) -> Callable[[F], F]:
        """Register the decorated function every ``weeks``/``days``/``hours``/``minutes``/
        ``seconds`` (added up).

        Ticks are counted from ``anchor`` (default 2000-01-01 UTC) so that all replicas agree on
        them. Other options as for :meth:`cron`.
        """
        total = (
            check_seconds("seconds", seconds)
            + 60 * check_seconds("minutes", minutes)
            + 3600 * check_seconds("hours", hours)
            + 86400 * check_seconds("days", days)
            + 604800 * check_seconds("weeks", weeks)
        )
        if total <= 0:
            raise ConfigError(
                "an interval must be longer than 0 seconds (seconds/minutes/hours/days/weeks)"
            )
        if not isinstance(anchor, datetime) or anchor.tzinfo is None:
            raise ConfigError("anchor must be timezone-aware")
        trigger = IntervalTrigger(seconds=total, start_date=anchor, timezone=UTC)

        return self._registrar(trigger, mode=mode, name=name, **options)

    def _registrar(
        self,
        trigger: BaseTrigger | None,
        *,
        mode: Mode,
        name: str | None,
        **options: Unpack[JobOptions],
    ) -> Callable[[F], F]:
        """A decorator that registers its function as a job on ``trigger``."""

        def register(func: F) -> F:
            spec_name = name or job_name_from(func)
            given: dict[str, Any] = translate(dict(options), job=spec_name)
            if "misfire" in given:  # a MisfirePolicy, or its value or name ("skip", "RUN_ALL")
                prefix = f"job {spec_name!r}: "
                given["misfire"] = member("misfire", given["misfire"], MisfirePolicy, prefix=prefix)
            self.add(JobSpec(name=spec_name, func=func, mode=mode, trigger=trigger, **given))
            return func

        return register

    def singleton(self, *, mode: Mode = Mode.LEADER, name: str | None = None) -> Callable[[F], F]:
        """Register a long-lived job: LEADER runs it on the leader only, EVERY_REPLICA everywhere.

        The function gets a context whose ``lost`` event is set when it must stop; it is restarted
        if it returns or raises while it should still run.
        """

        return self._registrar(None, mode=mode, name=name)

    # -- introspection ------------------------------------------------------------------------

    @property
    def specs(self) -> Mapping[str, JobSpec]:
        """The registered jobs by name."""
        return types.MappingProxyType(self._specs)

    @property
    def elector(self) -> LeaderElector | None:
        """The group's ``LeaderElector`` (``None`` until started, or when no job needs one)."""
        return self._elector

    @property
    def is_leader(self) -> bool:
        """Whether this replica currently leads its group."""
        return self._elector is not None and self._elector.is_leader

    def healthy(self) -> bool:
        """False when this replica believes it leads but has not renewed in time, or when its
        namespace does not exist (no job can ever run there): for liveness probes."""
        if self._namespace_missing():
            return False
        return self._elector is None or self._elector.healthy()

    def ready(self) -> bool:
        """True once started and, when jobs need the election, while it hears from the API
        server (``LeaderElector.ready``); false while the namespace is missing: for readiness
        probes."""
        if not self._started or self._namespace_missing():
            return False
        return bool(self._elector is None or self._elector.ready())

    def _namespace_missing(self) -> bool:
        """Whether the last claim of some job was refused because the namespace is missing."""
        return any(runner.namespace_missing for runner in list(self.runners.values()))

    @property
    def scheduler(self) -> BaseScheduler | None:
        return self._scheduler

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Start the scheduler (when owned), the election (when needed) and catch-up."""
        with self._lock:
            if self._started:
                return
            self._started = True
        if self.handle_signals:
            self._signals.install()
        self._loop = _running_loop()
        if self._loop is not None and self.handle_signals:  # a SIGTERM on another thread
            self._waker = LoopWaker(self._loop)
            self._waker.start()
        api_client = self._api_client or default_api_client()
        transport = LeaseTransport(api_client, self.namespace, request_timeout=self.request_timeout)
        events = EventRecorder(
            api_client, self.namespace, identity=self.identity, clock=self._clock
        )
        observations = Observations(self._clock)
        cache: ClaimCache | None = None
        if any(spec.coordinated for spec in self._specs.values()):
            self._informer = LeaseInformer(
                transport,
                observations,
                label_selector=f"{LABEL_GROUP}={self.group},{LABEL_ROLE}={ROLE_JOB}",
            )
            cache = ClaimCache(
                observations,
                self._informer.synced.is_set,
                step=self.claim_step,
                spread=self.claim_spread,
            )
            self._informer.start()
        for spec in self._specs.values():
            lock = None
            if spec.coordinated:
                lock = JobLock(
                    transport,
                    group=self.group,
                    job=spec.name,
                    identity=self.identity,
                    lock_at_most_for=spec.lock_at_most_for,
                    lock_at_least_for=spec.lock_at_least_for,
                    clock=self._clock,
                    events=events,
                    observations=observations,
                    cache=cache,
                    # only the leader fires LEADER jobs: nobody to take turns with
                    ordered=spec.mode is Mode.ONCE_PER_TICK,
                )
            self.runners[spec.name] = TickRunner(
                spec,
                group=self.group,
                identity=self.identity,
                lock=lock,
                is_leader=lambda: self.is_leader,
                metrics=self._metrics,
                clock=self._clock,
            )
        scheduler = self._scheduler or self._default_scheduler()
        self._scheduler = scheduler
        on_loop = isinstance(scheduler, AsyncIOScheduler)
        executor = (
            TickAsyncIOExecutor()
            if on_loop
            else TickThreadPoolExecutor(max_workers=max(4, len(self._specs) + 2))
        )
        scheduler.add_executor(executor, alias=EXECUTOR_ALIAS)
        for spec in self._specs.values():
            if spec.trigger is None:
                continue
            scheduler.add_job(
                self.runners[spec.name].bind(on_loop=on_loop),
                trigger=spec.trigger,
                id=self._job_id(spec.name),
                name=spec.name,
                executor=EXECUTOR_ALIAS,
                coalesce=True,
                max_instances=1,
                misfire_grace_time=max(1, math.ceil(spec.grace)),
                replace_existing=True,
                **({"next_run_time": None} if spec.mode is Mode.LEADER else {}),
            )
        self._dropped = DroppedTicks(
            group=self.group,
            names={self._job_id(s.name): s.name for s in self._specs.values() if s.trigger},
            events=events,
            metrics=self._metrics,
        )
        scheduler.add_listener(self._dropped, DROPPED_MASK)
        if scheduler.state == STATE_STOPPED:
            scheduler.start()
        self._log.info("jobs.started", jobs=sorted(self._specs), namespace=self.namespace)
        for spec in self._specs.values():
            if spec.trigger is None and spec.mode is Mode.EVERY_REPLICA:
                self._start_singleton(spec, self._stopped, None)
        self._catch_up([s for s in self._specs.values() if s.mode is Mode.ONCE_PER_TICK])
        if any(spec.mode is Mode.LEADER for spec in self._specs.values()):
            self._start_election(api_client)

    def _default_scheduler(self) -> BaseScheduler:
        """In UTC: an ``AsyncIOScheduler`` on the running loop (``async with jobs``, or ``start``
        from a coroutine), else a ``BackgroundScheduler``."""
        if self._loop is not None:
            return AsyncIOScheduler(event_loop=self._loop, timezone=UTC)
        return BackgroundScheduler(timezone=UTC)

    def stop(self) -> None:
        """Stop: step down (releasing the group Lease), stop singletons and the scheduler."""
        with self._lock:
            if not self._started or self._stopped.is_set():
                if not self._started:
                    self._stop_finished.set()
                self._stopped.set()
                return
            self._stopped.set()
        try:
            self._stop_parts()
        finally:
            self._signals.restore()
            if self._waker is not None:
                self._waker.stop()
            self._stop_finished.set()
        self._log.info("jobs.stopped")

    def _stop_parts(self) -> None:
        if self._elector is not None:
            self._elector.stop()
        if self._informer is not None:
            self._informer.stop()
        for run in list(self._singletons):
            run.stop(timeout=self.request_timeout)
        scheduler = self._scheduler
        if scheduler is not None and scheduler.state != STATE_STOPPED:
            if self._owns_scheduler:
                scheduler.shutdown(wait=not isinstance(scheduler, AsyncIOScheduler))
            else:
                if self._dropped is not None:
                    scheduler.remove_listener(self._dropped)
                for spec in self._specs.values():
                    if scheduler.get_job(self._job_id(spec.name)) is not None:
                        scheduler.remove_job(self._job_id(spec.name))

    def run(self, *, handle_signals: bool | None = None) -> None:
        """Start and block until :meth:`stop` has finished (or a handled signal stopped it).

        ``handle_signals`` overrides the constructor's option for this run.
        """
        if handle_signals is not None:
            self.handle_signals = flag("handle_signals", handle_signals)
        self.start()
        # Short waits: a signal another thread received is handled only between them (see
        # SIGNAL_POLL)
        while not self._stopped.wait(SIGNAL_POLL):
            pass
        # return only once stop() has finished: the scheduler waited for running jobs, whose
        # locks were released with their run records (SIGTERM in the middle of a run)
        while not self._stop_finished.wait(SIGNAL_POLL):
            pass

    def __enter__(self) -> Jobs:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> Jobs:
        """Start from async code; an ``AsyncIOScheduler`` binds to the running loop."""
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.stop)

    def fire(self, name: str, tick: datetime) -> str | None:
        """Run ``tick`` of job ``name`` now through its coordination, as a scheduler tick would.

        Returns the outcome, or ``None`` when this replica skipped the tick. For manual triggers,
        back-fills and tests; coroutine jobs are run in a fresh event loop.
        """
        runner = self.runners.get(name)
        if runner is None:
            raise KeyError(f"no started job named {name!r}")
        if tick.tzinfo is None:
            raise ConfigError("tick must be timezone-aware")
        if runner.spec.is_coroutine:
            return asyncio.run(runner.run_tick_async(tick))
        return runner.run_tick(tick)

    # -- internals ----------------------------------------------------------------------------

    def _job_id(self, name: str) -> str:
        return f"k8slease:{self.group}:{name}"

    def _catch_up(self, specs: list[JobSpec]) -> None:
        scheduler = self._scheduler
        assert scheduler is not None
        runners = [self.runners[spec.name] for spec in specs]
        schedule_catch_up(
            scheduler,
            runners,
            now=self._clock.now(),
            executor=EXECUTOR_ALIAS,
            on_loop=isinstance(scheduler, AsyncIOScheduler),
        )

    def _start_singleton(
        self, spec: JobSpec, lost: threading.Event, fencing_token: int | None
    ) -> None:
        run = SingletonRun(
            spec,
            group=self.group,
            identity=self.identity,
            lost=lost,
            fencing_token=fencing_token,
            restart_delay=self.restart_delay,
            loop=self._loop,
        )
        self._singletons.append(run)
        run.start()

    def _start_election(self, api_client: client.ApiClient) -> None:
        self._elector = LeaderElector(
            self.group,
            namespace=self.namespace,
            identity=self.identity,
            api_client=api_client,
            on_started_leading=self._on_started_leading,
            on_stopped_leading=self._on_stopped_leading,
            release_on_return=True,
            handle_signals=False,  # Jobs handles them: its stop stops the elector
            lease_duration=self.election.lease_duration,
            renew_interval=self.election.renew_interval,
            renew_deadline=self.election.renew_deadline,
            retry_interval=self.election.retry_interval,
            request_timeout=self.election.request_timeout,
            clock=self._clock,
        )
        self._elector.recontend_after_work = True  # the callback ends early only on an error
        self._elector.start()

    def _on_started_leading(self, ctx: LeadershipContext) -> None:
        """Leadership began: resume LEADER jobs, catch up, start singletons; block until lost."""
        scheduler = self._scheduler
        assert scheduler is not None
        leader_specs = [s for s in self._specs.values() if s.mode is Mode.LEADER]
        for spec in leader_specs:
            if spec.trigger is not None:
                scheduler.resume_job(self._job_id(spec.name))
        self._catch_up([s for s in leader_specs if s.trigger is not None])
        for spec in leader_specs:
            if spec.trigger is None:
                self._start_singleton(spec, ctx.lost, ctx.fencing_token)
        ctx.lost.wait()

    def _on_stopped_leading(self, ctx: LeadershipContext) -> None:
        """Leadership ended: stop firing LEADER jobs at once and stop the leader's singletons."""
        scheduler = self._scheduler
        if scheduler is not None and scheduler.state != STATE_STOPPED:
            for spec in self._specs.values():
                if spec.mode is Mode.LEADER and spec.trigger is not None:
                    job = scheduler.get_job(self._job_id(spec.name))
                    if job is not None:
                        job.pause()
        for run in [r for r in self._singletons if r.spec.mode is Mode.LEADER]:
            run.stop(timeout=0)
            self._singletons.remove(run)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop ``start()`` is called from (an ``AsyncIOScheduler`` binds to it too)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None

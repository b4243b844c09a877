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
import os
import threading
from datetime import datetime

from apscheduler.schedulers.base import STATE_STOPPED, BaseScheduler
from kubernetes import client

from k8slease.clock import Clock, SystemClock
from k8slease.election.elector import LeaderElector
from k8slease.election.leadership import LeadershipContext
from k8slease.election.seams import Seams
from k8slease.election.timing import ElectionTiming, with_request_timeout
from k8slease.errors import ConfigError
from k8slease.jobs.context import JobOwner
from k8slease.jobs.dropped import DroppedTicks
from k8slease.jobs.inprogress import wait_for_runs
from k8slease.jobs.journal import AUTO, RunJournal, journal_path
from k8slease.jobs.leaderruns import LeaderSingletons
from k8slease.jobs.lockcache import DEFAULT_CLAIM_SPREAD, DEFAULT_CLAIM_STEP, check_claim_spacing
from k8slease.jobs.registration import JobRegistrations
from k8slease.jobs.runner import TickRunner
from k8slease.jobs.singletons import SingletonRun
from k8slease.jobs.spec import JobSpec, Mode
from k8slease.jobs.wiring import (
    catch_up,
    connect_jobs,
    default_scheduler,
    make_runners,
    running_loop,
    schedule_jobs,
    set_leader_jobs,
    site_names,
    unschedule_jobs,
)
from k8slease.kube.apiclient import api_client_if_configured, check_api_client, default_api_client
from k8slease.kube.options import flag
from k8slease.kube.options import seconds as check_seconds
from k8slease.kube.signals import SIGNAL_POLL, GracefulSignals, LoopWaker
from k8slease.kube.validate import optional_namespace
from k8slease.lease.informer import LeaseInformer
from k8slease.logs import get_logger
from k8slease.metrics import JobMetrics, default_job_metrics

log = get_logger("k8slease.jobs")


class Jobs(JobRegistrations):
    """Scheduled jobs of one group of replicas, on an APScheduler 3 scheduler.

    ``group`` names the group's leader Lease and prefixes each job's lock Lease. ``namespace``
    defaults as everywhere in k8slease (``POD_NAMESPACE``, the in-cluster namespace, the
    kubeconfig context's, ``default``). ``identity``
    defaults to ``POD_NAME`` (or the hostname) plus a random suffix. ``scheduler`` is an APScheduler
    ``BackgroundScheduler`` or ``AsyncIOScheduler`` of yours (default: one in UTC that ``Jobs``
    owns: an ``AsyncIOScheduler`` on the running loop when started from a coroutine, as ``async with
    jobs`` does, else a ``BackgroundScheduler``; ``async def`` jobs run on the loop, or with a
    thread scheduler in a loop of their own per run). ``api_client`` defaults to the in-cluster
    configuration, else the kubeconfig. ``election`` (an :class:`~k8slease.ElectionTiming`; default
    60/20/40 s) times the group's leader election (run only when a LEADER job is registered) and
    holds the group's one request timeout, which bounds each connect of the election's, the
    locks' and the Events' requests (a claim or an extension may take as long as its result
    stays usable, :mod:`k8slease.jobs.lockbudget`): ``election.request_timeout``, by default
    ``min(10, renew_deadline / 3)``, so 10 s with the default timing. ``request_timeout`` sets
    it without an ``election`` (it must agree with ``election.request_timeout`` when both are
    given).
    ``metrics`` receives run and
    skip counts (default: Prometheus when prometheus-client is installed). ``clock`` (wall and
    monotonic time) is used by the locks, the runners and the election. ``handle_signals`` (default
    True, as for :class:`~k8slease.LeaderElector`): on ``start`` (so also ``run``, ``with`` and
    ``async with``) from the main thread, SIGTERM and SIGINT stop the jobs (the group Lease is
    released) and then reach the handler that was there before (the default SIGTERM action ends the
    process; SIGINT raises ``KeyboardInterrupt``). ``claim_step``
    (seconds, default 0.5) and ``claim_spread`` (default 3) space the replicas' claims of a tick:
    the replica ranked ``r`` for a tick tries after ``min(r, claim_spread) * claim_step`` seconds,
    and only if it has not seen the claim by then (see ``docs/operations.md``). ``journal``
    (default ``"auto"``: the container's ``/dev/termination-log`` when there is one, else no
    file; a path; or ``None``) is the file where a run record whose release could not be written
    is kept until it is, for the operator to write should this process die first
    (:mod:`k8slease.jobs.journal`).
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
        request_timeout: float | None = None,
        restart_delay: float = 5.0,
        clock: Clock | None = None,
        metrics: JobMetrics | None = None,
        handle_signals: bool = True,
        claim_step: float = DEFAULT_CLAIM_STEP,
        claim_spread: int = DEFAULT_CLAIM_SPREAD,
        journal: str | os.PathLike[str] | None = AUTO,
    ) -> None:
        # a namespace given explicitly ("" too) is checked; only None means the default
        self.group, self.namespace, self.identity = site_names(
            group, optional_namespace(namespace), identity
        )
        #: whose jobs these are, given to each singleton run
        self._owner = JobOwner(self.group, self.identity)
        if scheduler is not None and not isinstance(scheduler, BaseScheduler):
            raise ConfigError(f"scheduler must be an APScheduler 3 scheduler, got {scheduler!r}")
        self._scheduler = scheduler
        self._owns_scheduler = scheduler is None
        # a broken kubeconfig is an error here, not at start()
        self._api_client = (
            api_client_if_configured() if api_client is None else check_api_client(api_client)
        )
        self.election = with_request_timeout(election, request_timeout)
        #: the one request timeout of the group: its election's, its locks' and its Events'
        self.request_timeout = self.election.timeout
        self.restart_delay = check_seconds("restart_delay", restart_delay)
        check_claim_spacing(claim_step, claim_spread)
        self.claim_step = float(claim_step)
        self.claim_spread = claim_spread
        #: the run records its locks could not write, also in a file (the termination log)
        self.journal = RunJournal.at(journal_path(journal))
        self._clock = clock or SystemClock()
        self._metrics: JobMetrics = metrics or default_job_metrics()
        self._dropped: DroppedTicks | None = None
        self._specs: dict[str, JobSpec] = {}
        self.runners: dict[str, TickRunner] = {}
        self._elector: LeaderElector | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._informer: LeaseInformer | None = None
        #: EVERY_REPLICA singletons (until stop); LEADER ones are each term's work
        self._singletons: list[SingletonRun] = []
        self._leader_runs = LeaderSingletons()
        self._leading: threading.Event | None = None
        self._stopped = threading.Event()
        self._stop_finished = threading.Event()
        self.handle_signals = flag("handle_signals", handle_signals)
        self._signals = GracefulSignals(self._stop_on_signal, what=f"jobs {group}")
        #: how long a stop waits for the election (a signal's: ``renew_deadline``, as an elector)
        self._election_wait: float | None = None
        self._waker: LoopWaker | None = None
        self._started = False
        self._lock = threading.RLock()
        self._log = log.bind(group=group, identity=self.identity)

    # -- introspection ------------------------------------------------------------------------

    @property
    def elector(self) -> LeaderElector | None:
        """The group's ``LeaderElector`` (``None`` until started, or when no job needs one)."""
        return self._elector

    @property
    def is_leader(self) -> bool:
        """Whether this replica currently leads its group."""
        return self._elector is not None and self._elector.is_leader

    def healthy(self) -> bool:
        """False when this replica believes it leads but has not renewed in time, when its
        namespace does not exist (no job can ever run there), or while a thread of the election
        or the job informer has crashed and is not back: for liveness probes."""
        if self._namespace_missing():
            return False
        if self._informer is not None and not self._informer.threads.healthy():
            return False
        return self._elector is None or self._elector.healthy()

    def ready(self) -> bool:
        """True once started and, when jobs need the election, while it hears from the API
        server (``LeaderElector.ready``): for readiness probes. False while the last claim of
        some job was refused, because the namespace is missing or by the API server (403: RBAC
        does not cover its Lease; 422): this replica cannot run that job. True again once a
        claim of it is not refused (its next tick). A refusal by the API server leaves
        :meth:`healthy` true: a restart does not grant RBAC."""
        if not self._started or self._claims_refused():
            return False
        return bool(self._elector is None or self._elector.ready())

    def _claims_refused(self) -> bool:
        """Whether the last claim of some job was refused (the namespace missing, 403, 422)."""
        return any(
            runner.namespace_missing or runner.refused for runner in list(self.runners.values())
        )

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
        self._loop = running_loop()
        if self._loop is not None and self.handle_signals:  # a SIGTERM on another thread
            self._waker = LoopWaker(self._loop)
            self._waker.start()
        api_client = self._api_client or default_api_client()
        wiring = connect_jobs(
            self, api_client, metrics=self._metrics, clock=self._clock, timing=self.election
        )
        if any(spec.coordinated for spec in self._specs.values()):
            wiring, self._informer = wiring.watched(step=self.claim_step, spread=self.claim_spread)
        self.runners = make_runners(self._specs.values(), wiring, is_leader=lambda: self.is_leader)
        scheduler = self._scheduler or default_scheduler(self._loop)
        self._scheduler = scheduler
        self._dropped = schedule_jobs(
            scheduler,
            self._specs.values(),
            self.runners,
            group=self.group,
            machine=lambda: None if self._elector is None else self._elector.machine,
            events=wiring.events,
            clock=self._clock,
            metrics=self._metrics,
        )
        if scheduler.state == STATE_STOPPED:
            scheduler.start()
        self._log.info("jobs.started", jobs=sorted(self._specs), namespace=self.namespace)
        for spec in self._specs.values():
            if spec.trigger is None and spec.mode is Mode.EVERY_REPLICA:
                self._start_singleton(spec, self._stopped, None)
        once = [r for r in self.runners.values() if r.spec.mode is Mode.ONCE_PER_TICK]
        catch_up(scheduler, once, now=self._clock.now())
        if any(spec.mode is Mode.LEADER for spec in self._specs.values()):
            self._start_election(api_client)

    def stop(self) -> None:
        """Stop: step down (releasing the group Lease once the LEADER singletons have ended),
        stop singletons and the scheduler."""
        self._leader_runs.let_go_of_current()  # a LEADER singleton stopping the jobs
        with self._lock:
            if not self._started or self._stopped.is_set():
                if not self._started:
                    self._stop_finished.set()
                self._stopped.set()
                return
            self._stopped.set()
        if self._loop is not None and running_loop() is self._loop:
            self._log.warning(
                "jobs.stop_on_loop",
                consequence="the release does not wait for coroutine singletons or runs",
                hint="await asyncio.to_thread(jobs.stop), or async with jobs, waits for them",
            )
            self._leader_runs.let_go_of_coroutines()
        try:
            self._stop_parts()
        finally:
            self._signals.restore()
            if self._waker is not None:
                self._waker.stop()
            self._stop_finished.set()
        self._log.info("jobs.stopped")

    def _stop_on_signal(self) -> None:
        """A signal's stop: the election is waited for at most ``renew_deadline``, as the
        elector's own handler does; the process ends then, the Lease left to expire."""
        self._election_wait = self.election.renew_deadline
        self.stop()

    def _stop_parts(self) -> None:
        if self._elector is not None:
            self._elector.stop(timeout=self._election_wait)
        for runner in self.runners.values():
            runner.losses.ended()  # an outage still going on is reported with its count
        if self._informer is not None:
            self._informer.stop()
        self._leader_runs.stop()  # the elector waited for them (up to the end of the term)
        for run in list(self._singletons):
            run.stop(timeout=self.request_timeout)
        if self._scheduler is not None:
            unschedule_jobs(
                self._scheduler,
                self._specs.values(),
                group=self.group,
                owned=self._owns_scheduler,
                dropped=self._dropped,
                runners=self.runners,
            )
            if self._owns_scheduler and self._loop is not None:  # its runs cancelled on the loop
                wait_for_runs(self._loop, [r.runs for r in self.runners.values()], log=self._log)

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

    def _start_singleton(
        self, spec: JobSpec, lost: threading.Event, fencing_token: int | None
    ) -> None:
        leader = spec.mode is Mode.LEADER
        run = SingletonRun(
            spec,
            self._owner,
            lost=lost,
            fencing_token=fencing_token,
            restart_delay=self.restart_delay,
            loop=self._loop,
            on_end=self._leader_runs.ended if leader else None,
        )
        if leader:
            self._leader_runs.add(run)
        else:
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
            timing=self.election,  # validated once, in ElectionTiming
            seams=Seams(clock=self._clock),
        )
        self._elector.recontend_after_work = True  # the callback ends early only on an error
        self._elector.start()

    def _on_started_leading(self, ctx: LeadershipContext) -> None:
        """Leadership began: resume LEADER jobs, catch up, start singletons; block until lost,
        then until the singletons have ended: they are the term's work, so the elector does not
        release the Lease while one still runs (:mod:`~k8slease.jobs.leaderruns`)."""
        scheduler = self._scheduler
        assert scheduler is not None
        leader_specs = [s for s in self._specs.values() if s.mode is Mode.LEADER]
        set_leader_jobs(scheduler, leader_specs, group=self.group, running=True)
        scheduled = [self.runners[s.name] for s in leader_specs if s.trigger is not None]
        catch_up(scheduler, scheduled, now=self._clock.now())
        singletons = [spec for spec in leader_specs if spec.trigger is None]
        # an earlier term's singleton still finishing (that term lost its renewals): not twice
        if singletons and self._leader_runs.wait_for_earlier(ctx.lost):
            for spec in singletons:
                self._start_singleton(spec, ctx.lost, ctx.fencing_token)
        ctx.lost.wait()
        self._leader_runs.stop()  # also one started as _on_stopped_leading told the others
        self._leader_runs.wait_all()

    def _on_stopped_leading(self, ctx: LeadershipContext) -> None:
        """Leadership ended: stop firing LEADER jobs at once and stop the leader's singletons."""
        scheduler = self._scheduler
        if scheduler is not None and scheduler.state != STATE_STOPPED:
            leader_specs = [s for s in self._specs.values() if s.mode is Mode.LEADER]
            set_leader_jobs(scheduler, leader_specs, group=self.group, running=False)
        for runner in self.runners.values():
            runner.leadership_ended()  # a LEADER run in progress reads ctx.lost at once
        # told, not waited for: the term's work thread waits for them before the release
        self._leader_runs.stop()
        self._leader_runs.wake()

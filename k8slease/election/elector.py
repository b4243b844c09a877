"""``LeaderElector``: replicas contend for one ``coordination.k8s.io/v1`` Lease; one leads.

The public face of an election: it validates the options and wires the pure
:class:`~k8slease.election.machine.ElectionMachine` (the safety model:
:mod:`k8slease.lease.safety`) to the threads of
:class:`~k8slease.election.threads.ElectionRunner` (loop, watch, watchdog) and to
:class:`~k8slease.election.terms.TermCallbacks`, which runs ``on_started_leading(ctx)`` in a work
thread. As in client-go, returning from it does not end leadership; with
``release_on_return=True`` it is the leader's work, and when it returns or raises while this
replica still leads, the elector releases the Lease rather than lead with nothing running.

Leadership is re-entered after it is lost: a replica that stepped down is a candidate again.
Transitions are logged as structlog events (``leader.started``, ``leader.stopped``,
``leader.observed``, ``leader.released``) and counted by :mod:`k8slease.metrics`.
"""

from __future__ import annotations

import asyncio
import random
import signal
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from k8slease.clock import Clock, SystemClock
from k8slease.election.commands import Phase
from k8slease.election.hooks import LeadershipCallback, NewLeaderCallback
from k8slease.election.leadership import LeadershipContext
from k8slease.election.machine import ElectionMachine
from k8slease.election.seams import DEFAULT_SEAMS, Seams
from k8slease.election.terms import TermCallbacks
from k8slease.election.threads import ElectionRunner
from k8slease.election.timing import ElectionTiming, one_timing
from k8slease.errors import ConfigError
from k8slease.kube.apiclient import api_client_if_configured, check_api_client
from k8slease.kube.identity import default_namespace, identity_or_default
from k8slease.kube.options import flag
from k8slease.kube.signals import GracefulSignals
from k8slease.kube.validate import (
    election_group,
    optional_namespace,
    validate_lease_name,
    validate_namespace,
)
from k8slease.logs import get_logger
from k8slease.metrics import ElectorMetrics, default_metrics

if TYPE_CHECKING:
    import kubernetes.client

__all__ = ["LeaderElector", "LeadershipContext"]

_log = get_logger("k8slease.elector")


class LeaderElector:
    """Contend for the Lease ``name``; exactly one replica leads at a time.

    Options (keyword-only, defaults in brackets):

    * ``namespace`` [``POD_NAMESPACE``, else the in-cluster namespace file, else ``default``];
    * ``identity`` [``POD_NAME`` or the hostname, plus a short random suffix];
    * ``lease_duration`` [60.0] seconds, written as ``leaseDurationSeconds`` (whole, >= 1);
    * ``renew_interval`` [20.0] how often the leader renews;
    * ``renew_deadline`` [40.0] the leader steps down if no renew succeeded for this long,
      measured from when the last successful renew was sent;
    * ``retry_interval`` [5.0] candidates' poll period while no watch works (jittered);
    * unset timing options follow from the ones given (see :class:`~k8slease.ElectionTiming`):
      client-go's ``lease_duration=15, renew_deadline=10, retry_interval=2`` works as is;
    * ``timing`` [None] an :class:`~k8slease.ElectionTiming` instead of the five timing keywords
      (``request_timeout`` included): built and validated once, used as it is;
    * ``api_client`` [loaded in-cluster, else from the kubeconfig, at start];
    * ``release_on_stop`` [True] give the Lease back on stop so a candidate takes over at once;
    * ``on_started_leading(ctx)`` is called in its own thread when a term starts (it may block or
      return at once: returning does not end leadership, as in client-go); a coroutine function
      is run as a task and cancelled on loss;
    * ``release_on_return`` [False] treat ``on_started_leading`` as the leader's work: when it
      returns or raises while still leading, step down, release the Lease and stop (``run()``
      returns, ``wait()`` is true), as client-go's ``Run`` returns when leadership ends;
    * ``on_stopped_leading(ctx)`` runs when leadership ends, only after a matching start;
    * ``on_new_leader(identity)`` when the observed holder changes (``""``: nobody);
    * ``group`` [the Lease name] the ``k8slease.io/group`` label of a Lease it creates;
    * ``request_timeout`` [``min(10, renew_deadline / 3)``] bound of every connect and of the
      release; other requests get budgets from what is at stake (:mod:`k8slease.election.budgets`);
    * ``handle_signals`` [True] on ``start`` (so also ``with``) and ``run``, from the main thread:
      SIGTERM and SIGINT stop the elector (a leader releases the Lease, waiting at most
      ``renew_deadline``), then the signal goes on to the handler that was there before (the
      default SIGTERM action ends the process; SIGINT raises ``KeyboardInterrupt``); pass
      ``False`` to keep your own handling;
    * ``metrics`` [Prometheus when prometheus-client is installed, else none] where the
      transitions and renew latencies are counted (``PrometheusMetrics(registry)`` for a
      registry of yours);
    * ``seams`` [none] a :class:`~k8slease.election.seams.Seams` replacing the clock, the
      transport or the random source, for tests and custom integrations.

    Callbacks that take no argument are called without one. Exceptions they raise are logged and
    never stop the elector.
    """

    def __init__(
        self,
        name: str,
        *,
        namespace: str | None = None,
        identity: str | None = None,
        lease_duration: float | None = None,
        renew_interval: float | None = None,
        renew_deadline: float | None = None,
        retry_interval: float | None = None,
        timing: ElectionTiming | None = None,
        api_client: kubernetes.client.ApiClient | None = None,
        release_on_stop: bool = True,
        release_on_return: bool = False,
        on_started_leading: LeadershipCallback | None = None,
        on_stopped_leading: LeadershipCallback | None = None,
        on_new_leader: NewLeaderCallback | None = None,
        group: str | None = None,
        request_timeout: float | None = None,
        handle_signals: bool = True,
        metrics: ElectorMetrics | None = None,
        seams: Seams = DEFAULT_SEAMS,
    ) -> None:
        if not isinstance(seams, Seams):
            raise ConfigError(f"seams must be a Seams, got {seams!r}")
        self.name = validate_lease_name(name)
        self.namespace = optional_namespace(namespace) or validate_namespace(default_namespace())
        self.identity = identity_or_default(identity)
        self.group = election_group(self.name, group)
        self.timing = one_timing(
            timing,
            lease_duration=lease_duration,
            renew_interval=renew_interval,
            renew_deadline=renew_deadline,
            retry_interval=retry_interval,
            request_timeout=request_timeout,
        )
        for label, callback in (
            ("on_started_leading", on_started_leading),
            ("on_stopped_leading", on_stopped_leading),
            ("on_new_leader", on_new_leader),
        ):
            if callback is not None and not callable(callback):
                raise ConfigError(f"{label} must be callable, got {callback!r}")
        self.release_on_stop = flag("release_on_stop", release_on_stop)
        self.release_on_return = flag("release_on_return", release_on_return)
        #: the callbacks (settable until start, as ``wrap`` does)
        self.on_started_leading: LeadershipCallback | None = on_started_leading
        self.on_stopped_leading: LeadershipCallback | None = on_stopped_leading
        self.on_new_leader: NewLeaderCallback | None = on_new_leader
        if api_client is not None:
            check_api_client(api_client)
        elif seams.transport is None:  # a broken kubeconfig is an error here, not at start()
            api_client = api_client_if_configured()
        self.handle_signals = flag("handle_signals", handle_signals)
        self._api_client = api_client
        self._clock: Clock = seams.clock or SystemClock()
        metrics = metrics if metrics is not None else default_metrics()
        self._metrics = metrics
        rng = seams.rng or random.Random()
        log = _log.bind(lease=self.name, namespace=self.namespace, identity=self.identity)
        self._log = log
        machine = ElectionMachine(
            name=self.name,
            namespace=self.namespace,
            identity=self.identity,
            timing=self.timing,
            group=self.group,
            release_on_stop=self.release_on_stop,
            rng=rng,
        )
        own_threads: set[int] = set()
        #: with ``release_on_return``, whether the elector contends again after the work ended
        #: (``Jobs``, whose callback ends only on error) instead of stopping (the public promise)
        self.recontend_after_work = False
        self._terms = TermCallbacks(self, self._clock, metrics, log, own_threads, self._work_ended)
        self._runner = ElectionRunner(
            machine,
            clock=self._clock,
            metrics=metrics,
            rng=rng,
            log=log,
            on_events=self._terms.handle,
            may_release=self._terms.work_done,
            own_threads=own_threads,
            transport=seams.transport,
        )
        self._terms.believes = self._leads_in
        self._running = False
        self._thread: threading.Thread | None = None
        self._signals = GracefulSignals(
            lambda: self.stop(timeout=self.timing.renew_deadline), what=f"elector {self.name}"
        )

    # -- state ---------------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        """Whether this replica leads now (false from the moment its renew deadline passed)."""
        return self._runner.read(lambda m: m.believes_leading(self._clock.monotonic()))

    def _leads_in(self, term: int) -> bool:
        """Whether this replica leads now in ``term`` (what that term's ``ctx.lost`` reads)."""
        return self._runner.read(
            lambda m: m.term == term and m.believes_leading(self._clock.monotonic())
        )

    @property
    def leader(self) -> str:
        """The holder of the Lease as last observed; empty when nobody holds it."""
        return self._runner.read(lambda m: m.leader)

    @property
    def fencing_token(self) -> int | None:
        """The fencing token of this replica's current grant, ``None`` while not leading."""

        def token(machine: ElectionMachine) -> int | None:
            if not machine.believes_leading(self._clock.monotonic()):
                return None
            return machine.fencing_token

        return self._runner.read(token)

    @property
    def phase(self) -> Phase:
        """candidate, leader, releasing or stopped."""
        return self._runner.read(lambda m: m.phase)

    @property
    def machine(self) -> ElectionMachine:
        """The pure state machine this elector drives (to inspect; its state changes under you)."""
        return self._runner.machine

    def healthy(self, margin: float | None = None) -> bool:
        """False when this replica believes it leads but has not renewed for too long.

        "Too long" is ``renew_deadline + margin`` (default margin: ``renew_interval``) since the
        last successful renew was sent: the watchdog should have stepped down by then, so the
        process is stuck (what client-go's healthz adaptor checks). Also false when the election
        thread died. Candidates are healthy.
        """
        extra = self.timing.renew_interval if margin is None else margin
        runner = self._runner
        if not runner.threads.healthy():
            return False  # a thread of the election crashed and is not back (kube/supervise.py)
        if self._running and self._thread is not None and not self._thread.is_alive():
            return runner.finished.is_set() and runner.stop_requested.is_set()

        def fresh(machine: ElectionMachine) -> bool:
            if machine.phase is not Phase.LEADER or machine.last_success_sent_at is None:
                return True
            stale_at = machine.last_success_sent_at + self.timing.renew_deadline + extra
            return self._clock.monotonic() < stale_at

        return runner.read(fresh)

    def ready(self) -> bool:
        """True while the election runs and hears from the API server (for readiness probes):
        a healthy leader, or a candidate whose watch of the Lease is open."""
        if not self._running or self._runner.finished.is_set() or not self.healthy():
            return False
        now = self._clock.monotonic()
        # believes_leading, not the phase: past its renew deadline a leader is not ready even
        # in the moment before the watchdog steps it down (is_leader is already false then)
        return self._runner.read(lambda m: m.believes_leading(now) or m.watching)

    def wait_until_leading(self, timeout: float | None = None) -> bool:
        """Block until this replica leads (or ``timeout`` passes); returns whether it leads."""
        return self._terms.leading.wait(timeout) and self.is_leader

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the elector has stopped; returns whether it has."""
        return self._runner.finished.wait(timeout)

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> LeaderElector:
        """Run the election in a background thread; returns ``self``."""
        if self._running:
            raise RuntimeError("this LeaderElector was already started")
        self._prepare()
        self._thread = threading.Thread(
            target=self._run_guarded, name=f"k8slease-elector-{self.name}", daemon=True
        )
        self._thread.start()
        return self

    def run(self) -> None:
        """Run the election in this thread until :meth:`stop` (or a handled signal)."""
        if self._running:
            raise RuntimeError("this LeaderElector was already started")
        self._prepare()
        self._run_guarded()

    def stop(self, timeout: float | None = None) -> None:
        """Stop: a leader steps down (``on_stopped_leading``) and, by default, releases the Lease.

        Blocks until the election has ended (at most ``timeout`` seconds) unless called from one
        of the elector's own threads or callbacks, where it only asks. A release that fails is
        tried again until one lease duration after the term's last renew, so while the API
        server cannot be reached this may block up to ``lease_duration`` (the release is only
        sent once the leader's work has ended).
        """
        self.request_stop()
        if threading.get_ident() in self._runner.own_threads:
            return
        if self._running:
            self._runner.finished.wait(timeout)
        self._restore_signal_handlers()

    def request_stop(self) -> None:
        """Ask the elector to stop, without waiting."""
        self._runner.request_stop()

    def add_listener(self, listener: Callable[[bool], None]) -> None:
        """Call ``listener(True)`` when leadership starts and ``listener(False)`` when it ends.

        Listeners run in the elector's thread, before the callbacks; keep them quick (the asyncio
        integration uses one to set its events).
        """
        self._terms.add_listener(listener)

    def bind_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Run coroutine callbacks on ``loop`` (the asyncio integration binds its running loop)."""
        self._terms.loop = loop

    def install_signal_handlers(
        self, signals: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT)
    ) -> None:
        """Make ``signals`` stop the elector gracefully (release included), then reach the
        previous handler. Main thread only (elsewhere nothing is installed)."""
        self._signals.install(signals)

    def __enter__(self) -> LeaderElector:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- running -------------------------------------------------------------------------------

    def _prepare(self) -> None:
        if self._runner.transport is None:
            from k8slease.lease.transport import LeaseTransport

            api_client = self._api_client
            if api_client is None:
                from k8slease.kube.apiclient import default_api_client

                api_client = default_api_client()
            self._runner.transport = LeaseTransport(
                api_client, self.namespace, request_timeout=self.timing.timeout
            )
        if self.handle_signals:
            self._signals.install()
        # every elector exports its series from the start (0 until it leads), so an alert on
        # "nobody leads" has candidates' zeros to look at
        not_leading = getattr(self._metrics, "not_leading", None)  # optional in ElectorMetrics
        if callable(not_leading):
            not_leading(self.name)
        self._running = True
        self._log.info(
            "elector.starting",
            lease_duration=self.timing.lease_duration,
            renew_interval=self.timing.renew_interval,
            renew_deadline=self.timing.renew_deadline,
        )

    def _run_guarded(self) -> None:
        try:
            self._runner.run()
        finally:
            self._restore_signal_handlers()
            self._log.info("elector.stopped")
            self._runner.finished.set()

    def _restore_signal_handlers(self) -> None:
        self._signals.restore()

    def _work_ended(self, term: int, why: str) -> None:
        """``on_started_leading`` returned or raised in ``term`` with ``release_on_return``: the
        leader's work is over, so step down, release the Lease and stop (``run()`` returns, as
        client-go's ``Run`` does when leadership ends), or contend again for ``Jobs``."""
        if not self.recontend_after_work:
            self.request_stop()
            return
        runner = self._runner
        runner.step(lambda: runner.machine.abdicate(term, self._clock.monotonic(), why))

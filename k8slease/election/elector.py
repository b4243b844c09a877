"""``LeaderElector``: replicas contend for one ``coordination.k8s.io/v1`` Lease; one leads.

The runner around :class:`~k8slease.election.machine.ElectionMachine` (the pure decisions; see
:mod:`k8slease.lease.rules` for the safety model). It owns four kinds of thread:

* the **loop** executes the machine's commands (GET, create, conditional PUT) and sleeps until the
  next deadline or event;
* the **watch** streams changes of the Lease (field selector on its name), so candidates react to
  a release or an expiry at once and poll only while no watch works;
* the **watchdog** ends leadership at the renew deadline even while the loop is blocked in a
  request: ``on_stopped_leading`` runs then, before anything else can happen, and strictly before
  any other replica may take over (``renew_deadline < lease_duration``);
* the **work** thread runs ``on_started_leading(ctx)``. If it returns or raises while this replica
  still leads, the elector releases the Lease rather than lead with nothing running.

Leadership is re-entered after it is lost: a replica that stepped down is a candidate again.
Transitions are logged as structlog events (``leader.started``, ``leader.stopped``,
``leader.observed``, ``leader.released``) and counted by :mod:`k8slease.metrics`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import random
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import FrameType, TracebackType
from typing import Any, Protocol

import structlog

from k8slease.clock import Clock, SystemClock
from k8slease.election.machine import (
    Create,
    Done,
    ElectionMachine,
    Event,
    NewLeader,
    Phase,
    Purpose,
    Read,
    Released,
    StartedLeading,
    StoppedLeading,
    Update,
    Wait,
)
from k8slease.election.timing import (
    ElectionTiming,
    validate_label_value,
    validate_lease_name,
    validate_namespace,
)
from k8slease.errors import ConfigError, NotFound, TransportError, Unavailable
from k8slease.kube.identity import default_identity, default_namespace
from k8slease.lease.record import resource_version
from k8slease.lease.transport import WatchEvent
from k8slease.metrics import ElectorMetrics, default_metrics

_log = structlog.get_logger("k8slease.elector")

#: How long a watch stream stays open before it is renewed (seconds).
WATCH_TIMEOUT_SECONDS = 60


class LeaseAPI(Protocol):
    """The Lease calls the elector makes (``k8slease.lease.transport.LeaseTransport`` has them)."""

    def get(self, name: str) -> dict[str, Any]: ...

    def create(self, body: Mapping[str, Any]) -> dict[str, Any]: ...

    def replace(self, name: str, body: Mapping[str, Any]) -> dict[str, Any]: ...

    def watch(
        self,
        *,
        name: str | None = None,
        label_selector: str | None = None,
        resource_version: str | None = None,
        timeout_seconds: int = 300,
    ) -> Iterator[WatchEvent]: ...


@dataclass(eq=False)
class LeadershipContext:
    """What ``on_started_leading`` (and ``on_stopped_leading``) receive about one term.

    ``lost`` is set the moment leadership ends (renew deadline passed, Lease taken, stop); work
    must stop then. Coroutine callbacks are also cancelled. ``fencing_token`` grows with every
    grant of the Lease: pass it to systems you write to so they can reject a stale leader.
    ``term`` counts this elector's grants (1, 2, ...).
    """

    lease_name: str
    namespace: str
    identity: str
    fencing_token: int
    term: int
    lost: threading.Event = field(default_factory=threading.Event)
    _hooks: list[Callable[[], None]] = field(default_factory=list, repr=False)
    _hooks_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _on_lost(self, hook: Callable[[], None]) -> None:
        with self._hooks_lock:
            if not self.lost.is_set():
                self._hooks.append(hook)
                return
        hook()

    def _set_lost(self) -> None:
        with self._hooks_lock:
            self.lost.set()
            hooks, self._hooks = self._hooks, []
        for hook in hooks:
            try:
                hook()
            except Exception:  # pragma: no cover - cancellation hooks do not raise
                _log.exception("leader.cancel_failed", lease=self.lease_name)


def _accepts_argument(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` can be called with one positional argument (else it is called with none)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return True
    for parameter in signature.parameters.values():
        if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            return True
        if parameter.kind is parameter.VAR_POSITIONAL:
            return True
    return False


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
    * ``api_client`` [loaded in-cluster, else from the kubeconfig, at start];
    * ``release_on_stop`` [True] give the Lease back on stop so a candidate takes over at once;
    * ``on_started_leading(ctx)`` runs in its own thread while leading (may block; should return
      when ``ctx.lost`` is set); a coroutine function is run as a task and cancelled on loss;
    * ``on_stopped_leading(ctx)`` runs when leadership ends, only after a matching start;
    * ``on_new_leader(identity)`` when the observed holder changes (``""``: nobody);
    * ``group`` [the Lease name] the ``k8slease.io/group`` label of a Lease it creates;
    * ``request_timeout`` [``min(10, renew_deadline / 3)``] bound of every HTTP request;
    * ``handle_signals`` [False] on ``start``/``run``, make SIGTERM and SIGINT stop gracefully;
    * ``clock``, ``metrics``, ``transport``, ``rng`` for tests and custom integrations.

    Callbacks that take no argument are called without one. Exceptions they raise are logged and
    never stop the elector.
    """

    def __init__(
        self,
        name: str,
        *,
        namespace: str | None = None,
        identity: str | None = None,
        lease_duration: float = 60.0,
        renew_interval: float = 20.0,
        renew_deadline: float = 40.0,
        retry_interval: float = 5.0,
        api_client: Any = None,
        release_on_stop: bool = True,
        on_started_leading: Callable[..., Any] | None = None,
        on_stopped_leading: Callable[..., Any] | None = None,
        on_new_leader: Callable[[str], Any] | None = None,
        group: str | None = None,
        request_timeout: float | None = None,
        handle_signals: bool = False,
        clock: Clock | None = None,
        metrics: ElectorMetrics | None = None,
        transport: LeaseAPI | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.name = validate_lease_name(name)
        self.namespace = validate_namespace(namespace or default_namespace())
        if identity is not None and (not isinstance(identity, str) or not identity.strip()):
            raise ConfigError(f"identity must be a non-empty string, got {identity!r}")
        self.identity = identity or default_identity()
        if len(self.identity) > 253:
            raise ConfigError("identity must be at most 253 characters")
        self.group = validate_label_value(group or self.name, what="group")
        self.timing = ElectionTiming(
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
        self.release_on_stop = bool(release_on_stop)
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.on_new_leader = on_new_leader
        self.handle_signals = handle_signals
        self._api_client = api_client
        self._transport = transport
        self._clock: Clock = clock or SystemClock()
        self._metrics: ElectorMetrics = metrics if metrics is not None else default_metrics()
        self._rng = rng or random.Random()
        self._machine = ElectionMachine(
            name=self.name,
            namespace=self.namespace,
            identity=self.identity,
            timing=self.timing,
            group=self.group,
            release_on_stop=self.release_on_stop,
            rng=self._rng,
        )
        self._log = _log.bind(lease=self.name, namespace=self.namespace, identity=self.identity)
        # _lock guards the machine; _dispatch serialises "apply a result and run its callbacks"
        # so that on_stopped_leading always completes before a new term can start.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._dispatch = threading.RLock()
        self._generation = 0
        self._stop_requested = threading.Event()
        self._finished = threading.Event()
        self._leading = threading.Event()
        self._running = False
        self._thread: threading.Thread | None = None
        self._helpers: list[threading.Thread] = []
        self._own_threads: set[int] = set()
        self._ctx: LeadershipContext | None = None
        self._work: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._previous_handlers: dict[int, Any] = {}
        self._listeners: list[Callable[[bool], None]] = []

    # -- public API ----------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        """Whether this replica leads now (false from the moment its renew deadline passed)."""
        with self._lock:
            return self._machine.believes_leading(self._clock.monotonic())

    @property
    def leader(self) -> str:
        """The holder of the Lease as last observed; empty when nobody holds it."""
        with self._lock:
            return self._machine.leader

    @property
    def fencing_token(self) -> int | None:
        """The fencing token of this replica's current grant, ``None`` while not leading."""
        with self._lock:
            if not self._machine.believes_leading(self._clock.monotonic()):
                return None
            return self._machine.fencing_token

    @property
    def phase(self) -> Phase:
        """candidate, leader, releasing or stopped."""
        with self._lock:
            return self._machine.phase

    def healthy(self, margin: float | None = None) -> bool:
        """False when this replica believes it leads but has not renewed for too long.

        "Too long" is ``renew_deadline + margin`` (default margin: ``renew_interval``) since the
        last successful renew was sent: the watchdog should have stepped down by then, so the
        process is stuck (what client-go's healthz adaptor checks). Also false when the election
        thread died. Candidates are healthy.
        """
        extra = self.timing.renew_interval if margin is None else margin
        if self._running and self._thread is not None and not self._thread.is_alive():
            return self._finished.is_set() and self._stop_requested.is_set()
        with self._lock:
            machine = self._machine
            if machine.phase is not Phase.LEADER or machine.last_success_sent_at is None:
                return True
            stale_at = machine.last_success_sent_at + self.timing.renew_deadline + extra
            return self._clock.monotonic() < stale_at

    def ready(self) -> bool:
        """True while the election runs and hears from the API server (for readiness probes):
        a healthy leader, or a candidate whose watch of the Lease is open."""
        if not self._running or self._finished.is_set() or not self.healthy():
            return False
        with self._lock:
            machine = self._machine
            return machine.phase is Phase.LEADER or machine.watching

    def wait_until_leading(self, timeout: float | None = None) -> bool:
        """Block until this replica leads (or ``timeout`` passes); returns whether it leads."""
        return self._leading.wait(timeout) and self.is_leader

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the elector has stopped; returns whether it has."""
        return self._finished.wait(timeout)

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
        of the elector's own threads or callbacks, where it only asks.
        """
        self.request_stop()
        if threading.get_ident() in self._own_threads:
            return
        if self._running:
            self._finished.wait(timeout)
        self._restore_signal_handlers()

    def request_stop(self) -> None:
        """Ask the elector to stop, without waiting."""
        self._stop_requested.set()
        with self._cond:
            self._generation += 1
            self._cond.notify_all()
        self._close_watches()

    def add_listener(self, listener: Callable[[bool], None]) -> None:
        """Call ``listener(True)`` when leadership starts and ``listener(False)`` when it ends.

        Listeners run in the elector's thread, before the callbacks; keep them quick (the asyncio
        integration uses one to set its events).
        """
        self._listeners.append(listener)

    def _close_watches(self) -> None:
        closer = getattr(self._transport, "close_watches", None)
        if not callable(closer):
            return
        try:
            closer()
        except Exception:  # ending a stream early is best effort; the watch times out anyway
            self._log.debug("elector.close_watches_failed", exc_info=True)

    def install_signal_handlers(
        self, signals: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT)
    ) -> None:
        """Make ``signals`` stop the elector gracefully (release included). Main thread only."""
        for signum in signals:
            self._previous_handlers[int(signum)] = signal.signal(signum, self._on_signal)

    def __enter__(self) -> LeaderElector:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- running -------------------------------------------------------------------------------

    def _prepare(self) -> None:
        if self._transport is None:
            from k8slease.lease.transport import LeaseTransport

            api_client = self._api_client
            if api_client is None:
                from k8slease.kube.apiclient import default_api_client

                api_client = default_api_client()
            self._transport = LeaseTransport(
                api_client, self.namespace, request_timeout=self.timing.timeout
            )
        if self.handle_signals and threading.current_thread() is threading.main_thread():
            self.install_signal_handlers()
        self._running = True
        self._log.info(
            "elector.starting",
            lease_duration=self.timing.lease_duration,
            renew_interval=self.timing.renew_interval,
            renew_deadline=self.timing.renew_deadline,
        )

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        # A signal handler must not take locks the interrupted code may hold: hand off.
        threading.Thread(target=self.request_stop, name="k8slease-signal", daemon=True).start()

    def _spawn(self, target: Callable[[], None], label: str) -> threading.Thread:
        thread = threading.Thread(target=target, name=f"k8slease-{label}-{self.name}", daemon=True)
        thread.start()
        return thread

    def _run_guarded(self) -> None:
        self._own_threads.add(threading.get_ident())
        self._helpers = [
            self._spawn(self._watch_loop, "watch"),
            self._spawn(self._watchdog_loop, "watchdog"),
        ]
        try:
            self._loop_commands()
        except BaseException:
            self._log.exception("elector.crashed")
            raise
        finally:
            self._stop_requested.set()
            self._close_watches()
            with self._cond:
                self._generation += 1
                self._cond.notify_all()
            for helper in self._helpers:
                if helper is not threading.current_thread():
                    helper.join(timeout=self.timing.timeout + 1.0)
            self._restore_signal_handlers()
            self._log.info("elector.stopped")
            self._finished.set()

    def _restore_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for signum, handler in self._previous_handlers.items():
            signal.signal(signum, handler)
        self._previous_handlers.clear()

    def _loop_commands(self) -> None:
        machine = self._machine
        while True:
            with self._dispatch:
                with self._cond:
                    now = self._clock.monotonic()
                    if self._stop_requested.is_set() and not machine.stopping:
                        machine.stop(now)
                    command = machine.next_command(now, self._clock.now())
                    events = machine.drain_events()
                    generation = self._generation
                    self._cond.notify_all()
                self._handle(events)
            if isinstance(command, Done):
                return
            if isinstance(command, Wait):
                self._sleep(command.until, generation)
                continue
            if (
                isinstance(command, Read)
                and command.purpose is Purpose.RELEASE_READ
                and not self._await_work()
            ):
                with self._dispatch, self._cond:
                    machine.read_failed(
                        Unavailable("leadership work still running; not releasing"),
                        now=self._clock.monotonic(),
                    )
                continue
            self._execute(command)

    def _sleep(self, until: float | None, generation: int) -> None:
        with self._cond:
            if self._generation != generation or self._stop_requested.is_set():
                return
            timeout = None if until is None else max(0.0, until - self._clock.monotonic())
            if timeout == 0.0:
                return
            self._cond.wait(timeout)

    def _execute(self, command: Read | Create | Update) -> None:
        transport = self._transport
        assert transport is not None
        op = command.purpose.value
        sent = self._clock.monotonic()
        lease: dict[str, Any] | None = None
        error: TransportError | None = None
        try:
            if isinstance(command, Read):
                try:
                    lease = transport.get(self.name)
                except NotFound:
                    lease = None
            elif isinstance(command, Create):
                lease = transport.create(command.body)
            else:
                lease = transport.replace(self.name, command.body)
        except TransportError as exc:
            error = exc
        except Exception as exc:  # a bug or an unexpected client error: never kill the loop
            self._log.exception("elector.request_crashed", op=op)
            error = Unavailable(f"{op}: {type(exc).__name__}: {exc}")
        now = self._clock.monotonic()
        if error is not None:
            reason = type(error).__name__.lower()
            self._metrics.failed(self.name, op, reason)
            log_method = (
                self._log.debug if reason in ("conflict", "alreadyexists") else self._log.warning
            )
            log_method("elector.request_failed", op=op, reason=reason, error=str(error))
        elif command.purpose is Purpose.RENEW:
            self._metrics.renewed(self.name, now - sent)
        with self._dispatch:
            with self._cond:
                if isinstance(command, Read):
                    if error is None:
                        self._machine.read_done(lease, now=now)
                    else:
                        self._machine.read_failed(error, now=now)
                elif error is None:
                    assert lease is not None
                    self._machine.write_done(lease, sent_at=sent, now=now)
                else:
                    self._machine.write_failed(error, sent_at=sent, now=now)
                events = self._machine.drain_events()
                self._cond.notify_all()
            self._handle(events)

    def _await_work(self) -> bool:
        """Before a release: let the work thread of the ended term finish (up to its deadline)."""
        work = self._work
        if work is None or work is threading.current_thread() or not work.is_alive():
            return True
        limit = self._release_wait_until - self._clock.monotonic()
        work.join(timeout=max(0.0, limit))
        if work.is_alive():
            self._log.warning("leader.work_still_running", note="not releasing; the Lease expires")
            return False
        return True

    _release_wait_until: float = 0.0

    # -- watch ---------------------------------------------------------------------------------

    def _watch_loop(self) -> None:
        self._own_threads.add(threading.get_ident())
        transport = self._transport
        assert transport is not None
        since: str | None = None
        while not self._stop_requested.is_set():
            try:
                for event in transport.watch(
                    name=self.name, resource_version=since, timeout_seconds=WATCH_TIMEOUT_SECONDS
                ):
                    if self._stop_requested.is_set():
                        break
                    since = resource_version(event.lease) or since
                    with self._dispatch:
                        with self._cond:
                            now = self._clock.monotonic()
                            self._machine.set_watching(True, now)
                            if event.type in ("ADDED", "MODIFIED", "DELETED"):
                                self._machine.on_watch(
                                    event.lease, deleted=event.type == "DELETED", now=now
                                )
                            events = self._machine.drain_events()
                            self._generation += 1
                            self._cond.notify_all()
                        self._handle(events)
            except TransportError as exc:
                if exc.status == 410:
                    since = None
                self._watch_broken(str(exc))
            except Exception as exc:
                self._log.exception("elector.watch_crashed")
                self._watch_broken(f"{type(exc).__name__}: {exc}")

    def _watch_broken(self, why: str) -> None:
        if self._stop_requested.is_set():
            return
        with self._cond:
            self._machine.set_watching(False, self._clock.monotonic())
            self._generation += 1
            self._cond.notify_all()
        self._log.debug("elector.watch_failed", error=why)
        pause = min(self.timing.retry_interval, 1.0) * (0.5 + self._rng.random())
        self._stop_requested.wait(pause)

    # -- watchdog ------------------------------------------------------------------------------

    def _watchdog_loop(self) -> None:
        self._own_threads.add(threading.get_ident())
        while not self._finished.is_set():
            with self._cond:
                if self._stop_requested.is_set() and self._machine.phase is not Phase.LEADER:
                    return
                until = self._machine.leading_until
                now = self._clock.monotonic()
                if until is None or now < until:
                    wait = None if until is None else until - now
                    self._cond.wait(wait if wait is None else min(wait, 5.0))
                    continue
            with self._dispatch:
                with self._cond:
                    self._machine.check(self._clock.monotonic())
                    events = self._machine.drain_events()
                    self._generation += 1
                    self._cond.notify_all()
                self._handle(events)

    # -- events and callbacks ------------------------------------------------------------------

    def _handle(self, events: list[Event]) -> None:
        """Turn machine events into logs, metrics and callbacks; called with ``_dispatch`` held."""
        for event in events:
            if isinstance(event, StartedLeading):
                self._started(event)
            elif isinstance(event, StoppedLeading):
                self._stopped(event)
            elif isinstance(event, NewLeader):
                self._log.info(
                    "leader.observed", holder=event.holder, fencing_token=event.fencing_token
                )
                if self.on_new_leader is not None:
                    self._invoke("on_new_leader", self.on_new_leader, event.holder)
            elif isinstance(event, Released):
                self._log.info("leader.released", fencing_token=event.fencing_token)

    def _started(self, event: StartedLeading) -> None:
        ctx = LeadershipContext(
            lease_name=self.name,
            namespace=self.namespace,
            identity=self.identity,
            fencing_token=event.fencing_token,
            term=event.term,
        )
        self._ctx = ctx
        self._metrics.set_leader(self.name, self.identity, True)
        self._log.info(
            "leader.started",
            term=event.term,
            fencing_token=event.fencing_token,
            transitions=event.record.transitions,
        )
        self._leading.set()
        self._notify_listeners(True)
        callback = self.on_started_leading
        if callback is not None:
            self._work = threading.Thread(
                target=self._run_work,
                args=(callback, ctx),
                name=f"k8slease-leading-{self.name}-{event.term}",
                daemon=True,
            )
            self._work.start()

    def _stopped(self, event: StoppedLeading) -> None:
        ctx = self._ctx
        self._ctx = None
        self._leading.clear()
        self._release_wait_until = event.leading_until
        if ctx is not None:
            ctx._set_lost()
        self._notify_listeners(False)
        self._metrics.set_leader(self.name, self.identity, False)
        self._log.info(
            "leader.stopped",
            term=event.term,
            fencing_token=event.fencing_token,
            reason=event.reason,
        )
        if self.on_stopped_leading is not None and ctx is not None:
            self._invoke("on_stopped_leading", self.on_stopped_leading, ctx)

    def _notify_listeners(self, leading: bool) -> None:
        for listener in list(self._listeners):
            try:
                listener(leading)
            except Exception:
                self._log.exception("leader.listener_failed")

    def _run_work(self, callback: Callable[..., Any], ctx: LeadershipContext) -> None:
        self._own_threads.add(threading.get_ident())
        try:
            self._call(callback, ctx, wait=True, on_lost=ctx)
            why = "on_started_leading returned"
        except (asyncio.CancelledError, concurrent.futures.CancelledError):
            why = "on_started_leading was cancelled"
        except Exception as exc:
            self._log.exception("leader.callback_failed", callback="on_started_leading")
            why = f"on_started_leading raised {type(exc).__name__}: {exc}"
        if ctx.lost.is_set():
            return
        self._log.warning("leader.work_ended", term=ctx.term, reason=why)
        with self._dispatch:
            with self._cond:
                self._machine.abdicate(ctx.term, self._clock.monotonic(), why)
                events = self._machine.drain_events()
                self._generation += 1
                self._cond.notify_all()
            self._handle(events)

    def _invoke(self, label: str, callback: Callable[..., Any], arg: Any) -> None:
        try:
            self._call(callback, arg, wait=True)
        except Exception:
            self._log.exception("leader.callback_failed", callback=label)

    def _call(
        self,
        callback: Callable[..., Any],
        arg: Any,
        *,
        wait: bool,
        on_lost: LeadershipContext | None = None,
    ) -> Any:
        """Call ``callback`` (sync or coroutine function), with ``arg`` when it takes one.

        Coroutines run on the integration's event loop when there is one (see
        :mod:`k8slease.election.aio`), else on a private loop in this thread; ``on_lost`` cancels
        them.
        """
        args = (arg,) if _accepts_argument(callback) else ()
        if not inspect.iscoroutinefunction(callback):
            return callback(*args)
        loop = self._loop
        if loop is not None and loop.is_running():
            future = asyncio.run_coroutine_threadsafe(callback(*args), loop)
            if on_lost is not None:

                def cancel_future() -> None:
                    future.cancel()

                on_lost._on_lost(cancel_future)
            return future.result() if wait else None
        return asyncio.run(_cancellable(callback(*args), on_lost))


async def _cancellable(coro: Any, ctx: LeadershipContext | None) -> Any:
    task = asyncio.ensure_future(coro)
    if ctx is not None:
        loop = asyncio.get_running_loop()

        def cancel_task() -> None:
            loop.call_soon_threadsafe(task.cancel)

        ctx._on_lost(cancel_task)
    return await task

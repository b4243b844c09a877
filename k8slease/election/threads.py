"""The threads that drive an :class:`~k8slease.election.machine.ElectionMachine` against the API.

* the **loop** executes the machine's commands (GET, create, conditional PUT) and sleeps until the
  next deadline or event;
* the **watch** streams changes of the Lease (field selector on its name), so candidates react to
  a release or an expiry at once and poll only while no watch works;
* the **watchdog** ends leadership at the renew deadline even while the loop is blocked in a
  request, so ``on_stopped_leading`` runs strictly before any other replica may take over
  (``renew_deadline < lease_duration``).

Every input reaches the machine through :meth:`ElectionRunner.step`: feed the machine under its
lock, drain the events it produced, wake the sleepers, then hand the events to the callbacks,
all while holding the dispatch lock, so ``on_stopped_leading`` always completes before a new
term can start.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from k8slease.clock import Clock
from k8slease.election.budgets import election_budget
from k8slease.election.commands import Create, Done, Event, Phase, Purpose, Read, Update, Wait
from k8slease.election.machine import ElectionMachine
from k8slease.errors import AlreadyExists, Conflict, TransportError, Unavailable
from k8slease.kube.backoff import backoff_delay
from k8slease.kube.complaints import RepeatedErrors
from k8slease.kube.signals import wait_cap
from k8slease.kube.supervise import ThreadHealth
from k8slease.lease.budget import request_budget
from k8slease.lease.store import LeaseStore
from k8slease.lease.transport import LeaseAPI
from k8slease.lease.view import LeaseView
from k8slease.logs import Logger
from k8slease.metrics import ElectorMetrics

R = TypeVar("R")

#: The requests of a release: held back while the ended term's work still runs.
_RELEASING = frozenset({Purpose.RELEASE_READ, Purpose.RELEASE})

#: How long a watch stream stays open before it is renewed (seconds).
WATCH_TIMEOUT_SECONDS = 60

#: The first pause after a watch failed; it doubles with each failure in a row, up to
#: ``retry_interval`` (jittered down to half of it).
WATCH_BACKOFF_INITIAL = 0.5


class ElectionRunner:
    """Runs one election: the loop in the calling thread, the watch and watchdog beside it.

    ``on_events`` turns the machine's events into callbacks; ``may_release`` is asked before a
    release (false while the ended term's work still runs).
    """

    def __init__(
        self,
        machine: ElectionMachine,
        *,
        clock: Clock,
        metrics: ElectorMetrics,
        rng: random.Random,
        log: Logger,
        on_events: Callable[[list[Event]], None],
        may_release: Callable[[], bool],
        own_threads: set[int],
        transport: LeaseAPI | None = None,
    ) -> None:
        self.machine = machine
        self.name = machine.name
        self.timing = machine.timing
        self.transport = transport
        self._clock = clock
        self._metrics = metrics
        self._rng = rng
        self._log = log
        self._on_events = on_events
        self._may_release = may_release
        # _lock guards the machine; _dispatch serialises "apply a result and run its callbacks".
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._dispatch = threading.RLock()
        self._generation = 0
        self.stop_requested = threading.Event()
        self.finished = threading.Event()
        #: idents of the threads that run the election and its callbacks (stop() only asks there)
        self.own_threads = own_threads
        self.errors = RepeatedErrors(log, namespace=machine.namespace)
        #: the election's threads that crashed (``LeaderElector.healthy`` fails while any is)
        self.threads = ThreadHealth()
        self._watch_failures = 0

    # -- the machine, under its lock -----------------------------------------------------------

    def read(self, look: Callable[[ElectionMachine], R]) -> R:
        """``look(machine)`` under the machine's lock (for cheap state queries)."""
        with self._lock:
            return look(self.machine)

    def step(self, feed: Callable[[], R], *, wake: bool = True) -> R:
        """Feed the machine, drain its events, notify the sleepers, run the callbacks.

        ``feed`` runs under the machine's lock; ``wake`` also ends the loop's current sleep.
        """
        with self._dispatch:
            with self._cond:
                result = feed()
                events = self.machine.drain_events()
                if wake:
                    self._generation += 1
                self._cond.notify_all()
            self._on_events(events)
        return result

    def request_stop(self) -> None:
        """Ask the election to end (a leader steps down first), without waiting."""
        self.stop_requested.set()
        self._wake()
        self.close_watches()

    def close_watches(self) -> None:
        if self.transport is None:
            return
        try:
            self.transport.close_watches()
        except Exception:  # ending a stream early is best effort; the watch times out anyway
            self._log.debug("elector.close_watches_failed", exc_info=True)

    def _wake(self) -> None:
        with self._cond:
            self._generation += 1
            self._cond.notify_all()

    # -- running -------------------------------------------------------------------------------

    def run(self) -> None:
        """Run the election in this thread until it is done (after a stop)."""
        self.own_threads.add(threading.get_ident())
        helpers = [self._spawn(self._watch_loop, "watch"), self._spawn(self._watchdog, "watchdog")]
        try:
            self._loop_commands()
        except Exception as exc:
            self.threads.crashed("elector", exc, log=self._log, for_good=True)
            raise
        except BaseException:
            self._log.exception("elector.crashed")
            raise
        finally:
            self.own_threads.discard(threading.get_ident())
            self.stop_requested.set()
            self.close_watches()
            self._wake()
            for helper in helpers:
                if helper is not threading.current_thread():
                    helper.join(timeout=self.timing.timeout + 1.0)

    def _spawn(self, target: Callable[[], None], label: str) -> threading.Thread:
        def own() -> None:
            ident = threading.get_ident()
            self.own_threads.add(ident)
            try:
                target()
            finally:  # idents are reused by later threads: forget it (see TermCallbacks)
                self.own_threads.discard(ident)

        thread = threading.Thread(target=own, name=f"k8slease-{label}-{self.name}", daemon=True)
        thread.start()
        return thread

    def _next_command(self) -> tuple[Any, int]:
        now = self._clock.monotonic()
        if self.stop_requested.is_set() and not self.machine.stopping:
            self.machine.stop(now)
        return self.machine.next_command(now, self._clock.now()), self._generation

    def _loop_commands(self) -> None:
        while True:
            command, generation = self.step(self._next_command, wake=False)
            if isinstance(command, Done):
                return
            if isinstance(command, Wait):
                self._sleep(command.until, generation)
                continue
            if command.purpose in _RELEASING and not self._may_release():
                self.step(self._release_postponed, wake=False)
                continue
            self._execute(command)

    def _release_postponed(self) -> None:
        self.machine.release_postponed(self._clock.monotonic())

    def _sleep(self, until: float | None, generation: int) -> None:
        with self._cond:
            if self._generation != generation or self.stop_requested.is_set():
                return
            timeout = None if until is None else max(0.0, until - self._clock.monotonic())
            if timeout == 0.0:
                return
            # run() in the main thread: wake often enough for signal handlers to run; waking
            # early is harmless (the machine is asked for its next command again)
            self._clock.wait(self._cond, wait_cap(timeout))

    def _leases(self) -> LeaseStore:
        """The transport (set late by the elector) as decoded Leases."""
        assert self.transport is not None
        return LeaseStore(self.transport)

    def _request(self, command: Read | Create | Update) -> LeaseView | None:
        leases = self._leases()
        if isinstance(command, Read):
            return leases.find(self.name)
        if isinstance(command, Create):
            return leases.create(command.body)
        return leases.replace(self.name, command.body)

    def _execute(self, command: Read | Create | Update) -> None:
        op = command.purpose.value
        sent = self._clock.monotonic()
        lease: LeaseView | None = None
        error: TransportError | None = None
        budget = election_budget(
            command.purpose,
            timing=self.timing,
            now=sent,
            leading_until=self.read(lambda machine: machine.leading_until),
        )
        try:
            with request_budget(budget, connect=self.timing.timeout):
                lease = self._request(command)
        except TransportError as exc:
            error = exc
        except Exception as exc:  # a bug or an unexpected client error: never kill the loop
            self._log.exception("elector.request_crashed", op=op)
            error = Unavailable(f"{op}: {type(exc).__name__}: {exc}")
        now = self._clock.monotonic()
        if error is not None:
            reason = type(error).__name__.lower()
            self._metrics.failed(self.name, op, reason)
            if isinstance(error, Conflict | AlreadyExists):  # someone else wrote first
                self._log.debug("elector.request_failed", op=op, reason=reason, error=str(error))
            else:  # logged once with a hint, then counted (the machine backs off)
                self.errors.failed(op, error)
        else:
            self.errors.succeeded(op)
            if command.purpose is Purpose.RENEW:
                self._metrics.renewed(self.name, now - sent)

        def feed() -> None:
            if isinstance(command, Read):
                if error is None:
                    self.machine.read_done(lease, now=now)
                else:
                    self.machine.read_failed(error, now=now)
            elif error is None:
                assert lease is not None
                self.machine.write_done(lease, sent_at=sent, now=now)
            else:
                self.machine.write_failed(error, sent_at=sent, now=now)

        self.step(feed, wake=False)

    # -- watch ---------------------------------------------------------------------------------

    def _watch_loop(self) -> None:
        leases = self._leases()
        since: str | None = None
        while not self.stop_requested.is_set():
            try:
                for event in leases.watch(
                    name=self.name, resource_version=since, timeout_seconds=WATCH_TIMEOUT_SECONDS
                ):
                    if self.stop_requested.is_set():
                        break
                    if self._watch_failures:
                        self._watch_failures = 0
                        self.errors.succeeded("watch")
                    self.threads.recovered("watch", log=self._log)
                    since = event.view.resource_version or since

                    def feed(kind: str = event.type, lease: LeaseView = event.view) -> None:
                        now = self._clock.monotonic()
                        self.machine.set_watching(True, now)
                        if kind in ("ADDED", "MODIFIED", "DELETED"):
                            self.machine.on_watch(lease, deleted=kind == "DELETED", now=now)

                    self.step(feed)
            except TransportError as exc:
                if exc.status == 410:
                    since = None
                    self._watch_broken(None)
                else:
                    self._watch_broken(exc)
            except Exception as exc:
                self.threads.crashed(
                    "watch", exc, log=self._log, for_good=False, event="elector.watch_crashed"
                )
                self._watch_broken(Unavailable(f"watch: {type(exc).__name__}: {exc}"))

    def _watch_broken(self, error: TransportError | None) -> None:
        """The watch ended with ``error`` (None: expired, restart at once): back off, then retry.

        Failures in a row double the pause from ``WATCH_BACKOFF_INITIAL`` up to
        ``retry_interval``, jittered; candidates poll meanwhile.
        """
        if self.stop_requested.is_set():
            return
        with self._cond:
            self.machine.set_watching(False, self._clock.monotonic())
            self._generation += 1
            self._cond.notify_all()
        if error is None:
            return
        self._watch_failures = self.errors.failed("watch", error)
        pause = backoff_delay(
            self._watch_failures,
            initial=WATCH_BACKOFF_INITIAL,
            cap=self.timing.retry_interval,
            rng=self._rng,
        )
        self.stop_requested.wait(pause)

    # -- watchdog ------------------------------------------------------------------------------

    def _watchdog(self) -> None:
        try:
            self._watch_deadline()
        except Exception as exc:
            # a leader past its deadline would never step down: stop the election instead
            self.threads.crashed("watchdog", exc, log=self._log, for_good=True)
            self.request_stop()

    def _watch_deadline(self) -> None:
        while not self.finished.is_set():
            with self._cond:
                if self.stop_requested.is_set() and self.machine.phase is not Phase.LEADER:
                    return
                until = self.machine.leading_until
                now = self._clock.monotonic()
                if until is None or now < until:
                    wait = None if until is None else until - now
                    self._clock.wait(self._cond, wait if wait is None else min(wait, 5.0))
                    continue
            self.step(lambda: self.machine.check(self._clock.monotonic()))

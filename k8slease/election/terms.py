"""Leadership terms as the app sees them: machine events -> logs, metrics, listeners, callbacks.

:class:`TermCallbacks` receives the events an
:class:`~k8slease.election.machine.ElectionMachine` produced (from the runner, with its dispatch
lock held) and turns them into a :class:`~k8slease.election.leadership.LeadershipContext`, the
``on_started_leading`` work thread, ``on_stopped_leading`` and ``on_new_leader``. As in client-go,
``on_started_leading`` is a notification: returning (or raising, which is logged) does not end the
term. With ``release_on_return`` the callback is the leader's work instead, and the term is ended
(``abdicate``) when it returns or raises rather than lead with nothing running.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import threading
from collections.abc import Callable
from functools import partial
from typing import Any, Protocol

from k8slease.callbacks import accepts_argument, run_cancellable
from k8slease.clock import Clock
from k8slease.election.commands import Event, NewLeader, Released, StartedLeading, StoppedLeading
from k8slease.election.hooks import LeadershipCallback, NewLeaderCallback
from k8slease.election.leadership import LeadershipContext, TermLost
from k8slease.logs import Logger
from k8slease.metrics import ElectorMetrics


class ElectionCallbacks(Protocol):
    """Whose terms these are, and where the app's callbacks are read from when they are due
    (the elector: its Lease, namespace, identity and callback attributes)."""

    name: str
    namespace: str
    identity: str
    on_started_leading: LeadershipCallback | None
    on_stopped_leading: LeadershipCallback | None
    on_new_leader: NewLeaderCallback | None
    release_on_return: bool


def _still(term: int) -> bool:
    return True


class TermCallbacks:
    """Runs the callbacks of each term of one elector."""

    def __init__(
        self,
        callbacks: ElectionCallbacks,
        clock: Clock,
        metrics: ElectorMetrics,
        log: Logger,
        own_threads: set[int],
        abdicate: Callable[[int, str], None],
    ) -> None:
        self.callbacks = callbacks
        self.lease_name = callbacks.name
        self.identity = callbacks.identity
        self.loop: asyncio.AbstractEventLoop | None = None
        self.leading = threading.Event()
        self._clock = clock
        self._metrics = metrics
        self._log = log
        self._own_threads = own_threads
        self._abdicate = abdicate
        self._ctx: LeadershipContext | None = None
        self._work: threading.Thread | None = None
        self._release_wait_until = 0.0
        self._listeners: list[Callable[[bool], None]] = []
        #: whether this replica still leads in the given term, read now (set by the elector)
        self.believes: Callable[[int], bool] = _still

    def add_listener(self, listener: Callable[[bool], None]) -> None:
        self._listeners.append(listener)

    def handle(self, events: list[Event]) -> None:
        """Turn machine events into logs, metrics and callbacks (dispatch lock held)."""
        for event in events:
            if isinstance(event, StartedLeading):
                self._started(event)
            elif isinstance(event, StoppedLeading):
                self._stopped(event)
            elif isinstance(event, NewLeader):
                self._log.info(
                    "leader.observed", holder=event.holder, fencing_token=event.fencing_token
                )
                if self.callbacks.on_new_leader is not None:
                    self._invoke("on_new_leader", self.callbacks.on_new_leader, event.holder)
            elif isinstance(event, Released):
                self._log.info("leader.released", fencing_token=event.fencing_token)

    def work_done(self) -> bool:
        """Before a release: let the ended term's work finish (up to its deadline)."""
        work = self._work
        if work is None or work is threading.current_thread() or not work.is_alive():
            return True
        limit = self._release_wait_until - self._clock.monotonic()
        work.join(timeout=max(0.0, limit))
        if work.is_alive():
            self._log.warning("leader.work_still_running", note="not releasing; the Lease expires")
            return False
        return True

    def _started(self, event: StartedLeading) -> None:
        who = self.callbacks
        ctx = LeadershipContext(
            who.name, who.namespace, who.identity, event.fencing_token, event.term
        )
        if isinstance(ctx.lost, TermLost):
            ctx.lost.leading = partial(self.believes, event.term)
        self._ctx = ctx
        self._metrics.set_leader(self.lease_name, True)
        self._log.info(
            "leader.started",
            term=event.term,
            fencing_token=event.fencing_token,
            transitions=event.record.transitions,
        )
        self.leading.set()
        self._notify_listeners(True)
        callback = self.callbacks.on_started_leading
        if callback is not None:
            self._work = threading.Thread(
                target=self._run_work,
                args=(callback, ctx),
                name=f"k8slease-leading-{self.lease_name}-{event.term}",
                daemon=True,
            )
            self._work.start()

    def _stopped(self, event: StoppedLeading) -> None:
        ctx = self._ctx
        self._ctx = None
        self.leading.clear()
        self._release_wait_until = event.leading_until
        if ctx is not None:
            ctx.mark_lost()
        self._notify_listeners(False)
        self._metrics.set_leader(self.lease_name, False)
        self._log.info(
            "leader.stopped",
            term=event.term,
            fencing_token=event.fencing_token,
            reason=event.reason,
        )
        if self.callbacks.on_stopped_leading is not None and ctx is not None:
            self._invoke("on_stopped_leading", self.callbacks.on_stopped_leading, ctx)

    def _notify_listeners(self, leading: bool) -> None:
        for listener in list(self._listeners):
            try:
                listener(leading)
            except Exception:
                self._log.exception("leader.listener_failed")

    def _run_work(self, callback: Callable[..., Any], ctx: LeadershipContext) -> None:
        ident = threading.get_ident()
        self._own_threads.add(ident)
        try:
            self._work_then_maybe_abdicate(callback, ctx)
        finally:
            # A finished thread's ident is reused by the next thread started (often the SIGTERM
            # handler's stop thread): left in the set, that stop() would only ask, not wait for
            # the release, and the process would end holding the Lease.
            self._own_threads.discard(ident)

    def _work_then_maybe_abdicate(
        self, callback: Callable[..., Any], ctx: LeadershipContext
    ) -> None:
        raised = False
        try:
            self._call(callback, ctx, ctx)
            why = "on_started_leading returned"
        except (asyncio.CancelledError, concurrent.futures.CancelledError):
            why = "on_started_leading was cancelled"
        except Exception as exc:
            self._log.exception("leader.callback_failed", callback="on_started_leading")
            why = f"on_started_leading raised {type(exc).__name__}: {exc}"
            raised = True
        if ctx.lost.is_set():
            return
        if not self.callbacks.release_on_return:
            self._log.debug("leader.callback_returned", term=ctx.term, note="still leading")
            return
        if raised:
            self._log.warning("leader.work_ended", term=ctx.term, reason=why)
        else:  # the work is done: what release_on_return is for, nothing to warn about
            self._log.info("leader.work_ended", term=ctx.term, reason=why)
        self._abdicate(ctx.term, why)

    def _invoke(self, label: str, callback: Callable[..., Any], arg: object) -> None:
        try:
            self._call(callback, arg, None)
        except Exception:
            self._log.exception("leader.callback_failed", callback=label)

    def _call(
        self, callback: Callable[..., Any], arg: object, term: LeadershipContext | None
    ) -> object:
        """Call ``callback`` (plain or coroutine function), with ``arg`` when it takes one.

        Coroutines run on the integration's loop when there is one (see
        :mod:`k8slease.election.aio`), else on a private loop; the end of ``term`` cancels them.
        """
        args = (arg,) if accepts_argument(callback) else ()
        if not inspect.iscoroutinefunction(callback):
            return callback(*args)
        hooks = None if term is None else term.cancel_hooks
        return run_cancellable(callback(*args), loop=self.loop, hooks=hooks)

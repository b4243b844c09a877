"""Long-lived jobs (pollers, sweepers): run while a condition holds, told at once when it ends.

A singleton's function gets a :class:`~k8slease.jobs.context.JobContext` whose ``lost`` event is set
when leadership ends (or the Jobs stop); coroutine singletons are also cancelled. A singleton
that returns or raises while it should still run is restarted after ``restart_delay`` seconds,
so a crashed poller does not stay dead on the leader.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable

from k8slease.callbacks import CancelHooks, run_cancellable
from k8slease.jobs.context import JobOwner
from k8slease.jobs.spec import JobSpec


class SingletonRun:
    """One activation of a singleton of ``owner``: from ``start()`` until ``lost`` is set."""

    def __init__(
        self,
        spec: JobSpec,
        owner: JobOwner,
        *,
        lost: threading.Event,
        fencing_token: int | None,
        restart_delay: float = 5.0,
        loop: asyncio.AbstractEventLoop | None = None,
        on_end: Callable[[SingletonRun], None] | None = None,
    ) -> None:
        self.spec = spec
        self.lost = lost
        self.restart_delay = restart_delay
        self._loop = loop
        #: called (in the singleton's thread) once it has ended for good
        self._on_end = on_end
        self._log = owner.log(spec.name)
        self.ctx = owner.context(
            spec.name, self._log, tick=None, fencing_token=fencing_token, lost=lost
        )
        self._thread = threading.Thread(
            target=self._supervise, name=f"k8slease-singleton-{spec.name}", daemon=True
        )
        self._cancel = CancelHooks()

    def start(self) -> None:
        self._log.info("singleton.started", fencing_token=self.ctx.fencing_token)
        self._thread.start()

    @property
    def thread(self) -> threading.Thread:
        """The thread the singleton runs in."""
        return self._thread

    def stop(self, timeout: float | None = None) -> None:
        """Set ``lost``, cancel a coroutine singleton, and wait up to ``timeout`` for it to end."""
        self.lost.set()
        self._cancel.fire()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _supervise(self) -> None:
        try:
            self._run_until_lost()
        finally:
            self._log.info("singleton.stopped")
            if self._on_end is not None:
                self._on_end(self)

    def _run_until_lost(self) -> None:
        while not self.lost.is_set():
            try:
                if self.spec.is_coroutine:
                    self._run_coroutine()
                else:
                    self.spec.call(self.ctx)
            except (asyncio.CancelledError, concurrent.futures.CancelledError):
                pass
            except Exception:
                self._log.exception("singleton.raised")
            if self.lost.is_set():
                break
            self._log.warning("singleton.ended_early", restart_in=self.restart_delay)
            self.lost.wait(self.restart_delay)

    def _run_coroutine(self) -> None:
        run_cancellable(self.spec.call(self.ctx), loop=self._loop, hooks=self._cancel)

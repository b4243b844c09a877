"""SIGTERM and SIGINT: stop gracefully (release the Lease), then end the process as it would have.

:class:`GracefulSignals` installs a handler (from the main thread only; elsewhere it does
nothing). When a signal arrives the handler puts the previous handlers back at once, so a second
signal acts as it always did (the default SIGTERM action ends the process at once), and a
non-daemon thread runs ``stop`` (which releases the Lease) and then sends the same signal to the
process again. The previous handler then decides what happens, as if k8slease had never been
there: the default SIGTERM action ends the process, Python's SIGINT handler raises
``KeyboardInterrupt`` in the main thread, an application's own handler runs, an ignored signal
stays ignored.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from k8slease.logs import get_logger

log = get_logger("k8slease.signals")

DEFAULT_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT)

#: The longest the main thread blocks in one wait while k8slease runs in it (seconds). Python runs
#: signal handlers in the main thread only, and a main thread blocked in a long wait does not run
#: one for a signal the kernel handed to another thread (it may pick any thread that does not
#: block it) until that wait ends.
SIGNAL_POLL = 0.5


def wait_cap(timeout: float | None) -> float | None:
    """``timeout``, capped at :data:`SIGNAL_POLL` in the main thread (anywhere else: as is)."""
    if threading.current_thread() is not threading.main_thread():
        return timeout
    return SIGNAL_POLL if timeout is None else min(timeout, SIGNAL_POLL)


class GracefulSignals:
    """Run ``stop`` on SIGTERM/SIGINT, then re-deliver the signal to the previous handler."""

    def __init__(self, stop: Callable[[], None], *, what: str) -> None:
        self._stop = stop
        self._what = what
        # Touched only from the main thread (install, restore, the handler): no lock, which a
        # handler interrupting install or restore could never take.
        self._previous: dict[int, Any] = {}
        #: set once ``stop`` has run after a signal (and the signal was sent again)
        self.handled = threading.Event()

    @property
    def installed(self) -> bool:
        return bool(self._previous)

    def install(self, signals: tuple[signal.Signals, ...] = DEFAULT_SIGNALS) -> bool:
        """Install the handlers; returns False (and does nothing) outside the main thread."""
        if threading.current_thread() is not threading.main_thread():
            log.debug("signals.not_installed", what=self._what, why="not the main thread")
            return False
        for signum in signals:
            if int(signum) not in self._previous:
                self._previous[int(signum)] = signal.signal(signum, self._handle)
        return True

    def restore(self) -> None:
        """Put the previous handlers back (main thread only; elsewhere nothing happens)."""
        if threading.current_thread() is not threading.main_thread():
            return
        previous, self._previous = self._previous, {}
        for signum, handler in previous.items():
            if signal.getsignal(signum) == self._handle:
                signal.signal(signum, signal.SIG_DFL if handler is None else handler)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        # Runs in the main thread, between two bytecodes of whatever it was doing: take no lock
        # the interrupted code may hold; hand the stop off to a thread.
        self.restore()
        name = signal.Signals(signum).name
        log.info("signal.received", signal=name, what=self._what, then="release, then re-raise")
        threading.Thread(
            target=self._stop_then_resend,
            args=(signum,),
            name=f"k8slease-{name.lower()}",
            daemon=False,
        ).start()

    def _stop_then_resend(self, signum: int) -> None:
        try:
            self._stop()
        except Exception:
            log.exception("signal.stop_failed", what=self._what)
        finally:
            self.handled.set()
            os.kill(os.getpid(), signum)


class LoopWaker:
    """Wake an event loop that runs in the main thread every :data:`SIGNAL_POLL` seconds.

    A signal the kernel hands to another thread is only flagged; Python runs its handler when
    the main thread next runs Python code. An idle event loop blocks in ``select`` with no
    timeout, so ``async with`` forms would not release the Lease on such a SIGTERM until some
    unrelated timer fired. Nothing is scheduled for a loop outside the main thread.
    """

    def __init__(self, loop: Any) -> None:
        self._loop = loop
        self._handle: Any = None
        self._stopped = False

    def start(self) -> None:
        if threading.current_thread() is threading.main_thread():
            self._handle = self._loop.call_later(SIGNAL_POLL, self._tick)

    def _tick(self) -> None:
        if not self._stopped:
            self._handle = self._loop.call_later(SIGNAL_POLL, self._tick)

    def stop(self) -> None:
        """Stop waking the loop (from any thread)."""
        self._stopped = True
        handle = self._handle
        if handle is None or self._loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            self._loop.call_soon_threadsafe(handle.cancel)

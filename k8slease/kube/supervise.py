"""Which background threads are down: a crashed thread must never look healthy.

Every long-lived thread of k8slease (the elector's command loop, its watch and watchdog, the job
informer) reports here when an unexpected exception escapes its work, and again when it is back.
``/healthz`` (``LeaderElector.healthy``, ``Jobs.healthy``) fails while any of them is down, so
the kubelet restarts a pod whose election died instead of probing it healthy forever.

Two behaviours, chosen per thread:

* *restarted with backoff*: the watch and the informer catch the exception, report it here, wait
  (backing off) and start over; they are reported back up at their next success, and healthz
  fails only in between;
* *down for good*: the elector's command loop and its watchdog cannot resume safely (the
  election's state may be half-updated); the elector stops as on ``stop()``, the crash is logged
  at CRITICAL with the exception and stays here, so healthz fails until the pod is restarted.
"""

from __future__ import annotations

import threading

from k8slease.logs import Logger


class ThreadHealth:
    """The threads of one component that crashed and are not back; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._down: dict[str, str] = {}

    def crashed(
        self, thread: str, error: BaseException, *, log: Logger, for_good: bool, event: str = ""
    ) -> None:
        """``thread`` died of ``error``: log ``event`` (default ``<thread>.crashed``) with the
        traceback, at CRITICAL when ``for_good``, else at ERROR (call from ``except``)."""
        event = event or f"{thread}.crashed"
        why = f"{type(error).__name__}: {error}"[:500]
        with self._lock:
            self._down[thread] = why
            self._changed.notify_all()
        if for_good:
            log.critical(
                event,
                thread=thread,
                error=why,
                action="stopped; /healthz fails until the process is restarted",
                exc_info=True,
            )
        else:
            log.error(
                event,
                thread=thread,
                error=why,
                action="restarting with backoff; /healthz fails until it is back",
                exc_info=True,
            )

    def recovered(self, thread: str, *, log: Logger | None = None) -> None:
        """``thread`` works again after a crash (no-op when it was not down)."""
        with self._lock:
            was_down = self._down.pop(thread, None) is not None
            self._changed.notify_all()
        if was_down and log is not None:
            log.warning(f"{thread}.recovered", thread=thread)

    def healthy(self) -> bool:
        """True when no thread is down."""
        with self._lock:
            return not self._down

    def down(self) -> dict[str, str]:
        """The threads that are down, with what killed them."""
        with self._lock:
            return dict(self._down)

    def wait_until(self, healthy: bool, timeout: float) -> bool:
        """Block until :meth:`healthy` is ``healthy`` (at most ``timeout`` s); returns whether."""
        with self._changed:
            return self._changed.wait_for(lambda: (not self._down) is healthy, timeout)

"""Events posted off the critical path: a bounded queue, one poster thread, a bound from timings.

An Event used to be posted where it happened (a scheduler listener, a claim, the end of a run),
each post bounded by a fixed 5 s: on an API server slow but answering above that, every Event
failed (``event.post_failed``) though the replicas kept leading and running, and each failed post
held up whatever called it for those 5 s (the scheduler's own thread, for ``TicksDropped``).
:class:`QueuedEvents` instead takes the Event at once and posts it from a thread of its own:

* each request may take ``bound`` seconds, derived from the election timings by the caller
  (:func:`~k8slease.election.budgets.event_budget`: beyond the latency the timings tolerate), its
  connect ``connect`` seconds (``request_timeout``). A request that runs out drops its connection
  (:func:`~k8slease.kube.rawapi.send`), so a hung connection costs one ``bound`` and the next
  attempt opens a new one;
* an Event that failed for want of an answer (``Unavailable``) is sent again, the same body (an
  ``AlreadyExists`` answer then means the earlier attempt landed), first after
  :data:`RETRY_FIRST` seconds, then at most every :data:`RETRY_MOST` while attempts keep failing
  (every waiting Event waits the same: the server is away for all of them): a server back from
  an outage gets the waiting Events within that, no long backoff. One that still fails after
  ``retry_for`` seconds is given up (``event.given_up``, a WARNING). Other refusals (Forbidden,
  Invalid, a missing namespace) are not retried (``event.post_failed``, a WARNING);
* at most ``capacity`` Events wait. The same Event (object, reason, type and message) posted
  again while one waits is folded into it (its ``count`` and ``lastTimestamp``); past the
  capacity an Event is dropped: ``event.queue_full`` (a WARNING) at the first drop, then
  ``event.queue_full_ended`` (a WARNING) with the count by reason once there is room again.
  The log line the caller wrote about what happened is never dropped;
* failures are warned about once per failing spell (``event.post_failed`` with ``retrying``),
  and ``event.posts_resumed`` (INFO) says when Events go through again and how many attempts
  failed meanwhile. Each posted Event is logged at INFO (``event.posted``: reason, object,
  attempts, seconds waited).

The thread runs while Events wait and ends when none came for :data:`IDLE` seconds. It is a
daemon; when the interpreter exits (after a graceful stop) the Events still waiting get up to
:data:`EXIT_FLUSH` seconds to be posted, then are lost (:meth:`QueuedEvents.flush` waits for
them on the queue's clock).
"""

from __future__ import annotations

import atexit
import threading
import time
import weakref
from collections import Counter, OrderedDict
from dataclasses import dataclass
from typing import Any

import urllib3
from kubernetes import client

from k8slease.clock import Clock
from k8slease.errors import AlreadyExists, TransportError, Unavailable
from k8slease.kube.events import EventRecorder
from k8slease.logs import get_logger

log = get_logger("k8slease.events")

#: Events that may wait to be posted, per queue.
DEFAULT_CAPACITY = 100
#: Seconds before an Event that failed is sent again (the first time).
RETRY_FIRST = 0.5
#: The longest wait between two attempts: how late a server back from an outage gets them.
RETRY_MOST = 2.0
#: Seconds an Event is sent again before it is given up.
DEFAULT_RETRY_FOR = 600.0

#: Seconds the poster thread waits for another Event before it ends.
IDLE = 5.0

#: Real seconds the Events still waiting at interpreter exit get, all queues together.
EXIT_FLUSH = 5.0

_Key = tuple[str, str, str, str]


@dataclass
class _Waiting:
    body: dict[str, Any]
    since: float
    attempts: int = 0


class QueuedEvents(EventRecorder):
    """An :class:`~k8slease.kube.events.EventRecorder` whose :meth:`post` returns at once: the
    Event is posted by a thread of the queue's own (see the module docstring).

    ``bound`` (seconds) bounds each request, ``connect`` its connect phase; ``capacity`` Events
    wait at most; one that cannot be posted for ``retry_for`` seconds is given up.
    """

    def __init__(
        self,
        api_client: client.ApiClient,
        namespace: str,
        *,
        bound: float,
        connect: float,
        clock: Clock,
        component: str = "k8slease",
        identity: str = "",
        capacity: int = DEFAULT_CAPACITY,
        retry_for: float = DEFAULT_RETRY_FOR,
    ) -> None:
        if not bound > 0 or not connect > 0:
            raise ValueError(f"bound and connect must be > 0, got {bound!r} and {connect!r}")
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity!r}")
        super().__init__(
            api_client,
            namespace,
            component=component,
            identity=identity,
            request_timeout=bound,
            clock=clock,
        )
        self.connect = min(float(connect), float(bound))
        self.capacity = capacity
        self.retry_for = float(retry_for)
        self._cond = threading.Condition()
        self._waiting: OrderedDict[_Key, _Waiting] = OrderedDict()
        self._in_flight = 0
        self._thread: threading.Thread | None = None
        self._dropping: Counter[str] = Counter()
        self._failed_attempts = 0  # in a row: every Event waits out the same backoff
        self._not_before = 0.0
        #: Events created (or found created), dropped for want of room, given up or refused.
        self.posted = 0
        self.dropped = 0
        self.given_up = 0
        self.refused = 0

    def deliver(self, body: dict[str, Any]) -> bool:
        """Queue the Event ``body`` (:meth:`post` builds it); returns at once, whether it was
        queued (or folded into the same Event still waiting); ``False``: the queue was full, the
        Event dropped."""
        reason = body["reason"]
        key: _Key = (body["involvedObject"]["name"], reason, body["type"], body["message"])
        with self._cond:
            same = self._waiting.get(key)
            if same is not None:
                same.body["count"] += 1
                same.body["lastTimestamp"] = body["lastTimestamp"]
                return True
            if len(self._waiting) + self._in_flight >= self.capacity:
                self.dropped += 1
                if not self._dropping:
                    log.warning("event.queue_full", reason=reason, capacity=self.capacity)
                self._dropping[reason] += 1
                return False
            self._waiting[key] = _Waiting(body, since=self._clock.monotonic())
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="k8slease-events", daemon=True
                )
                self._thread.start()
                _LIVE.add(self)
            self._cond.notify_all()
        return True

    def pending(self) -> int:
        """Events waiting or being posted."""
        with self._cond:
            return len(self._waiting) + self._in_flight

    def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds (of the queue's clock) until no Event waits; returns
        whether none does."""
        with self._cond:
            end = self._clock.monotonic() + timeout
            while self._waiting or self._in_flight:
                left = end - self._clock.monotonic()
                if left <= 0:
                    return False
                self._clock.wait(self._cond, left)
            return True

    # -- the poster thread -------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                taken = self._next()
                if taken is None:
                    self._thread = None
                    self._cond.notify_all()
                    return
                key, waiting = taken
            outcome = self._attempt(waiting)
            with self._cond:
                self._in_flight -= 1
                self._settle(key, waiting, outcome)
                self._cond.notify_all()

    def _next(self) -> tuple[_Key, _Waiting] | None:
        """The oldest Event, once due (lock held); ``None``: none came for :data:`IDLE`
        seconds."""
        idle_until = self._clock.monotonic() + IDLE
        while True:
            now = self._clock.monotonic()
            if not self._waiting:
                if now >= idle_until:
                    return None
                self._clock.wait(self._cond, idle_until - now)
            elif self._not_before <= now:
                key, waiting = self._waiting.popitem(last=False)
                self._in_flight += 1
                return key, waiting
            else:
                self._clock.wait(self._cond, self._not_before - now)

    def _attempt(self, waiting: _Waiting) -> TransportError | None:
        """Send the Event once; ``None`` if it was created (now or by an earlier attempt)."""
        waiting.attempts += 1
        try:
            self.send_body(
                waiting.body,
                timeout=urllib3.Timeout(total=self.request_timeout, connect=self.connect),
            )
        except AlreadyExists:
            return None
        except TransportError as exc:
            return exc
        except Exception as exc:  # a bug must not stop the queue: refused, not retried
            log.exception("event.post_crashed", reason=waiting.body["reason"])
            return TransportError(f"create: {type(exc).__name__}: {exc}")
        return None

    def _settle(self, key: _Key, waiting: _Waiting, error: TransportError | None) -> None:
        """Account for one attempt (lock held): posted, refused, given up or sent again."""
        body = waiting.body
        reason, name = body["reason"], body["involvedObject"]["name"]
        now = self._clock.monotonic()
        if not isinstance(error, Unavailable):  # the server answered
            if self._failed_attempts:
                log.info("event.posts_resumed", failed_attempts=self._failed_attempts)
            self._failed_attempts, self._not_before = 0, 0.0
        said = {"reason": reason, "object": name, "attempts": waiting.attempts}
        if error is None:
            self.posted += 1
            log.info("event.posted", **said, waited=round(now - waiting.since, 3))
        elif not isinstance(error, Unavailable):
            self.refused += 1
            log.warning("event.post_failed", reason=reason, object=name, error=str(error))
        elif now - waiting.since >= self.retry_for:
            self.given_up += 1
            log.warning("event.given_up", **said, error=str(error))
        else:
            if not self._failed_attempts:
                log.warning(
                    "event.post_failed", reason=reason, object=name, error=str(error), retrying=True
                )
            self._failed_attempts += 1
            self._not_before = now + min(RETRY_MOST, RETRY_FIRST * 2 ** (self._failed_attempts - 1))
            same = self._waiting.pop(key, None)
            if same is not None:  # posted again while this one was out: one Event
                waiting.body["count"] += same.body["count"]
                waiting.body["lastTimestamp"] = same.body["lastTimestamp"]
            self._waiting[key] = waiting
            self._waiting.move_to_end(key, last=False)
        if self._dropping and len(self._waiting) + self._in_flight < self.capacity:
            log.warning("event.queue_full_ended", dropped=dict(self._dropping))
            self._dropping.clear()


_LIVE: weakref.WeakSet[QueuedEvents] = weakref.WeakSet()


@atexit.register
def _flush_at_exit() -> None:
    """Give the Events still waiting :data:`EXIT_FLUSH` real seconds (the poster threads are
    daemons: they still run while ``atexit`` handlers do, and die after)."""
    end = time.monotonic() + EXIT_FLUSH
    for queue in list(_LIVE):
        with queue._cond:
            while queue._thread is not None and (queue._waiting or queue._in_flight):
                left = end - time.monotonic()
                if left <= 0:
                    return
                queue._cond.wait(min(left, 0.1))

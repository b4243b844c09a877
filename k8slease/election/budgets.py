"""How long each election request may take: as long as its answer can still be used safely.

client-go bounds a whole renewal by the renew deadline; k8slease used to bound every request by
``request_timeout`` (``min(10, renew_deadline / 3)``), so an API server slower than a third of the
deadline but still answering failed every renew and the leader abdicated needlessly. The bound of
each request now follows from what is at stake:

* a **renew** (and the re-read after its Conflict) may take the whole time left before the renew
  deadline: an answer that arrives before it keeps the lease, and a failed attempt that comes
  back early is retried within what remains. Safety does not rest on this bound: the watchdog
  ends leadership at the deadline while the request is still out, and a success that arrives
  after it is ignored (:meth:`~k8slease.election.machine.ElectionMachine.write_done`);
* a **take** or **create** may take ``renew_deadline``: a grant whose answer comes later is not
  acted on (the machine checks ``sent + renew_deadline``), so waiting longer gains nothing;
* a candidate's **observe** read may take ``renew_deadline`` too: an observation is safe to use
  whenever it arrives (expiry is judged from when it was seen), and the watch goes on meanwhile;
* the **release** read and write, sent while stopping, keep ``request_timeout``: nothing is lost
  when they fail (the Lease expires), and a stop must not wait on a slow server.

Every request's connect phase stays bounded by ``request_timeout``: a connection that cannot be
opened in that time is dead, and the next attempt opens a new one.
"""

from __future__ import annotations

from k8slease.election.commands import Purpose
from k8slease.election.timing import ElectionTiming

#: Purposes whose answer is used as long as it arrives before the renew deadline of the term.
_LEADER_PURPOSES = frozenset({Purpose.RENEW, Purpose.REREAD})
#: Purposes whose answer is usable up to ``renew_deadline`` after it was sent.
_CANDIDATE_PURPOSES = frozenset({Purpose.OBSERVE, Purpose.CREATE, Purpose.TAKE})


def election_budget(
    purpose: Purpose, *, timing: ElectionTiming, now: float, leading_until: float | None
) -> float:
    """Seconds the request for ``purpose``, sent at monotonic ``now``, may take.

    ``leading_until`` is when the current term ends without a further renew (``None`` when not
    leading). The result is never below :data:`~k8slease.lease.budget.MIN_BUDGET` (applied by
    :func:`~k8slease.lease.budget.request_budget`), and a leader request past the deadline gets
    ``0``, as it cannot help any more.
    """
    if purpose in _LEADER_PURPOSES:
        if leading_until is None:
            return timing.timeout
        return max(0.0, leading_until - now)
    if purpose in _CANDIDATE_PURPOSES:
        return timing.renew_deadline
    return timing.timeout


def tolerated_latency(timing: ElectionTiming) -> float:
    """The largest per-request latency at which a leader keeps its lease indefinitely.

    A renew is sent ``renew_interval`` after the last good one was sent and must be answered
    before that one's deadline, ``renew_deadline`` after it: ``renew_deadline - renew_interval``.
    And renews are sequential (one outstanding, each conditional on the last), so each answer
    must also come back before the next renew falls due: no more than ``renew_deadline / 2`` in
    any case. The tolerance is the smaller of the two (docs/operations.md).
    """
    return min(timing.renew_deadline - timing.renew_interval, timing.renew_deadline / 2)


def event_budget(timing: ElectionTiming) -> float:
    """Seconds each Event post may take (:class:`~k8slease.kube.eventqueue.QueuedEvents`).

    Events must still get through while the API server is slow but the leader holds, that is up
    to :func:`tolerated_latency`; ``request_timeout`` more gives a request that lands right at
    that latency room to be read. Never above ``renew_deadline``: a post is off the critical
    path, but a hung connection still holds up the Events behind it only that long.
    """
    return min(timing.renew_deadline, tolerated_latency(timing) + timing.timeout)

"""Pure Lease rules shared by elections and job locks: when may a Lease be taken, what is written.

Nothing here does I/O or reads a clock: every function is given the record it judges, the
monotonic times it needs and the wall-clock time to write. :mod:`k8slease.election.decide` and
:mod:`k8slease.election.machine` build the elector on them; :mod:`k8slease.jobs.lockrules` the
per-job locks.

The safety model these functions enforce (rules 1-4 and ceilings C1-C3) is stated once, in
:mod:`k8slease.lease.safety`; comments here refer to it by number.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from k8slease.kube.microtime import MAX_TIME
from k8slease.lease.record import FENCING_TOKEN_MAX, INT32_MAX, LeaseRecord

#: The smallest step by which a renewTime we write moves forward, so every write changes it.
_MICROSECOND = timedelta(microseconds=1)


def is_release(record: LeaseRecord) -> bool:
    """Whether ``record`` is a release as its holder writes it: well-formed, no holder and
    ``leaseDurationSeconds`` 1 (client-go's mark, and ours). Anything else without a holder (no
    spec, a holder removed by hand with the duration left) is held by someone unknown."""
    return not record.malformed and not record.held and record.duration_seconds == 1


def is_trusted_release(record: LeaseRecord, last_held: LeaseRecord | None) -> bool:
    """Whether ``record`` may be taken at once as a release (rule 3): :func:`is_release`, with
    ``acquireTime`` equal to ``renewTime`` (a holder's release sets both to the moment it gives
    the Lease up, as client-go's does; hand edits that remove the holder and shorten the
    duration keep the term's ``acquireTime``), and, against ``last_held``, the held record of
    the newest term with the latest ``renewTime`` this replica saw
    (:attr:`~k8slease.lease.observe.LeaseObserver.last_held`), of that same term (fencing token)
    with a later ``renewTime`` (a holder's release always moves it forward; hand edits leave it).

    Only the ``renewTime`` test once: a replica cut off from the watch misses renewals, and hand
    edits of a renewal it never saw then left a ``renewTime`` later than any it saw (simulation
    seed 8143, two leaders). A release of a term it never saw may be hand edits of that term's
    grant (which has ``acquireTime`` equal to ``renewTime``): waited out like them."""
    if not is_release(record):
        return False
    if record.acquire_time is None or record.acquire_time != record.renew_time:
        return False
    if last_held is None or last_held.renew_time is None:
        return True
    return (
        record.fencing_token == last_held.fencing_token
        and record.renew_time is not None
        and record.renew_time > last_held.renew_time
    )


def effective_duration(record: LeaseRecord, fallback_duration: float) -> float:
    """How long ``record`` must be seen unchanged before it may be taken over, in seconds.

    The longer of the record's own ``leaseDurationSeconds`` (when usable) and
    ``fallback_duration`` (our configured one): a holder configured for longer (or a Go
    controller) is waited out for its whole duration, and a duration shortened by hand is never
    honoured at once; the wait starts when this replica saw the record change.
    """
    return max(float(max(record.duration_seconds, 0)), float(fallback_duration))


def lock_duration(record: LeaseRecord, fallback_duration: float) -> float:
    """How long a job lock's ``record`` must be seen unchanged before it may be taken.

    A well-formed held lock's own duration decides: its holder writes shorter durations itself
    to keep the lock for the rest of ``lock_at_least_for``. Anything else (malformed, no holder
    but not released) waits for the longer of its duration and ``fallback_duration``.
    """
    if record.held and not record.malformed and record.duration_seconds > 0:
        return float(record.duration_seconds)
    return effective_duration(record, fallback_duration)


def takeover_at(
    record: LeaseRecord | None,
    first_seen_at: float,
    *,
    identity: str,
    fallback_duration: float,
    held_before_absence: LeaseRecord | None = None,
    last_held: LeaseRecord | None = None,
    deleted: tuple[LeaseRecord, float] | None = None,
) -> float:
    """The monotonic time from which this replica may try to take the Lease.

    * absent and never seen held: at once (create it);
    * absent after it was seen held (deleted by hand): after the old record's effective duration,
      at least ``fallback_duration``, because its holder may not know yet;
    * released (:func:`is_trusted_release`, given ``last_held``, the last held record seen) or
      naming us: at once, through a conditional write; but if it reappeared after a Lease
      held by another was seen deleted (``deleted``: that record and when its absence was
      first seen), not before that deletion is waited out as an absence would be (rule 4: its
      holder may still believe; a Lease naming us then is our own create applied late, soak
      seed 8041);
    * held by someone else, malformed, or without a holder but not released (a hand edit):
      ``first_seen_at`` plus the longer of its duration and ``fallback_duration``.
    """
    if record is None:
        if held_before_absence is None:
            return first_seen_at
        wait = max(effective_duration(held_before_absence, fallback_duration), fallback_duration)
        return first_seen_at + wait
    if is_trusted_release(record, last_held) or (
        not record.malformed and record.holder == identity
    ):
        if deleted is None or deleted[0].holder == identity:
            return first_seen_at  # our own deleted Lease: we stepped down on seeing it
        held, absent_since = deleted
        wait = max(effective_duration(held, fallback_duration), fallback_duration)
        return max(first_seen_at, absent_since + wait)
    return first_seen_at + effective_duration(record, fallback_duration)


def is_ours(record: LeaseRecord | None, *, identity: str, fencing_token: int) -> bool:
    """Whether ``record`` still shows the grant we hold: our identity and our fencing token."""
    return (
        record is not None
        and record.holder == identity
        and record.fencing_token == fencing_token
        and fencing_token > 0
    )


def grant_record(
    previous: LeaseRecord | None,
    *,
    identity: str,
    duration_seconds: int,
    now: datetime,
    highest_token_seen: int = 0,
) -> LeaseRecord:
    """The record that grants the Lease to ``identity`` at wall time ``now``.

    The fencing token is one above both the previous record's and the highest this replica has
    ever seen (so a token edited away by hand does not go backwards for us). ``leaseTransitions``
    grows when the holder changes, as in client-go (a release makes the holder change again on the
    next grant). ``acquireTime`` and ``renewTime`` are ``now``. The result is always well-formed,
    which repairs a malformed Lease.
    """
    if duration_seconds < 1:
        raise ValueError("duration_seconds must be >= 1")
    before = previous or LeaseRecord()
    if previous is None:
        transitions = 0
    elif before.holder != identity or before.malformed:
        transitions = next_transitions(before.transitions)
    else:
        transitions = before.transitions
    token = next_fencing_token(max(before.fencing_token, highest_token_seen))
    renew = _after(now, before.renew_time)
    return LeaseRecord(
        holder=identity,
        duration_seconds=int(duration_seconds),
        acquire_time=renew,
        renew_time=renew,
        transitions=transitions,
        fencing_token=token,
    )


def renewal_record(held: LeaseRecord, *, duration_seconds: int, now: datetime) -> LeaseRecord:
    """``held`` renewed at wall time ``now``: same holder, token and transitions.

    ``renewTime`` always moves forward (by a microsecond if the wall clock stood still or went
    back), so every renew changes the record and restarts the candidates' timers.
    """
    if duration_seconds < 1:
        raise ValueError("duration_seconds must be >= 1")
    return replace(
        held,
        duration_seconds=int(duration_seconds),
        renew_time=_after(now, held.renew_time),
        problems=(),
    )


def release_record(held: LeaseRecord, *, now: datetime) -> LeaseRecord:
    """The record that gives the Lease up: no holder, ``leaseDurationSeconds`` 1 (as client-go).

    Transitions and the fencing token are kept, so the next grant still increments both.
    """
    when = _after(now, held.renew_time)
    return replace(
        held, holder="", duration_seconds=1, acquire_time=when, renew_time=when, problems=()
    )


def next_transitions(transitions: int) -> int:
    """``leaseTransitions`` after one more change of holder: wraps to 0 past int32 (ceiling C1)."""
    return transitions + 1 if 0 <= transitions < INT32_MAX else 0


def next_fencing_token(highest: int) -> int:
    """The token of the next grant above ``highest``: saturates at ``2^63-1`` (ceiling C2)."""
    return min(max(highest, 0) + 1, FENCING_TOKEN_MAX)


def token_exhausted(record: LeaseRecord) -> bool:
    """Whether ``record``'s token is at the ceiling, so grants can no longer be told apart."""
    return record.fencing_token >= FENCING_TOKEN_MAX


def _after(now: datetime, previous: datetime | None) -> datetime:
    """``now``, or a microsecond after ``previous`` when the wall clock has not passed it; the
    wall clock again when ``previous`` is at the end of the accepted range (ceiling C3)."""
    if previous is not None and now <= previous:
        if previous >= MAX_TIME:
            return now
        return previous + _MICROSECOND
    return now

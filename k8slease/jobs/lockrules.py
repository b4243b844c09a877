"""Pure decisions for per-job locks: claim a tick, extend a running lock, release after a run.

A job lock is a Lease whose spec is a :class:`~k8slease.LeaseRecord` and whose annotations
carry a :class:`~k8slease.JobState`. Every function here takes what was read and what
time it is (passed in, never read) and returns what to write, so the whole lock protocol can be
tested with a fake clock.

The safety model these decisions enforce (rules 2, 3, 5 and 8) is stated once, in
:mod:`k8slease.lease.safety`. A replica that has never seen a Lease has seen it unchanged for no
time, so it skips: the lock errs towards not running, never towards running twice.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from enum import Enum

from k8slease.errors import ConfigError
from k8slease.kube.microtime import shift
from k8slease.lease.jobrecord import JobState, Outcome, RunRecord, count_up
from k8slease.lease.record import LeaseRecord
from k8slease.lease.rules import (
    grant_record,
    is_release,
    lock_duration,
    release_record,
    renewal_record,
)


class Verdict(Enum):
    """Why a claim was or was not granted."""

    GRANT = "grant"
    #: The tick is not newer than the newest tick already claimed: someone ran (or runs) it.
    ALREADY_CLAIMED = "already-claimed"
    #: Someone holds the lock and this replica has not seen it unchanged for its duration yet.
    HELD = "held"
    #: (Runner only) another replica's conditional write won the race for this claim.
    LOST_RACE = "lost-race"
    #: (Runner only) this replica is still running an earlier tick of the same job.
    RUNNING = "running"


@dataclass(frozen=True, slots=True)
class Claim:
    """The outcome of :func:`judge_claim`: the verdict and, for a grant, what to write."""

    verdict: Verdict
    record: LeaseRecord | None = None
    state: JobState | None = None
    detail: str = ""
    #: A claimed tick further ahead of ``now`` than ``lock_at_most_for`` (a fast wall clock or a
    #: hand edit), judged as not claimed; the caller reports it.
    suspect_claim: datetime | None = None
    #: The tick a previous holder claimed and never finished (it died or stalled mid-run): the
    #: grant records it as a ``lost`` run, the caller reports it.
    lost_tick: datetime | None = None


def whole_seconds(seconds: float) -> int:
    """A duration as Kubernetes stores it: whole seconds, rounded up, at least 1."""
    return max(1, math.ceil(seconds - 1e-9))


def expired(record: LeaseRecord, *, unchanged_for: float, fallback_duration: float) -> bool:
    """Whether a held Lease may be taken: seen unchanged for its duration on our own clock.

    A well-formed held lock's own ``leaseDurationSeconds`` decides (its holder shortens it for
    ``lock_at_least_for``); a malformed one, or one without holder that is not a release, waits
    for the longer of its duration and ``fallback_duration``; only a real release is free at once
    (:func:`k8slease.lease.rules.lock_duration`, :func:`~k8slease.lease.rules.is_release`).
    """
    if is_release(record):
        return True
    return unchanged_for >= lock_duration(record, fallback_duration)


def judge_claim(
    record: LeaseRecord | None,
    state: JobState,
    *,
    me: str,
    tick: datetime,
    unchanged_for: float,
    lock_at_most_for: float,
    now: datetime,
    reclaim_own: bool = False,
    highest_token_seen: int = 0,
    seen_claimed: datetime | None = None,
) -> Claim:
    """Decide whether ``me`` may run ``tick`` and, if so, the record and state to write.

    ``record`` is ``None`` when the lock's Lease does not exist yet. ``unchanged_for`` is how long
    this replica has seen the current Lease unchanged (0 when it has just read it for the first
    time); ``now`` is the wall-clock time written into the record. Unlike leadership, a lock this
    replica holds idle (kept by ``lock_at_least_for``) blocks it too, unless ``reclaim_own``:
    catch-up uses that to run missed ticks back to back. ``highest_token_seen`` keeps fencing
    tokens growing for this replica even if the Lease was deleted or its annotation edited away.
    ``seen_claimed`` is the newest plausible tick this replica saw claimed
    (:func:`newest_plausible_claim`): it counts as claimed too, so that a tick seen claimed is
    never claimed again when a hand edit (a far-future claim) or a deletion erased the claim.
    """
    claimed, suspect = claimed_floor(state, now=now, bound=lock_at_most_for)
    if seen_claimed is not None and (claimed is None or seen_claimed > claimed):
        claimed = seen_claimed
    if claimed is not None and tick <= claimed:
        return Claim(
            Verdict.ALREADY_CLAIMED,
            detail=f"tick {tick.isoformat()} <= claimed {claimed.isoformat()}",
            suspect_claim=suspect,
        )
    if record is not None:
        own_idle = reclaim_own and record.holder == me and not record.malformed
        if not own_idle and not expired(
            record, unchanged_for=unchanged_for, fallback_duration=lock_at_most_for
        ):
            return Claim(Verdict.HELD, detail=f"held by {record.holder or 'an unknown holder'}")
    granted = grant_record(
        record,
        identity=me,
        duration_seconds=whole_seconds(lock_at_most_for),
        now=now,
        highest_token_seen=highest_token_seen,
    )
    lost = None if suspect is not None else unfinished_run(record, state, now=now)
    if lost is not None:
        counts = count_up(state.counts, "lost")
        state = replace(state, last_run=lost, counts=counts)
    return Claim(
        Verdict.GRANT,
        record=granted,
        state=replace(state, claimed_tick=tick),
        suspect_claim=suspect,
        lost_tick=None if lost is None else lost.tick,
    )


def unfinished_run(
    record: LeaseRecord | None, state: JobState, *, now: datetime
) -> RunRecord | None:
    """The run a holder began and never recorded, as a ``lost`` run; ``None`` when there is none.

    A lock taken over while still held (its holder stopped renewing it) whose claimed tick is newer
    than the last recorded run means that tick's run never finished: its holder died or stalled.
    """
    claimed = state.claimed_tick
    if record is None or not record.held or record.malformed or claimed is None:
        return None
    if state.last_run is not None and state.last_run.tick >= claimed:
        return None
    return RunRecord(
        holder=record.holder,
        tick=claimed,
        started=record.acquire_time or now,
        finished=now,
        outcome="lost",
        fencing_token=record.fencing_token,
        error="its holder stopped renewing the lock before the run finished",
    )


def claimed_floor(
    state: JobState, *, now: datetime, bound: float
) -> tuple[datetime | None, datetime | None]:
    """The newest tick that counts as claimed, and the claimed tick set aside as suspect.

    A claimed tick more than ``bound`` seconds (``lock_at_most_for``) ahead of ``now`` cannot
    come from a replica whose wall clock is within the stated bound of ours: it is a fast clock or
    a hand edit. Honouring it would silence the job until the wall clock reaches it, so it is set
    aside (and reported); the newest tick known to have run (completed, or the last run's, when
    not suspect themselves) still counts, so a tick that may have really run is never claimed
    again. Ticks after that may be claimed, and the claim overwrites the suspect tick.
    """
    limit = shift(now, bound)
    claimed = state.claimed_tick
    if claimed is None or claimed <= limit:
        return claimed, None
    ran = [state.completed_tick, state.last_run.tick if state.last_run is not None else None]
    known = [t for t in ran if t is not None and t <= limit]
    return (max(known) if known else None), claimed


def newest_plausible_claim(
    seen: Sequence[datetime], *, now: datetime, bound: float
) -> datetime | None:
    """The newest of the claimed ticks ``seen`` that is not more than ``bound`` seconds
    (``lock_at_most_for``) ahead of ``now`` (:func:`claimed_floor` sets those aside as suspect);
    ``None`` when there is none. A tick seen claimed may have run: :func:`judge_claim` never
    claims it again, even after a hand edit overwrote it or the Lease was deleted."""
    limit = shift(now, bound)
    plausible = [t for t in seen if t <= limit]
    return max(plausible) if plausible else None


def extend(record: LeaseRecord, *, now: datetime) -> LeaseRecord:
    """The record that keeps a running job's lock alive: the same grant, renewTime moved on."""
    return renewal_record(record, duration_seconds=max(1, record.duration_seconds), now=now)


def release(
    record: LeaseRecord,
    state: JobState,
    run: RunRecord,
    *,
    ran_for: float,
    lock_at_least_for: float,
    now: datetime,
) -> tuple[LeaseRecord, JobState]:
    """The record and state to write when a run ends.

    The run record and counts are written in the same write. When the run took less than
    ``lock_at_least_for`` the lock stays held for the remainder (ShedLock's lockAtLeastFor);
    otherwise the holder is cleared so the next tick can be claimed at once.
    """
    counts = count_up(state.counts, run.outcome)
    completed = state.completed_tick
    if run.outcome in _COMPLETING and (completed is None or run.tick > completed):
        completed = run.tick
    new_state = replace(state, completed_tick=completed, last_run=run, counts=counts)
    remaining = lock_at_least_for - ran_for
    if remaining > 0:
        return renewal_record(record, duration_seconds=whole_seconds(remaining), now=now), new_state
    return release_record(record, now=now), new_state


_COMPLETING: frozenset[Outcome] = frozenset({"succeeded", "failed"})


def check_lock_times(
    lock_at_most_for: float, lock_at_least_for: float, *, prefix: str = ""
) -> None:
    """Raise ``ConfigError`` (message starting with ``prefix``) unless the lock times make sense:
    ``lock_at_most_for >= 1`` second and ``0 <= lock_at_least_for <= lock_at_most_for``."""
    if lock_at_most_for < 1:
        raise ConfigError(f"{prefix}lock_at_most_for must be >= 1 second, got {lock_at_most_for}")
    if not 0 <= lock_at_least_for <= lock_at_most_for:
        raise ConfigError(
            f"{prefix}lock_at_least_for must be between 0 and lock_at_most_for "
            f"({lock_at_most_for}), got {lock_at_least_for}"
        )

"""Pure leader and candidate decisions: renew, wait or step down; read, create, take or wait.

Built on the shared Lease rules of :mod:`k8slease.lease.rules`; the safety model (rules 1-4) is
stated in :mod:`k8slease.lease.safety`. Nothing here does I/O or reads a clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Generic, TypeVar

from k8slease.lease.observe import Observation
from k8slease.lease.record import LeaseRecord

A = TypeVar("A", bound=Enum)


@dataclass(frozen=True, slots=True)
class Decision(Generic[A]):
    """A decision's ``action``; for ``WAIT``, ``until`` is the monotonic time to decide again
    (``None``: until an event)."""

    action: A
    until: float | None = None


class LeaderAction(Enum):
    """What a leader should do now."""

    RENEW = "renew"
    WAIT = "wait"
    STEP_DOWN = "step-down"


def leader_deadline(last_success_sent_at: float, renew_deadline: float) -> float:
    """The monotonic time at which a leader stops believing it leads without a further renew."""
    return last_success_sent_at + renew_deadline


def decide_leader(
    *,
    last_success_sent_at: float,
    next_attempt_at: float,
    renew_deadline: float,
    now: float,
) -> Decision[LeaderAction]:
    """Renew, wait or step down, given when the last successful renew was sent.

    Stepping down wins over everything once ``now`` reaches the deadline, even if a renew is due.
    """
    deadline = leader_deadline(last_success_sent_at, renew_deadline)
    if now >= deadline:
        return Decision(LeaderAction.STEP_DOWN)
    if now >= next_attempt_at:
        return Decision(LeaderAction.RENEW)
    return Decision(LeaderAction.WAIT, until=min(next_attempt_at, deadline))


class CandidateAction(Enum):
    """What a candidate should do now."""

    READ = "read"
    CREATE = "create"
    TAKE = "take"
    WAIT = "wait"


def decide_candidate(
    seen: Observation | None,
    *,
    identity: str,
    fallback_duration: float,
    now: float,
    poll_at: float | None = None,
    last_held: LeaseRecord | None = None,
) -> Decision[CandidateAction]:
    """Read, create, take or wait, given the latest observation ``seen`` (``None``: none) and
    ``last_held``, the last held record seen.

    ``poll_at`` is when to read again regardless (set it when no watch delivers changes); a wait
    ends at the earlier of that and the moment the observed record may be taken over.
    """
    if seen is None:
        return Decision(CandidateAction.READ)
    at = seen.takeover_at(
        identity=identity, fallback_duration=fallback_duration, last_held=last_held
    )
    if now >= at:
        return Decision(CandidateAction.TAKE if seen.exists else CandidateAction.CREATE)
    if poll_at is not None and now >= poll_at:
        return Decision(CandidateAction.READ)
    until = at if poll_at is None else min(at, poll_at)
    return Decision(CandidateAction.WAIT, until=until)


def edited_reason(seen: LeaseRecord) -> str:
    """Why a holder stops on seeing ``seen``, a record it did not write."""
    if seen.holder and seen.holder_readable and not seen.malformed:
        return f"lease edited by someone else: held by {seen.holder}, token {seen.fencing_token}"
    problems = "; ".join(seen.problems) or "no holder"
    return f"lease edited by someone else: {problems}"

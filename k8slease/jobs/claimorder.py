"""Who tries to claim a tick first: an order per job and tick over the group's replicas (pure).

Every replica fires the same tick of a job at about the same time. If all of them wrote at once,
a tick would cost one write per replica, most of them lost races. Instead each replica ranks the
group's members for ``(job, tick)`` by rendezvous hashing (highest random weight): every member
gets the score ``hash(member, job, tick)``, the highest score goes first. The first tries at once;
the member ranked ``r`` waits ``min(r, spread) * step`` seconds and tries only if its informer
has not shown the claim by then. Normally one replica writes.

The order only spreads the attempts in time; it is never what makes a claim safe. The claim stays
the conditional write it always was (``resourceVersion``-conditional PUT, or a POST that fails
when the Lease exists), so two replicas that disagree on the order, or on who the members are,
cost a lost race (a 409), never a second run.

Members are the identities that the group's job Leases named (as holder or as last-run holder)
in a write this replica's informer saw within a window (10 minutes by default,
:data:`k8slease.jobs.lockcache.MEMBER_WINDOW`), plus this replica itself. Winners are spread
evenly, so every live replica of a busy group is named again and again; no presence record is
written (it would cost writes that grow with the replica count). A replica that has never won a
tick is not in the others' view yet; it ranks itself among what it sees and may then race the
first choice (a 409 for one of them) until it wins once and is named. A replica that crashed
stays in the view for the window; while it does, the ticks it would have been first for start
``step`` later (``spread`` bounds the delay when several crashed replicas rank ahead). Every
function here is pure: no I/O, no clock.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta

from k8slease.lease.view import LeaseView

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def tick_key(tick: datetime) -> int:
    """``tick`` as whole microseconds since the epoch: the same number on every replica,
    whatever timezone the tick was given in. A naive tick is read as UTC."""
    aware = tick if tick.tzinfo is not None else tick.replace(tzinfo=UTC)
    return (aware - _EPOCH) // _MICROSECOND


def score(member: str, job: str, tick: datetime) -> int:
    """The rendezvous weight of ``member`` for ``(job, tick)``: 64 bits of BLAKE2b, so every
    replica (any Python, any platform) computes the same value."""
    key = f"{member}\0{job}\0{tick_key(tick)}".encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big")


def claim_order(members: Iterable[str], job: str, tick: datetime) -> list[str]:
    """``members`` in the order they try to claim ``(job, tick)``: highest weight first, ties
    (practically impossible) broken by name so that the order is total."""
    return sorted(set(members), key=lambda m: (-score(m, job, tick), m))


def claim_rank(members: Iterable[str], me: str, job: str, tick: datetime) -> int:
    """Where ``me`` stands in :func:`claim_order` (0: first), ``me`` counted as a member."""
    return claim_order({*members, me}, job, tick).index(me)


def claim_delay(rank: int, *, step: float, spread: int) -> float:
    """How long the replica of ``rank`` waits before it tries: ``min(rank, spread) * step``.

    ``spread`` caps the wait, so that a claim is tried by someone within ``spread * step`` even
    when that many members ranked ahead crashed; the replicas ranked at or beyond ``spread`` then
    try together (and all but one lose the conditional write).
    """
    if rank < 0:
        raise ValueError(f"rank must be >= 0, got {rank}")
    return min(rank, spread) * step


def named_in(view: LeaseView) -> frozenset[str]:
    """The identities a job Lease names: its holder and the holder of its last run."""
    found: set[str] = set()
    if view.record.holder and view.record.holder_readable:
        found.add(view.record.holder)
    run = view.job.last_run
    if run is not None and run.holder:
        found.add(run.holder)
    return frozenset(found)


def recent_members(last_seen: Mapping[str, float], *, now: float, window: float) -> frozenset[str]:
    """The identities seen in a write within the last ``window`` seconds (``last_seen``: when
    each was last seen named, on this replica's monotonic clock)."""
    return frozenset(member for member, at in last_seen.items() if now - at <= window)

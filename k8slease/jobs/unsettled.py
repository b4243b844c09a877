"""Writes whose answer never arrived, and the run records they carried: pure rules (issue 26).

A request that times out (or whose connection is reset, or that gets a 5xx) may still be applied
by the API server: kube-apiserver and etcd finish what they had started. A job lock write whose
answer did not arrive is therefore *indeterminate*, neither won nor lost, and the next look at
the Lease settles it:

* :func:`settle_claim`: a claim write is **applied** when the Lease names this replica with the
  claim's fencing token (its claimed tick says which of this replica's unanswered claims with
  that token landed: :func:`still_pending` keeps one per token, from the earliest send); it
  is **refused** when the Lease has moved on to anything
  else (a different ``resourceVersion`` than the one the write was conditioned on, or, for a
  create, a Lease that exists): a conditional write can never apply after that; it stays
  **open** while the Lease is exactly as it was (the write may still land).
* :func:`adopt_or_release`: an applied claim is run when its tick is still within the job's
  grace and the grant's keep-alive budget has not run out (nobody else can have run the tick: it
  is claimed by this replica's token, and a tick is never claimed twice); otherwise the lock is
  given back at once, with the tick recorded ``lost`` (it was claimed and never run).
* :func:`~k8slease.lease.keptruns.merge_run` (in ``lease/``: the operator merges the same
  records from a replica's journal): a run record whose release could not be written is kept
  and carried by the next write this replica makes to the Lease; it is merged into what the
  Lease says so that a finished run is recorded with its real outcome, also when another
  replica has meanwhile taken the lock over and recorded the tick ``lost``.
* :func:`silent_holder`: a lock whose claimed tick has not finished and whose holder has not
  renewed it for longer than a keep-alive (plus a request timeout) has a silent holder: other
  replicas report every tick they skip for it (the holder crashed, stalled, or does not know
  it holds the lock because its claim was applied after it gave up).

Every function takes what was read and the times (passed in, never read), so the rules are
tested with a fake clock.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from enum import Enum

from k8slease.lease.jobrecord import JobState, RunRecord
from k8slease.lease.record import LeaseRecord
from k8slease.lease.view import LeaseView


class Settled(Enum):
    """What the Lease says of a write whose answer did not arrive."""

    APPLIED = "applied"
    REFUSED = "refused"
    OPEN = "open"


@dataclass(frozen=True, slots=True)
class PendingClaim:
    """A claim write of this replica, as sent; kept while its answer has not arrived (the grant
    of an applied claim starts from it).

    ``resource_version`` is the version the write was conditioned on (``""`` for a create);
    ``sent_mono`` when it was sent, on this replica's monotonic clock: the grant's keep-alive
    budget runs from there, as for any grant; ``body`` the Lease as written (for a grant view).
    """

    tick: datetime
    fencing_token: int
    resource_version: str
    sent_mono: float
    sent_wall: datetime
    #: the tokens of this replica's earlier unanswered claims (see :func:`still_pending`)
    earlier_tokens: frozenset[int] = frozenset()
    #: the kept run record the write carried (``None``: none): written if the claim was applied
    carried: RunRecord | None = None

    def names(self, lease: LeaseView, me: str) -> bool:
        """Whether ``lease`` is one of these claims, applied."""
        token = lease.record.fencing_token
        return lease.record.holder == me and (
            token == self.fencing_token or token in self.earlier_tokens
        )


def settle_claim(pending: PendingClaim, lease: LeaseView | None, *, me: str) -> Settled:
    """Whether ``pending`` was applied, judged on ``lease`` as read or seen after it."""
    if lease is None:
        # absent: a create may still land; a replace of a Lease since deleted never will
        return Settled.OPEN if not pending.resource_version else Settled.REFUSED
    if pending.names(lease, me):
        return Settled.APPLIED
    if pending.resource_version and lease.resource_version == pending.resource_version:
        return Settled.OPEN
    return Settled.REFUSED


def still_pending(earlier: PendingClaim | None, new: PendingClaim) -> PendingClaim:
    """The claims to settle after ``new`` got no answer either. Any of them may still land
    (an earlier one only while the Lease is at the version ``new`` was judged on too, so at most
    one lands); which one, the Lease's holder, token and claimed tick will say. The earliest send
    is kept: a grant's keep-alive budget runs from the send of the write that was applied, and
    that may be the earlier one (never count it as later)."""
    if earlier is None:
        return new
    return replace(
        new,
        sent_mono=min(earlier.sent_mono, new.sent_mono),
        sent_wall=min(earlier.sent_wall, new.sent_wall),
        earlier_tokens=earlier.earlier_tokens | {earlier.fencing_token} | new.earlier_tokens,
        # each carried the record then kept (the same one: a record is kept until written)
        carried=new.carried or earlier.carried,
    )


def landed(pending: PendingClaim, lease: LeaseView) -> PendingClaim:
    """``pending`` as applied on ``lease``: the tick and token are the ones the Lease says."""
    claimed = lease.job.claimed_tick
    return replace(
        pending,
        tick=pending.tick if claimed is None else claimed,
        fencing_token=lease.fencing_token,
    )


class Decision(Enum):
    """What a replica does with its own claim found applied after it gave up on it."""

    RUN = "run"
    RELEASE = "release"


@dataclass(frozen=True, slots=True)
class Adoption:
    """The decision on an applied claim, and why (logged at WARNING)."""

    decision: Decision
    why: str


def adopt_or_release(
    pending: PendingClaim,
    *,
    now: datetime,
    mono: float,
    grace: float,
    lock_at_most_for: float,
) -> Adoption:
    """Run the tick of an applied claim, or give the lock back at once.

    Run only when both hold: the tick is still within ``grace`` of its time on the wall clock
    (the promise a late tick gets anyway), and less than two thirds of ``lock_at_most_for`` has
    passed since the write was sent on the monotonic clock (the budget every grant has before
    ``ctx.lost``: past it, other replicas may soon take the lock over, and the run would start
    already lost). Nobody else can have run the tick: it is claimed with this replica's token.
    """
    late = (now - pending.tick).total_seconds()
    spent = mono - pending.sent_mono
    budget = lock_at_most_for * 2 / 3
    if late > grace:
        return Adoption(Decision.RELEASE, f"tick is {late:.1f}s late, past its grace {grace:g}s")
    if spent >= budget:
        return Adoption(
            Decision.RELEASE,
            f"claim sent {spent:.1f}s ago, past the keep-alive budget {budget:g}s",
        )
    return Adoption(Decision.RUN, f"tick is {late:.1f}s late, within its grace {grace:g}s")


def never_ran(pending: PendingClaim, *, me: str, now: datetime, why: str) -> RunRecord:
    """The run record of a tick this replica claimed (indeterminately) and will not run."""
    return RunRecord(
        holder=me,
        tick=pending.tick,
        started=pending.sent_wall,
        finished=now,
        outcome="lost",
        fencing_token=pending.fencing_token,
        error=f"not run: its claim was applied after the write timed out ({why})",
    )


def silent_holder(
    record: LeaseRecord,
    state: JobState,
    *,
    me: str,
    unchanged_for: float,
    keepalive_interval: float,
    request_timeout: float,
    renewed_ago: float | None = None,
) -> bool:
    """Whether a held lock's holder has gone silent mid-run: its claimed tick has no run
    recorded, and the Lease has not changed for longer than one keep-alive interval plus one
    request timeout (a live holder would have extended it by then). A lock kept idle by
    ``lock_at_least_for`` records its run, so it is not silent.

    Also silent at once when the holder's own last write is that old by its ``renewTime``
    (``renewed_ago``, on this replica's wall clock), with one more keep-alive allowed for clock
    skew: a claim applied long after it was sent, whose holder gave up on it (a LEADER job's
    ex-leader cut off from the server: the simulation's residue of ``held-unsettled-ex-leader``)
    is reported from the first skip, not only once it has also been seen unchanged that long.
    Only a report rides on the wall clock here; expiry never does."""
    if not record.held or record.holder == me or record.malformed:
        return False
    claimed = state.claimed_tick
    if claimed is None:
        return False
    if state.last_run is not None and state.last_run.tick >= claimed:
        return False
    silence = keepalive_interval + request_timeout
    if renewed_ago is not None and renewed_ago > silence + keepalive_interval:
        return True
    return unchanged_for > silence

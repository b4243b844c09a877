"""Per-job locks on Leases, ShedLock-style: claim a tick, keep it alive, release with a record.

:class:`JobLock` drives the pure decisions in :mod:`k8slease.jobs.lockrules` with a transport,
a clock and a keep-alive thread. One conditional write grants the lock, claims the tick and bumps
the fencing token; one conditional write releases it and stores the run record. With a
:class:`~k8slease.jobs.lockcache.ClaimCache` (what ``Jobs`` gives it) the claim is judged from
the informer's view after this replica's wait in the tick's claim order
(:mod:`k8slease.jobs.claimorder`), so a skip costs no request at all and a read happens only after
a lost conditional write; without one (or while the informer is not synced) the lock reads the
Lease first, one GET per claim.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime

from k8slease.errors import (
    AlreadyExists,
    ConfigError,
    Conflict,
    NotFound,
    Unavailable,
)
from k8slease.jobs.claimorder import claim_delay, claim_rank
from k8slease.jobs.grant import Grant, LostFlag
from k8slease.jobs.jobwiring import JobWiring
from k8slease.jobs.journal import RunJournal
from k8slease.jobs.lockbudget import claim_budget, keep_budget
from k8slease.jobs.lockcache import ClaimCache
from k8slease.jobs.lockhold import LockHolding
from k8slease.jobs.lockrules import (
    Claim,
    Verdict,
    check_lock_times,
    judge_claim,
    newest_plausible_claim,
)
from k8slease.jobs.settle import retry_kept_release, settle
from k8slease.jobs.unsettled import PendingClaim, silent_holder, still_pending
from k8slease.lease.budget import request_budget
from k8slease.lease.jobrecord import (
    JobState,
    RunRecord,
)
from k8slease.lease.keptruns import merge_run
from k8slease.lease.observe import Observations, Seen
from k8slease.lease.record import LeaseRecord
from k8slease.lease.store import LeaseStore
from k8slease.lease.view import LeaseView
from k8slease.logs import get_logger
from k8slease.names import LABEL_GROUP, LABEL_JOB, LABEL_ROLE, ROLE_JOB, job_lease_name

__all__ = ["Grant", "JobLock", "LostFlag"]

log = get_logger("k8slease.locks")

#: Reads of the job's Lease, in all, while the informer keeps overtaking the answers.
_READS_WHEN_OVERTAKEN = 3


@dataclass(frozen=True, slots=True)
class _Judged:
    """A claim judged, with the record it was judged on (for a deleted Lease: the one seen
    before the deletion), which the grant write reports on."""

    claim: Claim
    record: LeaseRecord | None
    #: this replica's run record whose release could not be written, merged into the claim
    carried: RunRecord | None = None
    #: the unfinished claimed tick of a holder gone silent mid-run (skips reported at WARNING)
    silent: datetime | None = None


class JobLock(LockHolding):
    """The lock of one job of one group, as seen by one replica.

    ``lock_at_most_for`` (seconds) is the Lease duration: the ceiling after which a crashed
    holder's lock may be taken. ``lock_at_least_for`` (seconds, default 0) keeps the lock after a
    run that finished sooner, so replicas whose schedulers fire a little late skip. While a job
    runs its lock is extended every ``lock_at_most_for / 3`` seconds. ``ordered`` (default) makes
    this replica first wait for its turn in the tick's claim order (LEADER jobs, fired by the
    leader alone, do not wait). ``grace`` (seconds; default 300) is how long after its time a tick
    still runs: a claim's requests may take as long as that and the grant's keep budget allow, an
    extension the time the grant has left (:mod:`k8slease.jobs.lockbudget`). Whose lock it is and
    what it sends through come from ``wiring`` (:class:`~k8slease.jobs.jobwiring.JobWiring`): with
    its claim cache, claims are judged from the informer's view; with its journal, a run record
    whose release could not be written is also kept there (:mod:`k8slease.jobs.journal`).
    """

    def __init__(
        self,
        wiring: JobWiring,
        *,
        job: str,
        lock_at_most_for: float,
        lock_at_least_for: float = 0.0,
        ordered: bool = True,
        grace: float = 300.0,
    ) -> None:
        check_lock_times(lock_at_most_for, lock_at_least_for)
        if not wiring.identity:
            raise ConfigError("identity must not be empty")
        self.transport = wiring.transport
        #: the transport's requests answering decoded Leases (each is the one request it wraps)
        self.leases = LeaseStore(wiring.transport)
        self.group = wiring.group
        self.job = job
        self.name = job_lease_name(wiring.group, job)
        self.identity = wiring.identity
        self.lock_at_most_for = float(lock_at_most_for)
        self.lock_at_least_for = float(lock_at_least_for)
        self.keepalive_interval = self.lock_at_most_for / 3
        self._clock = wiring.clock
        self._events = wiring.events
        self._observations = wiring.observations or Observations(self._clock)
        cache = wiring.cache
        if cache is not None and cache.observations is not self._observations:
            raise ConfigError("cache must read the observations the lock keeps")
        self._cache = cache
        self._ordered = ordered
        #: how late a tick may still run (the job's grace): a claim may take no longer, and a
        #: claim applied late runs only within it
        self.grace = float(grace)
        self._active: Grant | None = None
        #: a claim write whose answer did not arrive (issue 26), settled by the next look
        self._pending: PendingClaim | None = None
        #: where a kept run record is also written, for the operator should this process die
        self._journal = wiring.journal if wiring.journal is not None else RunJournal(None)
        self._kept: RunRecord | None = None
        self._highest_token = 0
        self._reported_suspect: datetime | None = None
        self._active_lock = threading.Lock()
        self._log = log.bind(lease=self.name, job=job, group=self.group, identity=self.identity)

    @property
    def _unwritten(self) -> RunRecord | None:
        """A run record whose release could not be written, carried by the next write (and
        kept in the replica's journal meanwhile, :mod:`k8slease.jobs.journal`)."""
        return self._kept

    @_unwritten.setter
    def _unwritten(self, run: RunRecord | None) -> None:
        self._kept = run
        self._journal.keep(self.name, self.identity, run)

    # -- reading ------------------------------------------------------------------------------

    def read_state(self) -> JobState | None:
        """The job's state from its Lease, or ``None`` when the Lease does not exist yet.

        Not fed to what this replica has seen: the read runs outside the claim path (the
        catch-up when a term begins), so its answer may be older than a write of this lock
        answered meanwhile (a release); seen last, it would make the Lease look held again by
        this replica's finished grant, and the next tick would be skipped quietly "held by"
        itself (soak seeds 8049, 8197: LEADER ticks lost without a report)."""
        view = self.leases.find(self.name)
        return None if view is None else view.job

    def seen(self) -> LeaseView | None:
        """The job's Lease as this replica last saw it (informer or own writes), no request."""
        observation = self._observations.current(self.name).observation
        return None if observation is None else observation.view

    @property
    def running(self) -> bool:
        """Whether a grant of this lock is being run (claimed, not yet released)."""
        return self._active is not None

    @property
    def observations(self) -> Observations:
        """What this replica has seen of the group's job Leases."""
        return self._observations

    # -- claiming -----------------------------------------------------------------------------

    def try_acquire(self, tick: datetime, *, reclaim_own: bool = False) -> Grant | Verdict:
        """Claim ``tick``: a :class:`Grant` when this replica is to run it, else why it skips.

        Raises :class:`~k8slease.errors.TransportError` (``Unavailable``, ``Forbidden``) when the
        API server cannot be asked; the caller decides whether that means skip or fail open.
        ``reclaim_own`` lets this replica claim the next tick while it still holds the lock idle.
        """
        with self._active_lock:
            if self._active is not None:
                self._log.debug("lock.skipped", tick=tick.isoformat(), why="running")
                return Verdict.RUNNING
            budget = claim_budget(
                self.lock_at_most_for,
                tick=tick,
                grace=self.grace,
                now=self._clock.now(),
                floor=self.transport.request_timeout,
            )
            with request_budget(budget, connect=self.transport.request_timeout):
                grant_or_skip = self._try_acquire(tick, reclaim_own=reclaim_own)
            if isinstance(grant_or_skip, Grant):
                self._active = grant_or_skip
            return grant_or_skip

    def _try_acquire(self, tick: datetime, *, reclaim_own: bool) -> Grant | Verdict:
        if self._pending is not None or self._unwritten is not None:
            adopted = settle(self)
            if adopted is not None:
                return adopted
        result = self._claim(tick, reclaim_own=reclaim_own)
        if result in (Verdict.HELD, Verdict.LOST_RACE) and self._pending is not None:
            # the view showed this replica's own unanswered claim landing while it judged:
            # settle it now (run it, or release and claim again) instead of skipping as "held
            # by" itself (soak seed 7141)
            adopted = settle(self)
            if adopted is not None:
                return adopted
            if self._pending is None:
                return self._claim(tick, reclaim_own=reclaim_own)
        return result

    def _claim(self, tick: datetime, *, reclaim_own: bool) -> Grant | Verdict:
        cache = self._cache
        if cache is not None and cache.usable():
            return self._claim_from_cache(cache, tick, reclaim_own=reclaim_own)
        lease, seen = self._read_and_see()
        judged = self._judge(lease, seen, tick, reclaim_own=reclaim_own)
        if judged.claim.verdict is not Verdict.GRANT:
            return self._skipped(tick, judged)
        return self._write_claim(lease, judged, tick)

    def _claim_from_cache(
        self, cache: ClaimCache, tick: datetime, *, reclaim_own: bool
    ) -> Grant | Verdict:
        """Claim from the informer's view: no read. This replica's place in the tick's claim
        order decides how long it first waits for someone else's claim to show; then, if the
        view still says the tick is free, one conditional write. A 409 (someone won, or the view
        was stale) is the one case that reads the Lease, to judge again on what is there.

        The view is the same observer a read feeds: a Lease the informer saw deleted is judged
        on what was seen before the deletion (its holder waited out, its highest token and
        claimed tick kept), exactly as after a read that found it gone."""
        wait = 0.0  # no turn to wait for when only one replica fires (LEADER jobs)
        if self._ordered:
            members = cache.members(self._clock.monotonic())
            rank = claim_rank(members, self.identity, self.job, tick)
            wait = claim_delay(rank, step=cache.step, spread=cache.spread)
        deadline = self._clock.monotonic() + wait
        while True:
            generation = self._observations.generation
            seen = self._observations.current(self.name)
            lease = None if seen.observation is None else seen.observation.view
            judged = self._judge(lease, seen, tick, reclaim_own=reclaim_own)
            remaining = deadline - self._clock.monotonic()
            if judged.claim.verdict is Verdict.ALREADY_CLAIMED or remaining <= 0:
                break
            self._observations.wait_for_change(generation, remaining)
        if judged.claim.verdict is not Verdict.GRANT:
            return self._skipped(tick, judged)
        written = self._write_claim(lease, judged, tick)
        if written is not Verdict.LOST_RACE:
            return written
        fresh, seen = self._read_and_see()
        judged = self._judge(fresh, seen, tick, reclaim_own=reclaim_own)
        if judged.claim.verdict is not Verdict.GRANT:
            self._skipped(tick, judged)
            return Verdict.LOST_RACE
        return self._write_claim(fresh, judged, tick)

    def _look(self, *, fresh: bool) -> tuple[LeaseView | None, bool]:
        """The job's Lease from the informer's view (unless ``fresh`` or the view is not
        usable) or read now; and whether it was read."""
        cache = self._cache
        if not fresh and cache is not None and cache.usable():
            observation = self._observations.current(self.name).observation
            return (None if observation is None else observation.view), False
        return self._read_and_see()[0], True

    def _read_and_see(self) -> tuple[LeaseView | None, Seen]:
        """The job's Lease, read now (``None`` when it does not exist), recorded as seen (an
        absence too: a Lease seen before and now gone keeps what was seen of it).

        An answer the informer overtook (it saw something else while the read was out) may be
        the older of the two; seen last, it would make a Lease released meanwhile look held
        again and the next tick be skipped quietly. It is read again, up to
        ``_READS_WHEN_OVERTAKEN`` times in all; the last answer counts whatever it shows."""
        for attempt in range(1, _READS_WHEN_OVERTAKEN + 1):
            sightings = self._observations.sightings(self.name)
            lease = self.leases.find(self.name)
            if attempt == _READS_WHEN_OVERTAKEN:
                self._observations.see(self.name, lease)
            elif self._observations.see_answer(self.name, lease, sightings=sightings):
                break
        return lease, self._observations.current(self.name)

    def _judge(
        self, lease: LeaseView | None, seen: Seen, tick: datetime, *, reclaim_own: bool
    ) -> _Judged:
        """Judge ``tick`` on ``lease`` as ``seen`` (one snapshot of this Lease's observer)."""
        # what this replica (its own reads and its informer) has seen, kept across a deletion
        self._highest_token = max(self._highest_token, seen.highest_token)
        record: LeaseRecord | None
        now = self._clock.now()
        if lease is None:
            # deleted (or never created): a holder seen before the deletion is waited out, and
            # no tick seen claimed is claimed again
            observation = seen.observation
            record = None if observation is None else observation.held_before_absence
            state = JobState(claimed_tick=seen.highest_claimed_tick)
        else:
            self._highest_token = max(self._highest_token, lease.fencing_token)
            record, state = lease.record, lease.job
        # a run record whose release could not be written rides on this claim (issue 26); on
        # a deleted Lease's create too: else that create recorded the run lost (its tick seen
        # claimed, unfinished) and the record was dropped with the grant
        carried = self._unwritten
        if carried is not None:
            token = carried.fencing_token if lease is None else lease.fencing_token
            merged = merge_run(state, carried, lease_token=token)
            if merged is None:
                self._unwritten = carried = None  # the Lease records it already
            else:
                state = merged
        claim = judge_claim(
            record,
            state,
            me=self.identity,
            tick=tick,
            unchanged_for=seen.unchanged_for,
            lock_at_most_for=self.lock_at_most_for,
            now=now,
            reclaim_own=reclaim_own,
            highest_token_seen=self._highest_token,
            # a far-future claim set aside must not hide a tick seen claimed before it
            seen_claimed=newest_plausible_claim(
                seen.claimed_ticks, now=now, bound=self.lock_at_most_for
            ),
        )
        if claim.suspect_claim is not None:
            self._report_suspect(claim.suspect_claim, now, lease)
        silent = None
        if (
            claim.verdict is Verdict.HELD
            and record is not None
            and silent_holder(
                record,
                state,
                # no grant is active here: a Lease naming this replica mid-run is a claim this
                # process does not know of (a former incarnation's), silent too
                me="",
                unchanged_for=seen.unchanged_for,
                keepalive_interval=self.keepalive_interval,
                request_timeout=self.transport.request_timeout,
                renewed_ago=_age(record.renew_time, now),
            )
        ):
            silent = state.claimed_tick
        return _Judged(claim=claim, record=record, carried=carried, silent=silent)

    def _skipped(self, tick: datetime, judged: _Judged) -> Verdict:
        claim = judged.claim
        if judged.silent is not None:
            # a skip is DEBUG, but not one for a holder that stopped renewing mid-run: the tick
            # is lost unless that holder is alive and unaware (issue 26)
            self._log.warning(
                "lock.skipped_silent_holder",
                tick=tick.isoformat(),
                detail=claim.detail,
                claimed_tick=judged.silent.isoformat(),
            )
            return claim.verdict
        self._log.debug(
            "lock.skipped", tick=tick.isoformat(), why=claim.verdict.value, detail=claim.detail
        )
        return claim.verdict

    def _write_claim(
        self, lease: LeaseView | None, judged: _Judged, tick: datetime
    ) -> Grant | Verdict:
        """Write a granted claim conditionally on ``lease`` (create when ``None``)."""
        claim, record = judged.claim, judged.record
        assert claim.record is not None and claim.state is not None
        # the write as sent: what settles it if no answer comes, and what its grant starts from
        write = PendingClaim(
            tick=tick,
            fencing_token=claim.record.fencing_token,
            resource_version="" if lease is None else lease.resource_version,
            sent_wall=claim.record.renew_time or self._clock.now(),
            sent_mono=self._clock.monotonic(),
            carried=judged.carried,
        )
        try:
            if lease is None:
                written = self.leases.create_new(
                    self.name,
                    namespace=self.transport.namespace,
                    record=claim.record,
                    labels={LABEL_GROUP: self.group, LABEL_ROLE: ROLE_JOB, LABEL_JOB: self.job},
                    state=claim.state,
                )
            else:
                written = self.leases.update(
                    self.name, lease, record=claim.record, state=claim.state
                )
        except NotFound:
            if lease is None:  # a create is refused with 404 only when the namespace is missing
                raise
            self._log.debug("lock.skipped", tick=tick.isoformat(), why="lost-race")
            return Verdict.LOST_RACE
        except (AlreadyExists, Conflict):
            self._log.debug("lock.skipped", tick=tick.isoformat(), why="lost-race")
            return Verdict.LOST_RACE
        except Unavailable as exc:
            # no answer: the claim may yet be applied; the next look at the Lease settles it
            self._pending = still_pending(self._pending, write)
            self._highest_token = max(self._highest_token, claim.record.fencing_token)
            self._log.warning(
                "lock.claim_unanswered",
                tick=tick.isoformat(),
                fencing_token=claim.record.fencing_token,
                error=str(exc),
            )
            raise
        if judged.carried is not None and self._unwritten is judged.carried:
            self._unwritten = None
        # a write conditioned on the same version (or a create) won: an unanswered claim
        # before it can no longer apply
        self._pending = None
        view = written
        self._observations.see(self.name, view)
        grant = self._grant(view, write)
        if record is not None and record.malformed:
            self._log.warning("lock.repaired_malformed_lease", problems=list(record.problems))
        if claim.lost_tick is not None and record is not None:
            self._report_lost(claim.lost_tick, record.holder, view)
        self._log.info("lock.acquired", tick=tick.isoformat(), fencing_token=grant.fencing_token)
        return grant

    def _grant(self, view: LeaseView, write: PendingClaim) -> Grant:
        """The grant of the claim ``write`` (its tick and token, sent at ``write.sent_mono``),
        which ``view`` shows applied."""
        self._highest_token = max(self._highest_token, write.fencing_token)
        return Grant(
            job=self.job,
            tick=write.tick,
            fencing_token=write.fencing_token,
            started_wall=write.sent_wall,
            started_mono=write.sent_mono,
            _view=view,
            _last_ok_send=write.sent_mono,
            _clock=self._clock,
            _budget=keep_budget(self.lock_at_most_for),
        )

    def _report_suspect(self, claimed: datetime, now: datetime, lease: LeaseView | None) -> None:
        """Warn (once per suspect tick) and post an Event: a claimed tick far in the future."""
        if claimed == self._reported_suspect:
            return
        self._reported_suspect = claimed
        message = (
            f"job {self.job}: claimed tick {claimed.isoformat()} is more than lock_at_most_for "
            f"({self.lock_at_most_for:g}s) ahead of {self.identity}'s clock ({now.isoformat()}): "
            "a fast wall clock or a hand edit; ticks after the last run are claimed over it"
        )
        self._log.warning(
            "lock.future_claim", claimed_tick=claimed.isoformat(), now=now.isoformat()
        )
        if self._events is not None and lease is not None:
            self._events.post(
                lease.body, reason="FutureTickClaimed", message=message, type_="Warning"
            )

    def _report_lost(self, tick: datetime, holder: str, lease: LeaseView) -> None:
        """A tick claimed by ``holder`` never finished: warn and post an Event (the grant
        recorded it as a ``lost`` run, which the operator reports too)."""
        self._log.warning("lock.tick_lost", lost_tick=tick.isoformat(), holder=holder)
        if self._events is not None:
            self._events.post(
                lease.body,
                reason="RunLost",
                message=f"job {self.job} tick {tick.isoformat()} claimed by {holder} never "
                f"finished: its holder stopped renewing the lock; taken over by {self.identity}",
                type_="Warning",
            )

    def _retry_kept_release(self, *, until: float, every: float) -> None:
        retry_kept_release(self, until=until, every=every)


def _age(when: datetime | None, now: datetime) -> float | None:
    """Seconds from ``when`` (a time a holder wrote) to ``now`` on this replica's wall clock."""
    return None if when is None else (now - when).total_seconds()

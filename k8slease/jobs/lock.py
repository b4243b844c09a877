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
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from k8slease.callbacks import CancelHooks
from k8slease.clock import Clock, SystemClock
from k8slease.errors import AlreadyExists, ConfigError, Conflict, NotFound, TransportError
from k8slease.jobs.claimorder import claim_delay, claim_rank
from k8slease.jobs.lockcache import ClaimCache
from k8slease.jobs.lockrules import (
    Claim,
    Verdict,
    check_lock_times,
    extend,
    judge_claim,
    newest_plausible_claim,
    release,
)
from k8slease.kube.events import EventRecorder
from k8slease.lease.jobrecord import (
    JobState,
    Outcome,
    RunRecord,
    lease_with_job_state,
)
from k8slease.lease.observe import Observations, Seen
from k8slease.lease.record import LeaseRecord, lease_with_record, new_lease
from k8slease.lease.transport import LeaseTransport
from k8slease.lease.view import LeaseView
from k8slease.logs import get_logger
from k8slease.names import LABEL_GROUP, LABEL_JOB, LABEL_ROLE, ROLE_JOB, job_lease_name

log = get_logger("k8slease.locks")


@dataclass(frozen=True, slots=True)
class _Judged:
    """A claim judged, with the record it was judged on (for a deleted Lease: the one seen
    before the deletion), which the grant write reports on."""

    claim: Claim
    record: LeaseRecord | None


class LostFlag(threading.Event):
    """``Grant.lost``: set when the lock could not be kept, and read as set the moment the
    keep-alive budget has run out on this replica's monotonic clock, even if the keep-alive
    thread has not run since (a process resumed after SIGSTOP learns it before acting), by
    ``is_set`` and by ``wait``."""

    def __init__(self) -> None:
        super().__init__()
        self.expired: Callable[[], bool] = _never
        self._once = threading.Lock()

    def is_set(self) -> bool:
        return super().is_set() or self.expired()

    def wait(self, timeout: float | None = None) -> bool:
        return super().wait(timeout) or self.expired()

    def set_once(self) -> bool:
        """Set the flag; returns whether this call set it."""
        with self._once:
            if super().is_set():
                return False
            self.set()
            return True


def _never() -> bool:
    return False


@dataclass(eq=False)
class Grant:
    """A lock this replica holds for one tick of one job.

    ``lost`` is set when the lock could not be kept alive (another replica may take over);
    ``fencing_token`` is the grant's token, to pass to the systems the job writes to.
    """

    job: str
    tick: datetime
    fencing_token: int
    started_wall: datetime
    started_mono: float
    lost: LostFlag = field(default_factory=LostFlag)
    #: the Lease as last written by (or re-read for) this grant, decoded once
    _view: LeaseView | None = field(default=None, repr=False)
    _last_ok_send: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)
    _mutex: threading.Lock = field(default_factory=threading.Lock, repr=False)
    #: run (from the keep-alive thread) when the lock is lost while held; cancels coroutine jobs
    lost_hooks: CancelHooks = field(default_factory=CancelHooks, repr=False)

    #: monotonic clock and keep-alive budget (seconds after the last good write was sent)
    _clock: Clock | None = field(default=None, repr=False)
    _budget: float = float("inf")

    def __post_init__(self) -> None:
        self.lost.expired = self._budget_spent

    def _budget_spent(self) -> bool:
        if self._clock is None or self._stop.is_set():
            return False
        if self._clock.monotonic() - self._last_ok_send < self._budget:
            return False
        self.mark_lost()
        return True

    def mark_lost(self) -> None:
        """Record that the lock could not be kept, and tell whoever asked."""
        if self.lost.set_once():
            self.lost_hooks.fire()


class JobLock:
    """The lock of one job of one group, as seen by one replica.

    ``lock_at_most_for`` (seconds) is the Lease duration: the ceiling after which a crashed
    holder's lock may be taken. ``lock_at_least_for`` (seconds, default 0) keeps the lock after a
    run that finished sooner, so replicas whose schedulers fire a little late skip. While a job
    runs its lock is extended every ``lock_at_most_for / 3`` seconds. ``cache`` lets claims be
    judged from the informer's view; ``ordered`` (default) makes this replica first wait for its
    turn in the tick's claim order (LEADER jobs, fired by the leader alone, do not wait).
    """

    def __init__(
        self,
        transport: LeaseTransport,
        *,
        group: str,
        job: str,
        identity: str,
        lock_at_most_for: float,
        lock_at_least_for: float = 0.0,
        clock: Clock | None = None,
        events: EventRecorder | None = None,
        observations: Observations | None = None,
        cache: ClaimCache | None = None,
        ordered: bool = True,
    ) -> None:
        check_lock_times(lock_at_most_for, lock_at_least_for)
        if not identity:
            raise ConfigError("identity must not be empty")
        self.transport = transport
        self.group = group
        self.job = job
        self.name = job_lease_name(group, job)
        self.identity = identity
        self.lock_at_most_for = float(lock_at_most_for)
        self.lock_at_least_for = float(lock_at_least_for)
        self.keepalive_interval = self.lock_at_most_for / 3
        self._clock = clock or SystemClock()
        self._events = events
        self._observations = observations or Observations(self._clock)
        if cache is not None and cache.observations is not self._observations:
            raise ConfigError("cache must read the observations the lock keeps")
        self._cache = cache
        self._ordered = ordered
        self._active: Grant | None = None
        self._highest_token = 0
        self._reported_suspect: datetime | None = None
        self._active_lock = threading.Lock()
        self._log = log.bind(lease=self.name, job=job, group=group, identity=identity)

    # -- reading ------------------------------------------------------------------------------

    def read_state(self) -> JobState | None:
        """The job's state from its Lease, or ``None`` when the Lease does not exist yet."""
        try:
            view = LeaseView.decode(self.transport.get(self.name))
        except NotFound:
            return None
        self._observations.see(self.name, view)
        return view.job

    def seen(self) -> LeaseView | None:
        """The job's Lease as this replica last saw it (informer or own writes), no request."""
        observation = self._observations.current(self.name).observation
        return None if observation is None else observation.view

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
            grant_or_skip = self._try_acquire(tick, reclaim_own=reclaim_own)
            if isinstance(grant_or_skip, Grant):
                self._active = grant_or_skip
            return grant_or_skip

    def _try_acquire(self, tick: datetime, *, reclaim_own: bool) -> Grant | Verdict:
        cache = self._cache
        if cache is not None and cache.usable():
            return self._claim_from_cache(cache, tick, reclaim_own=reclaim_own)
        lease, seen = self._read_and_see()
        judged = self._judge(lease, seen, tick, reclaim_own=reclaim_own)
        if judged.claim.verdict is not Verdict.GRANT:
            return self._skipped(tick, judged.claim)
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
            return self._skipped(tick, judged.claim)
        written = self._write_claim(lease, judged, tick)
        if written is not Verdict.LOST_RACE:
            return written
        fresh, seen = self._read_and_see()
        judged = self._judge(fresh, seen, tick, reclaim_own=reclaim_own)
        if judged.claim.verdict is not Verdict.GRANT:
            self._skipped(tick, judged.claim)
            return Verdict.LOST_RACE
        return self._write_claim(fresh, judged, tick)

    def _read_and_see(self) -> tuple[LeaseView | None, Seen]:
        """The job's Lease, read now (``None`` when it does not exist), recorded as seen (an
        absence too: a Lease seen before and now gone keeps what was seen of it)."""
        try:
            lease: LeaseView | None = LeaseView.decode(self.transport.get(self.name))
        except NotFound:
            lease = None
        self._observations.see(self.name, lease)
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
        return _Judged(claim=claim, record=record)

    def _skipped(self, tick: datetime, claim: Claim) -> Verdict:
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
        now = claim.record.renew_time or self._clock.now()
        sent = self._clock.monotonic()
        try:
            if lease is None:
                body = new_lease(
                    self.name,
                    self.transport.namespace,
                    claim.record,
                    labels={LABEL_GROUP: self.group, LABEL_ROLE: ROLE_JOB, LABEL_JOB: self.job},
                )
                written = self.transport.create(lease_with_job_state(body, claim.state))
            else:
                body = lease_with_job_state(
                    lease_with_record(lease.body, claim.record), claim.state
                )
                written = self.transport.replace(self.name, body)
        except NotFound:
            if lease is None:  # a create is refused with 404 only when the namespace is missing
                raise
            self._log.debug("lock.skipped", tick=tick.isoformat(), why="lost-race")
            return Verdict.LOST_RACE
        except (AlreadyExists, Conflict):
            self._log.debug("lock.skipped", tick=tick.isoformat(), why="lost-race")
            return Verdict.LOST_RACE
        view = LeaseView.decode(written)
        self._observations.see(self.name, view)
        self._highest_token = max(self._highest_token, claim.record.fencing_token)
        grant = Grant(
            job=self.job,
            tick=tick,
            fencing_token=claim.record.fencing_token,
            started_wall=now,
            started_mono=sent,
            _view=view,
            _last_ok_send=sent,
            _clock=self._clock,
            _budget=self.lock_at_most_for * 2 / 3,
        )
        if record is not None and record.malformed:
            self._log.warning("lock.repaired_malformed_lease", problems=list(record.problems))
        if claim.lost_tick is not None and record is not None:
            self._report_lost(claim.lost_tick, record.holder, view)
        self._log.info("lock.acquired", tick=tick.isoformat(), fencing_token=grant.fencing_token)
        return grant

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

    # -- keeping ------------------------------------------------------------------------------

    def start_keepalive(self, grant: Grant) -> None:
        """Extend ``grant`` in a background thread until :meth:`finish` is called."""
        thread = threading.Thread(
            target=self._keepalive_loop,
            args=(grant,),
            name=f"k8slease-keepalive-{self.job}",
            daemon=True,
        )
        grant._thread = thread
        thread.start()

    def _keepalive_loop(self, grant: Grant) -> None:
        retry = min(1.0, self.keepalive_interval / 2)
        wait = self.keepalive_interval
        while not grant._stop.wait(wait):
            ok = self.extend_once(grant)
            wait = self.keepalive_interval if ok else retry
            if grant.lost.is_set():
                return

    def extend_once(self, grant: Grant) -> bool:
        """Extend ``grant`` now with one conditional write; returns whether it was extended.

        When no extension has succeeded for two thirds of ``lock_at_most_for`` since the last
        successful one was sent, ``grant.lost`` is set: other replicas may take the lock soon.
        """
        with grant._mutex:
            if grant._stop.is_set() or grant.lost.is_set():
                return False
            sent = self._clock.monotonic()
            ok = self._write_extension(grant)
            if ok:
                grant._last_ok_send = sent
                return True
            if sent - grant._last_ok_send >= self.lock_at_most_for * 2 / 3:
                grant.mark_lost()
                self._log.warning(
                    "lock.lost", tick=grant.tick.isoformat(), fencing_token=grant.fencing_token
                )
            return False

    def _write_extension(self, grant: Grant, *, retry_on_conflict: bool = True) -> bool:
        held = grant._view
        assert held is not None
        record = extend(held.record, now=self._clock.now())
        try:
            written = self.transport.replace(self.name, lease_with_record(held.body, record))
            grant._view = LeaseView.decode(written)
            return True
        except Conflict:
            fresh = self._fresh_if_still_mine(grant) if retry_on_conflict else None
            if fresh is None:
                grant.mark_lost()
                self._log.warning("lock.lost", tick=grant.tick.isoformat(), why="taken-over")
                return False
            grant._view = fresh
            return self._write_extension(grant, retry_on_conflict=False)
        except TransportError as exc:
            self._log.warning("lock.extend_failed", error=str(exc))
            return False

    def _fresh_if_still_mine(self, grant: Grant) -> LeaseView | None:
        try:
            fresh = LeaseView.decode(self.transport.get(self.name))
        except TransportError:
            return None
        if fresh.record.holder == self.identity and fresh.fencing_token == grant.fencing_token:
            return fresh
        return None

    # -- releasing ----------------------------------------------------------------------------

    def finish(self, grant: Grant, outcome: Outcome, *, error: str | None = None) -> RunRecord:
        """Stop keeping ``grant`` alive and release it, writing the run record in the same write.

        A grant that was lost while the job ran is recorded with outcome ``lost``. Returns the
        run record (also when it could not be written; that is logged).
        """
        overran = grant.lost.is_set()  # before stopping: the budget may have run out unseen
        grant._stop.set()
        with self._active_lock:
            if self._active is grant:
                self._active = None
        if grant._thread is not None and grant._thread is not threading.current_thread():
            grant._thread.join(timeout=self.transport.request_timeout * 2)
        if overran or grant.lost.is_set():
            outcome = "lost"
        run = RunRecord(
            holder=self.identity,
            tick=grant.tick,
            started=grant.started_wall,
            finished=self._clock.now(),
            outcome=outcome,
            fencing_token=grant.fencing_token,
            error=error,
        )
        ran_for = self._clock.monotonic() - grant.started_mono
        with grant._mutex:
            held = grant._view
            assert held is not None
            for attempt in range(2):
                record, state = release(
                    held.record,
                    held.job,
                    run,
                    ran_for=ran_for,
                    lock_at_least_for=self.lock_at_least_for,
                    now=run.finished,
                )
                try:
                    written = self.transport.replace(
                        self.name,
                        lease_with_job_state(lease_with_record(held.body, record), state),
                    )
                    self._observations.see(self.name, LeaseView.decode(written))
                    break
                except Conflict:
                    fresh = self._fresh_if_still_mine(grant) if attempt == 0 else None
                    if fresh is None:
                        self._log.warning("lock.release_lost", tick=grant.tick.isoformat())
                        break
                    held = fresh
                except TransportError as exc:
                    self._log.warning("lock.release_failed", error=str(exc))
                    break
        self._log.info(
            "job.finished",
            tick=grant.tick.isoformat(),
            outcome=run.outcome,
            fencing_token=grant.fencing_token,
            seconds=round(ran_for, 3),
        )
        if run.outcome != "succeeded" and self._events is not None:
            self._events.post(
                held.body,
                reason="JobFailed" if run.outcome == "failed" else "JobLockLost",
                message=f"job {self.job} tick {grant.tick.isoformat()} on {self.identity}: "
                f"{run.outcome}{': ' + error if error else ''}",
                type_="Warning",
            )
        return run

"""A replica's job scheduler and lock in the simulation, on the real lock code.

Each replica fires the job at every ``period`` of its own wall clock (so clock skew moves its
ticks) and claims the tick as :class:`k8slease.jobs.lock.JobLock` does, judging with the real
``JobLock._judge`` (:func:`~k8slease.jobs.lockrules.judge_claim` on a snapshot of the real
:class:`~k8slease.lease.observe.Observations`):

* while its informer is synced (listed, watch running): from the informer's view, no read. It
  first waits its turn in the tick's claim order (the real
  :func:`~k8slease.jobs.claimorder.claim_rank` over the members the real
  :class:`~k8slease.jobs.lockcache.ClaimCache` collected, and
  :func:`~k8slease.jobs.claimorder.claim_delay`), judging again whenever its view changes and
  stopping as soon as the tick shows claimed; then one conditional write (PUT on the
  resourceVersion and uid it judged on, or a create). On a 409 it reads once, judges again and
  writes once more if still granted;
* while its informer is not synced (its watch broke: a partition, a relist after an error):
  one read, a judgement, one conditional write (a 409 is a lost race).

One claim or run at a time (APScheduler's ``max_instances=1``): a tick that fires meanwhile is
dropped and reported. A claim whose write got no answer is settled before the next claim, as
the lock's ``settle`` does (issue 26): run if it landed in time, else released with a kept run
record. What happened to every tick on every replica is recorded for the checks
(``sim_ledger``).

:class:`JobReplica` is built in layers, one module each: ``sim_informer`` (its requests and the
informer's view of the job Lease), ``sim_jobrun`` (its runs: keep-alive, release, kept run
records), ``sim_jobclaim`` (a claim's judgement and write) and this one (the scheduler, the
claim order and the settling).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from k8slease.errors import Conflict, TransportError, Unavailable
from k8slease.jobs.claimorder import claim_delay, claim_rank
from k8slease.jobs.jobwiring import JobWiring
from k8slease.jobs.lock import JobLock
from k8slease.jobs.lockbudget import claim_budget
from k8slease.jobs.lockrules import Verdict
from k8slease.jobs.unsettled import (
    Decision,
    Settled,
    adopt_or_release,
    landed,
    never_ran,
    settle_claim,
)
from k8slease.lease.jobrecord import lease_with_job_state
from k8slease.lease.keptruns import merge_run
from k8slease.lease.view import LeaseView
from tests.sim.sim_core import T0, Clock, Network, World
from tests.sim.sim_informer import SimClock
from tests.sim.sim_jobclaim import ClaimingReplica
from tests.sim.sim_jobrun import kept_release
from tests.sim.sim_ledger import JOB, Ledger

#: The claim paths a replica may take: ``ordered`` (the lock's), ``read-first`` (always read, as
#: while the informer is not synced) and ``unconditional`` (``ordered`` with a write that
#: overwrites whatever is there: a safeguard removed, to show that the checks catch it).
CLAIM_PATHS = ("ordered", "read-first", "unconditional")


class _NoTransport:
    namespace = "sim"
    request_timeout = 5.0


class _Waiting:
    """A claim waiting for its turn in the tick's claim order."""

    def __init__(self, k: int, tick: datetime, deadline: float) -> None:
        self.k = k
        self.tick = tick
        self.deadline = deadline


#: Whether a kept run record is written into a free Lease at the replica's next look
#: (``settle._write_correction``, issue 26), as the code does. Tests whose seeds were found on
#: runs without it (test_sim.py) set it off: the write changes a run's course from there on.
WRITE_CORRECTIONS = True


class JobReplica(ClaimingReplica):
    """A replica's job: its scheduler fires every tick, claimed on the real lock's rules."""

    def __init__(
        self,
        index: int,
        world: World,
        net: Network,
        clock: Clock,
        ledger: Ledger,
        *,
        period: float,
        lock_at_most_for: float,
        run_time: tuple[float, float],
        claim_path: str = "ordered",
        job: str = JOB,
    ) -> None:
        assert claim_path in CLAIM_PATHS, claim_path
        super().__init__(index, world, net, clock, ledger, job)
        self.period = period
        self.at_most = lock_at_most_for
        self.run_time = run_time
        self.claim_path = claim_path
        # the real lock, for its judgement (``_judge``: judge_claim on an observer snapshot,
        # the highest token kept, a deleted Lease judged on what was seen before)
        wiring = JobWiring(
            transport=_NoTransport(),  # type: ignore[arg-type]
            group="g",
            identity=self.me,
            clock=SimClock(self),
            observations=self.observations,
            cache=self.cache,
        )
        self.lock = JobLock(wiring, job=self.job, lock_at_most_for=lock_at_most_for)
        self.lock._report_suspect = lambda *args: None  # type: ignore[method-assign]
        #: a claim or a run in progress (one at a time)
        self.busy = False
        #: the tick whose lost race last settled an unanswered claim (once per tick)
        self._settled_for = -1
        #: the token of the claim write in flight (for the checks)
        self.in_flight = None
        #: the request budget of the claim in progress (set when the tick fires)
        self.claim_timeout = net.timeout
        self.waiting: _Waiting | None = None
        #: the grant being run or released (for the checks: see ``Ledger.running``)
        self.current = None
        ledger.running[self.me] = self._runs
        #: a claim write whose answer did not arrive (JobLock._pending), with (tick index,
        #: the event number it was sent at, whether it was a create)
        self.pending = None
        self.pending_meta = (0, 0, False)

    # -- scheduling --------------------------------------------------------------------------

    def start(self, first_tick: int) -> None:
        self._list()
        self._schedule(first_tick)

    def _schedule(self, k: int) -> None:
        # wall(t) = T0 + t + skew reaches tick k at t = k*period - skew
        when = k * self.period - self.clock.skew
        self.later(when, lambda: self._fire(k))

    def _fire(self, k: int) -> None:
        late = self.clock.wall(self.world.t) - self._tick(k)
        # after a pause, APScheduler coalesces the ticks it missed into the newest one: the
        # older ones are reported as missed (DroppedTicks)
        newest = int((self.clock.wall(self.world.t) - T0).total_seconds() // self.period)
        for missed in range(k, newest):
            self._fate(missed, "dropped")
        if newest > k:
            k = newest
        elif late.total_seconds() > self.period:
            self._fate(k, "dropped")
            self._schedule(k + 1)
            return
        self._schedule(k + 1)
        if self.busy:
            self._fate(k, "dropped")
            return
        self._begin_claim(k)

    def _begin_claim(self, k: int) -> None:
        """Claim tick ``k`` as ``JobLock.try_acquire`` does: every request of the claim
        (settling included) may take as long as a grant it brings would still be used
        (lockbudget.claim_budget); this replica's unsettled writes are settled first."""
        self.busy = True
        self.claim_timeout = claim_budget(
            self.at_most,
            tick=self._tick(k),
            grace=self.period,
            now=self.clock.wall(self.world.t),
            floor=self.net.timeout,
        )
        if self.pending is not None or self.lock._unwritten is not None:
            self._settle(k, self._viewed() if self.cache.usable() else None, read=False)
            return
        self._claim(k)

    # -- settling (JobLock's ``settle``, issue 26) ---------------------------------------------

    def _settle(self, k: int, view: LeaseView | None, *, read: bool) -> None:
        """``k8slease.jobs.settle.settle``: settle the unanswered claim on the view (or a read
        when the view cannot tell), run it or release it, write a kept record; then claim."""
        pending = self.pending
        if not read and (
            not self.cache.usable()
            or (pending is not None and settle_claim(pending, view, me=self.me) is Settled.OPEN)
        ):
            self._ask(
                self._read_op,
                self._read_then(k, lambda view: self._settle(k, view, read=True)),
                timeout=self.claim_timeout,
            )
            return
        if pending is not None:
            settled = settle_claim(pending, view, me=self.me)
            if settled is Settled.REFUSED:
                self.pending = None
            elif settled is Settled.APPLIED:
                assert view is not None
                self.pending = None
                if pending.carried is not None and self.lock._unwritten is pending.carried:
                    self._recorded(pending.carried)  # written with the claim
                pending = landed(pending, view)
                _, sent_event, created = self.pending_meta
                pk = int((pending.tick - T0).total_seconds() // self.period)
                adoption = adopt_or_release(
                    pending,
                    now=self.clock.wall(self.world.t),
                    mono=self.mono(),
                    grace=self.period,
                    lock_at_most_for=self.at_most,
                )
                self.world.log(
                    f"r{self.index}{self.tag} finds its claim of tick {pk} applied: "
                    f"{adoption.decision.value} ({adoption.why})"
                )
                # its warning names the span the others skipped for it, unaware (held_from,
                # held_until): every tick after the claimed one up to now
                for kk in range(pk + 1, k + 1):
                    self._fate(kk, "held-late-claim")
                if adoption.decision is Decision.RUN:
                    self.ledger.claims["late-claim-run"] += 1
                    self._fate(k, "adopted")  # runs the earlier tick (WARNING)
                    self._granted(pk, view.body, pending.sent_mono, None, created, sent_event)
                    return
                self.ledger.claims["late-claim-released"] += 1
                self.lock._unwritten = never_ran(
                    pending, me=self.me, now=self.clock.wall(self.world.t), why=adoption.why
                )
        if self._holds_kept(view):
            self._write_kept(k, view)
            return
        free = view is not None and not view.record.held and not view.record.malformed
        if WRITE_CORRECTIONS and self.lock._unwritten is not None and free:
            assert view is not None
            self._write_correction(k, view)
            return
        self._claim(k)

    def _write_correction(self, k: int, view: LeaseView) -> None:
        """``settle._write_correction``: the kept run record written into the job state of a
        free Lease (a takeover recorded it ``lost`` meanwhile), conditional like any claim;
        then claim."""
        kept = self.lock._unwritten
        assert kept is not None
        state = merge_run(view.job, kept, lease_token=view.fencing_token)
        if state is None:
            self._recorded(kept)  # the Lease records it already
            self._claim(k)
            return
        body = lease_with_job_state(view.body, state)

        def answer(lease: dict[str, Any] | None, error: TransportError | None) -> None:
            if error is None and lease is not None:
                self.ledger.claims["kept-record-corrected"] += 1
                self._recorded(kept)
                self.see(lease)
            if isinstance(error, Unavailable):
                self._skip(k, "unavailable")
                return
            self._claim(k)  # a Conflict: someone wrote first; the claim judges afresh

        self._ask(
            lambda s: s.replace(self.lease, body),
            answer,
            late_ok=True,
            timeout=self.claim_timeout,
        )

    def _write_kept(self, k: int, view: LeaseView, *, again: bool = True) -> None:
        """``settle._write_kept_release``: release with the kept run record, then claim."""
        kept = self.lock._unwritten
        assert kept is not None
        body = kept_release(view, kept, now=self.clock.wall(self.world.t))

        def answer(lease: dict[str, Any] | None, error: TransportError | None) -> None:
            if error is None and lease is not None:
                self._recorded(kept)
                self.see(lease)
            if isinstance(error, Unavailable):
                self._skip(k, "unavailable")
                return
            if isinstance(error, Conflict) and again:
                # the view was stale (an own write landed late): read, settle again once
                self._ask(
                    self._read_op,
                    self._read_then(k, lambda view: self._kept_read(k, view)),
                    timeout=self.claim_timeout,
                )
                return
            self._claim(k)

        self._ask(
            lambda s: s.replace(self.lease, body),
            answer,
            late_ok=True,
            timeout=self.claim_timeout,
        )

    def _kept_read(self, k: int, view: LeaseView | None) -> None:
        if self._holds_kept(view):
            self._write_kept(k, view, again=False)
            return
        self._claim(k)

    def _claim(self, k: int) -> None:
        if self.claim_path != "read-first" and self.cache.usable():
            self._claim_ordered(k)
        else:
            self.world.log(f"r{self.index}{self.tag} reads to claim tick {k} (informer not synced)")
            self.ledger.claims["read-first"] += 1
            self._ask(
                self._read_op,
                self._read_then(k, lambda view: self._read_then_claim(k, view, 0)),
                timeout=self.claim_timeout,
            )

    # -- claiming ----------------------------------------------------------------------------

    def _seen(self) -> None:
        """A claim waiting its turn judges again on every sighting."""
        if self.waiting is not None:
            self._rejudge()

    def _claim_ordered(self, k: int) -> None:
        """``JobLock._claim_from_cache``: wait this replica's turn, judging on every change."""
        self.ledger.claims["from-view"] += 1
        tick = self._tick(k)
        rank = claim_rank(self.cache.members(self.mono()), self.me, self.job, tick)
        wait = claim_delay(rank, step=self.cache.step, spread=self.cache.spread)
        self.world.log(f"r{self.index}{self.tag} claims tick {k} from its view: rank {rank}")
        self.waiting = _Waiting(k, tick, self.mono() + wait)
        if self._rejudge() and wait > 0:
            waiting = self.waiting
            # a microsecond past, as the election driver wakes (float rounding)
            when = max(self.clock.true_time_of(waiting.deadline), self.world.t) + 1e-6
            self.later(when, lambda: self._rejudge() if self.waiting is waiting else None)

    def _rejudge(self) -> bool:
        """Judge the waiting claim on the view now; returns whether it still waits."""
        waiting = self.waiting
        assert waiting is not None
        lease = self._viewed()
        judged = self._judge(waiting.k, lease)
        remaining = waiting.deadline - self.mono()
        if judged.claim.verdict is not Verdict.ALREADY_CLAIMED and remaining > 0:
            return True
        self.waiting = None
        pending = self.pending
        if (
            judged.claim.verdict is Verdict.HELD
            and pending is not None
            and settle_claim(pending, lease, me=self.me) is Settled.APPLIED
        ):
            # JobLock._try_acquire: its own claim landed while it judged: settle it now
            self._settle(waiting.k, lease, read=True)
            return False
        if judged.claim.verdict is not Verdict.GRANT:
            self._skip(waiting.k, self._why(judged))
        else:
            self._write_claim(waiting.k, lease, judged, on_lost_race=self._read_after_409)
        return False

    def _read_after_409(self, k: int) -> None:
        """A lost conditional write from the view: read once, judge again on what is there."""
        self.ledger.claims["read-after-409"] += 1
        self._ask(
            self._read_op,
            self._read_then(k, lambda view: self._read_then_claim(k, view, 1)),
            timeout=self.claim_timeout,
        )

    def _read_then_claim(self, k: int, view: LeaseView | None, attempt: int) -> None:
        # an unavailable read skipped the tick (``_read_then``): try_acquire raised, the runner
        # reports it
        judged = self._judge(k, view)
        if judged.claim.verdict is not Verdict.GRANT:
            # after a lost write the lock returns LOST_RACE, having logged why it skips: the
            # fate is that reason (held: waited out; already-claimed: someone won)
            pending = self.pending
            if (
                judged.claim.verdict is Verdict.HELD
                and pending is not None
                and settle_claim(pending, view, me=self.me) is Settled.APPLIED
            ):
                self._settle(k, view, read=True)  # its own claim landed: settle it now
                return
            self._skip(k, self._why(judged))
            return
        self._write_claim(
            k,
            view,
            judged,
            on_lost_race=self._lost_race,
            after_409=attempt == 1,
        )

    def _lost_race(self, k: int) -> None:
        """``JobLock._try_acquire``: a lost race while one of this replica's claims has no
        answer yet: the Lease may have moved on by that claim landing (soak seed 8100):
        settle it (run it, or release it) and claim again; else a lost race."""
        if self.pending is not None and self._settled_for != k:
            self._settled_for = k  # once per tick, as the lock does
            self._settle(k, None, read=False)
            return
        self._skip(k, "lost-race")

"""A LEADER-class job in the simulation, through the real gate (issue 26).

A LEADER job fires only on the leader: on every other replica its scheduler entry is paused,
and the replica's leaderless watch judges, at each tick, with the real
:func:`~k8slease.jobs.lostticks.nobody_leads` on its real election machine, whether anyone leads;
a tick at which nobody does is lost and reported (``job.ticks_being_lost``). On the leader the
tick is claimed on the job's lock like any other (the claim path of :mod:`sim_jobs`, with every
slow step and late apply that has). Once granted, the run starts only after the hop back to the
event loop (a short delay, in which a pause may fall) and only if the real
:class:`~k8slease.jobs.grant.Grant`, bound to leadership by the real
:func:`~k8slease.jobs.leadergate.bind_to_leadership`, does not read ``lost``; otherwise the tick is
recorded ``lost`` (``job.not_started``). A run's ``ctx.lost`` is that same flag; a run that
reads it set when it finishes is recorded ``lost``.

The checks (in :mod:`sim_run`) judge every start against the true leadership: the replica's
election machine believes it leads at the instant of the start, on its own clock. A start
outside it is a violation, as is a tick that fired while nobody led and was reported by no one.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from k8slease.election.commands import Phase
from k8slease.errors import NotFound, TransportError
from k8slease.jobs.grant import Grant
from k8slease.jobs.leadergate import bind_to_leadership
from k8slease.jobs.lock import _Judged
from k8slease.jobs.lockrules import Verdict
from k8slease.jobs.lostticks import nobody_leads
from k8slease.jobs.misfire import MisfirePolicy, missed_ticks
from k8slease.jobs.unsettled import Settled, landed, never_ran, settle_claim
from k8slease.lease.jobrecord import RunRecord
from k8slease.lease.view import LeaseView
from tests.sim.sim_core import T0
from tests.sim.sim_election import ElectionReplica
from tests.sim.sim_jobrun import _Run, kept_release
from tests.sim.sim_jobs import JobReplica

LEADER_JOB = "leaderjob"
#: the longest hop from the claim's thread back to the event loop (a pause may fall in it)
HOP = 0.05
#: APScheduler's default ``misfire_grace_time``, which the leaderless watch's entry keeps
LEADERLESS_GRACE = 1.0
#: how often the after-term settling looks (``min(1, keepalive_interval / 2)``)
AFTER_TERM_EVERY = 1.0
#: whether an ex-leader settles its unanswered LEADER claim (``termsettle``); the tests set it
#: ``False`` to show the gap it closes
AFTER_TERM_SETTLES = True
#: whether a missed leaderless watch is warned about (``DroppedTicks(watches=...)``); the tests
#: set it ``False`` to show the gap it closes
WATCH_MISSES_WARNED = True
#: whether a new term catches up its LEADER job's missed ticks (``catch_up``); the tests set it
#: ``False`` to show the gap it closes
CATCH_UP = True
#: whether a new term's catch-up that cannot read the job's state claims the ticks within grace
#: all the same (``catchup.schedule_catch_up``); the tests set it ``False`` to show the gap it
#: closes
CATCH_UP_WITHOUT_STATE = True
#: ``TickRunner._claim_or_drop``: a LEADER claim refused as held while this replica leads is a
#: lost tick, reported (``held-by-former-leader``); False takes the report out (tests)
HELD_WHILE_LEADING_REPORTED = True


class LeaderJobReplica(JobReplica):
    """A LEADER-class job on one replica, gated on that replica's election machine."""

    elector: ElectionReplica

    def bind(self, elector: ElectionReplica) -> None:
        self.elector = elector
        #: tick -> whether the job's entry was resumed (this replica leading) when it came due
        self._resumed: dict[int, bool] = {}
        self._due: set[int] = set()
        self.ledger.unsettled[self.me] = self._unsettled
        self._handled = 0
        #: the newest tick this replica's LEADER entry (or its catch-up) claimed
        self._claimed_upto = 0
        #: for the checks: LEADER runs started, not started (leadership ended), told lost
        self.counts = self.ledger.claims
        #: whether the after-term settling loop (``termsettle.settle_after_term``) runs
        self._settling = False
        elector.on_term_end.append(self._settle_after_term)
        elector.on_term_start.append(self._catch_up)

    def _leads(self) -> bool:
        return self.elector.believes()

    def _schedule(self, k: int) -> None:
        """The scheduler's clock runs on through a pause: tick ``k`` comes due at its time
        whatever this replica handles, and the next one is scheduled then. Whether the job's
        entry was resumed (this replica's elector in its term: it resumes and pauses the entry)
        is judged when the tick comes due, even if the replica is paused then (the entry is
        paused only once the elector handles the end of its term, after the pause)."""
        if k in self._due:
            return
        self._due.add(k)
        when = k * self.period - self.clock.skew

        def due() -> None:
            self._resumed[k] = self.elector.machine.phase is Phase.LEADER
            self._schedule(k + 1)
            self.later(self.world.t, lambda: self._fire(k))

        self.world.at(when, due)

    def _fire(self, k: int) -> None:
        resumed = self._resumed.pop(k, False)
        if k <= self._handled:
            return  # coalesced into a later tick already handled
        self._handled = k
        late = (self.clock.wall(self.world.t) - self._tick(k)).total_seconds()
        if resumed:
            if late > self.period:
                # missed past its grace (a pause): APScheduler reports it missed
                # (DroppedTicks, WARNING), whether or not this replica still leads
                self._fate(k, "dropped")
                return
            if self._leads():
                super()._fire(k)
                newest = int((self.clock.wall(self.world.t) - T0).total_seconds() // self.period)
                self._handled = max(self._handled, newest)
                self._claimed_upto = max(self._claimed_upto, self._handled)
                return
            # its term ended, the entry not yet paused: the runner skips and reports the tick
            # lost (``leadership-ended``, WARNING); the leaderless watch fires too
            self._fate(k, "leadership-ended")
        elif late > LEADERLESS_GRACE:
            # the leaderless watch missed its time (APScheduler's default grace): not run;
            # DroppedTicks warns (``job.leaderless_watch_missed``): this replica could not judge
            self._fate(k, "watch-missed-warned" if WATCH_MISSES_WARNED else "watch-missed")
            return
        if self._leads():
            # its entry was paused when the tick came due (between terms: a take in flight,
            # in a pause) and resumed since, from the next tick on; the leaderless watch,
            # judging late, finds this replica leading: quiet. The new term's catch-up claims
            # the tick (``_catch_up_tick``), whose outcome replaces this fate; left, an open gap
            self._fate(k, "between-terms")
            return
        machine = self.elector.machine
        if nobody_leads(machine, now=self.elector.mono()):
            self._fate(k, "no-leader")  # LostTicks: job.ticks_being_lost (WARNING)
        elif self._after_deletion():
            # within the wait of a held Lease deleted by hand: the Lease is absent, or came
            # back (a create applied late) naming someone; this replica cannot tell whether
            # the deleted Lease's holder or the new one leads (the LEADER twin of a hand
            # deletion between two creates): counted apart
            self._fate(k, "after-deletion")
        elif self._after_holder_edit():
            # a hand edit took the holder out of a Lease this replica saw written by a holder
            # less than a belief ago: that holder may run the tick until it sees the edit, and
            # nobody can tell (``nobody_leads``, its documented limit): counted apart
            self._fate(k, "after-holder-edit")
        else:
            self._fate(k, "not-leader")  # someone else leads, as far as this replica saw

    def _why(self, judged: _Judged) -> str:
        """As :meth:`JobReplica._why`; a quiet skip for a holder that claimed this lock while
        it led, got no answer, and lost leadership before its next claim (so it never settles
        the claim and never says ``lock.claim_applied_late``) is named apart: an open gap."""
        why = super()._why(judged)
        if HELD_WHILE_LEADING_REPORTED and judged.claim.verdict is Verdict.HELD and self._leads():
            return "held-by-former-leader"
        record = judged.record
        if why == "held-quiet" and record is not None:
            unsettled = self.ledger.unsettled.get(record.holder)
            if unsettled is not None and unsettled(record.fencing_token):
                return "held-unsettled-ex-leader"
        return why

    def _skip(self, k: int, why: str) -> None:
        """``TickRunner._claim``: a claim refused by the lock (any verdict) after this replica
        stopped leading reports the tick lost (``leadership-ended``, WARNING); a claim left
        unanswered then is settled after the term (``_settle_after_term``)."""
        if why not in {"unavailable", "dropped"} and not self._leads():
            why = "leadership-ended"
        super()._skip(k, why)
        if self.pending is not None and not self._leads():
            self._settle_after_term()

    # -- the catch-up when a term begins (``Jobs._on_started_leading``) ----------------------

    def _catch_up(self) -> None:
        """``catchup.schedule_catch_up``: read the job's state; the missed ticks after its
        claimed (or completed) tick, within the job's grace of the term's start (``now`` is
        taken before the read: ``Jobs._on_started_leading``), are claimed and run like any tick
        (``TickRunner.catch_up``, the default ``coalesce``: the newest). A tick that came due
        between two terms (the entry paused, a take in flight) runs so. If the state cannot be
        read (``jobs.catch_up_unavailable``), the ticks within grace are claimed all the same
        (the lock passes over those already claimed)."""
        if not CATCH_UP:
            return
        began = self.clock.wall(self.world.t)

        def answer(lease: dict[str, Any] | None, error: TransportError | None) -> None:
            if error is not None and not isinstance(error, NotFound):
                if not CATCH_UP_WITHOUT_STATE:
                    return  # jobs.catch_up_unavailable (WARNING) and nothing more
                last = began - timedelta(seconds=self.period + 1e-6)
            else:
                # JobLock.read_state: not seen (the answer may be older than an own release)
                state = None if lease is None else LeaseView.decode(lease).job
                if state is None:
                    return
                last = state.claimed_tick or state.completed_tick
            ticks = missed_ticks(
                self._next_fire,
                last_tick=last,
                now=began,
                grace=self.period,
                policy=MisfirePolicy.COALESCE,
            )
            for tick in ticks:
                self._catch_up_tick(int((tick - T0).total_seconds() // self.period))

        self._ask(self._read_op, answer, timeout=self.net.timeout)

    def _catch_up_tick(self, k: int) -> None:
        """``TickRunner.run_tick(tick, catch_up=True)`` in the catch-up's own scheduler job, beside
        the LEADER entry's: after its term, the tick is reported lost (``_claim_or_drop``:
        ``leadership-ended``); while this replica's grant is held (a run, or the hop before it),
        ``try_acquire`` says ``RUNNING`` and the tick is warned about (``job.ticks_dropped``); a
        claim in progress holds the lock's ``_active_lock``, and a release in flight no longer
        holds ``_active`` (``JobLock.finish`` clears it first) but is modelled as waited for too:
        then the tick itself is claimed. Its reports outrank the quiet fate its leaderless watch
        gave it (``between-terms``)."""
        if not self._leads():
            self.ledger.fates.setdefault(k, {})[self.index] = "leadership-ended"
            return
        run = self.current
        if run is not None and not run.done:
            self.ledger.fates.setdefault(k, {})[self.index] = "dropped"
            return
        if self.busy:
            self.later(self.world.t + HOP, lambda: self._catch_up_tick(k))
            return
        fates = self.ledger.fates.get(k, {})
        if fates.get(self.index) == "between-terms":
            del fates[self.index]  # the claim's outcome is this replica's fate for the tick
        self.world.log(f"r{self.index}{self.tag} catches up tick {k}")
        self.counts["leader-catch-up"] += 1
        self._claimed_upto = max(self._claimed_upto, k)
        self._handled = max(self._handled, k)
        self._begin_claim(k)  # exactly tick k (the entry's ``_fire`` would coalesce a late one)

    def _next_fire(self, previous: datetime | None, after: datetime) -> datetime:
        """The interval trigger's ``get_next_fire_time``: the first tick at or after ``after``."""
        k = -int(-(after - T0).total_seconds() // self.period)
        return self._tick(k)

    # -- settling after the term (``k8slease.jobs.termsettle``) -------------------------------

    def _settle_after_term(self) -> None:
        """``TickRunner.leadership_ended``: an unanswered LEADER claim is settled in a thread,
        never run: looked at every ``AFTER_TERM_EVERY`` s until settled, this replica leads
        again, or ``lock_at_most_for`` has passed since the claim was sent."""
        if self.pending is None or self._settling or not AFTER_TERM_SETTLES:
            return
        self._settling = True
        until = self.pending.sent_mono + self.at_most
        self.later(self.world.t, lambda: self._after_term(until))

    def _after_term(self, until: float) -> None:
        if self._leads() or self.mono() >= until or self.pending is None:
            self._settling = False
            return
        if self.busy:  # a claim holds the lock's ``_active_lock``: wait for it
            self._after_term_again(until)
            return
        view = self._viewed() if self.cache.usable() else None
        if self.cache.usable() and settle_claim(self.pending, view, me=self.me) is not (
            Settled.OPEN
        ):
            self._after_term_on(until, view)
            return

        def answer(lease: dict[str, Any] | None, error: TransportError | None) -> None:
            if error is not None and not isinstance(error, NotFound):
                self._after_term_again(until)  # the loop looks again
                return
            self.see(lease)
            self._after_term_on(until, None if lease is None else LeaseView.decode(lease))

        self._ask(self._read_op, answer, timeout=self.net.timeout)

    def _after_term_again(self, until: float) -> None:
        self.later(self.world.t + AFTER_TERM_EVERY, lambda: self._after_term(until))

    def _after_term_on(self, until: float, view: LeaseView | None) -> None:
        """``settle(lock, may_run=False)`` on ``view``: an applied claim is released at once
        (``lock.claim_applied_late``, ``decision=release``, naming the ticks skipped for it)."""
        pending = self.pending
        if self._leads() or pending is None:
            self._settling = False
            return
        settled = settle_claim(pending, view, me=self.me)
        if settled is Settled.OPEN:
            self._after_term_again(until)
            return
        self.pending = None
        if settled is Settled.REFUSED:
            self._settling = False
            return
        assert view is not None
        pending = landed(pending, view)
        pk = int((pending.tick - T0).total_seconds() // self.period)
        now = self.clock.wall(self.world.t)
        newest = int((now - T0).total_seconds() // self.period)
        self.world.log(
            f"r{self.index}{self.tag} finds its claim of tick {pk} applied after its term: release"
        )
        # lock.claim_applied_late and lock.tick_lost name the claimed tick and the span the
        # others skipped for it (held_from .. held_until), at WARNING, whether or not the
        # release can be written
        for kk in range(pk, newest + 1):
            self._fate(kk, "held-late-claim")
        self.counts["late-claim-released-after-term"] += 1
        kept = never_ran(pending, me=self.me, now=now, why="its leadership ended")
        self.lock._unwritten = kept
        self._write_after_term(until, view, kept)

    def _write_after_term(self, until: float, view: LeaseView, kept: RunRecord) -> None:
        """``settle._write_kept_release``: the release with the tick recorded ``lost``."""
        record = view.record
        if not (record.held and record.holder == self.me) or (
            record.fencing_token != kept.fencing_token
        ):
            self._settling = False
            return
        body = kept_release(view, kept, now=self.clock.wall(self.world.t))

        def answer(lease: dict[str, Any] | None, error: TransportError | None) -> None:
            if error is None and lease is not None:
                self._recorded(kept)
                self.see(lease)
            self._settling = False

        self._ask(
            lambda s: s.replace(self.lease, body), answer, late_ok=True, timeout=self.net.timeout
        )

    def _unsettled(self, token: int) -> bool:
        """Whether this replica has an unanswered claim with ``token`` (in flight, or its
        answer lost) that it will not settle: it no longer leads, so its LEADER entry is paused
        and no claim will settle it."""
        pending = self.pending
        tokens = {self.in_flight}
        if pending is not None:
            tokens |= {pending.fencing_token, *pending.earlier_tokens}
        return token in tokens and self.elector.machine.phase is not Phase.LEADER

    def _after_holder_edit(self) -> bool:
        """Whether the leader Lease as this replica last saw it names no holder (edited by
        hand) and the last record a holder may have written was seen less than the belief
        ``nobody_leads`` waits out ago (``(renew_deadline + lease_duration) / 2``)."""
        machine = self.elector.machine
        seen = machine.observation
        written = machine.observer.holder_write_seen_at
        if seen is None or seen.view is None or written is None:
            return False
        record = seen.view.record
        if record.held and not record.malformed:
            return False
        timing = machine.timing
        belief = (timing.renew_deadline + timing.lease_duration) / 2
        return self.elector.mono() < written + belief

    def _after_deletion(self) -> bool:
        """Whether this replica's view of the leader Lease is within the wait of a held Lease
        it saw deleted (by hand: the simulation's elections never delete): absent, or back
        (a create applied late) since."""
        machine = self.elector.machine
        seen = machine.observation
        if seen is None:
            return False
        if seen.view is None:
            held, since = seen.held_before_absence, seen.first_seen_at
        elif seen.deleted is not None:
            held, since = seen.deleted
        else:
            return False
        if held is None or held.holder == machine.identity:
            return False  # its own deleted Lease: it stepped down and reports (nobody_leads)
        wait = max(float(held.duration_seconds), machine.timing.lease_duration)
        return self.elector.mono() < since + wait

    def _start(self, run: _Run, record: Callable[[], None]) -> None:
        """``TickRunner._claim`` binds the grant to leadership; ``_run_async`` checks it after
        the hop back to the loop, right before the start (``_startable``)."""
        grant = Grant(
            job=self.job,
            tick=T0,
            fencing_token=run.view.fencing_token,
            started_wall=self.clock.wall(self.world.t),
            started_mono=run.last_ok,
        )  # no clock: the lock's own budget is the keep-alive's (``run.lost``, as in sim_jobrun)
        bind_to_leadership(grant, self._leads)
        run.grant = grant
        self.current = run  # held by this run from the grant on (the others' checks)

        def start() -> None:
            if grant.lost.is_set():
                self.world.log(f"r{self.index} does not start tick {run.k}: not leading")
                # job.not_started names the span the others skipped for this grant
                now = self.clock.wall(self.world.t)
                newest = int((now - T0).total_seconds() // self.period)
                for kk in range(run.k + 1, newest + 1):  # a report outranks a quiet fate
                    self.ledger.fates.setdefault(kk, {})[self.index] = "held-not-started"
                self.counts["leader-not-started"] += 1
                run.lost = True
                self._finish(run)  # recorded lost, released
                return
            if not self.elector.believes():
                self.ledger.violations.append(
                    f"t={self.world.t:.3f}: LEADER run of tick {run.k} started on "
                    f"r{self.index}, which is not leading"
                )
            self.counts["leader-started"] += 1
            super(LeaderJobReplica, self)._start(run, record)

        self.later(self.world.t + self.world.rng.uniform(0, HOP), start)

    def _finish(self, run: _Run) -> None:
        grant = run.grant
        if grant is not None and not run.lost and grant.lost.is_set():
            self.counts["leader-told-lost"] += 1
            run.lost = True  # ctx.lost was set: a coroutine job is cancelled, recorded lost
        super()._finish(run)

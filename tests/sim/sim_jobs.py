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

A run keeps the lock alive with :func:`~k8slease.jobs.lockrules.extend` and releases it with
:func:`~k8slease.jobs.lockrules.release` (a Conflict re-reads once, and writes again if the
Lease is still this grant's), as the lock does. One claim or run at a time (APScheduler's
``max_instances=1``): a tick that fires meanwhile is dropped and reported. What happened to
every tick on every replica is recorded for the checks.

The informer: one list, then a watch whose events arrive in order, each after a random delay.
A partition breaks the watch; the informer lists again (``INFORMER_RETRY`` seconds, jittered,
after a failed list), and only a successful list makes it synced again. As the real informer, a
list that does not contain the Lease does not tell the observer it is gone.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from k8slease.errors import AlreadyExists, Conflict, NotFound, TransportError, Unavailable
from k8slease.jobs.claimorder import claim_delay, claim_rank
from k8slease.jobs.lock import JobLock, _Judged
from k8slease.jobs.lockbudget import claim_budget, remaining
from k8slease.jobs.lockcache import DEFAULT_CLAIM_SPREAD, DEFAULT_CLAIM_STEP, ClaimCache
from k8slease.jobs.lockrules import Verdict, extend, release
from k8slease.jobs.unsettled import (
    Decision,
    PendingClaim,
    Settled,
    adopt_or_release,
    landed,
    never_ran,
    settle_claim,
    still_pending,
)
from k8slease.lease.jobrecord import RunRecord, lease_with_job_state
from k8slease.lease.observe import Observations
from k8slease.lease.record import lease_with_record, new_lease
from k8slease.lease.view import LeaseView
from k8slease.names import LABEL_GROUP, LABEL_JOB, LABEL_ROLE, ROLE_JOB, job_lease_name
from tests.sim.sim_core import T0, Clock, Network, Store, World
from tests.sim.sim_election import Replica

JOB_LEASE = "g.job"
JOB = "job"
#: The informer's pause before listing again after a failed list (jittered 0.8-1.2).
INFORMER_RETRY = 5.0
#: how long after a hand edit or deletion of the job Lease quiet skips are the lock waiting it
#: out (rules 4, 5): twice the simulation's ``lock_at_most_for`` (15 s, ``sim_run``)
HAND_EDIT_WAIT = 30.0
#: The claim paths a replica may take: ``ordered`` (the lock's), ``read-first`` (always read, as
#: while the informer is not synced) and ``unconditional`` (``ordered`` with a write that
#: overwrites whatever is there: a safeguard removed, to show that the checks catch it).
CLAIM_PATHS = ("ordered", "read-first", "unconditional")


class Ledger:
    """What happened to each tick (index ``k``: wall time ``T0 + k * period``)."""

    def __init__(self) -> None:
        self.runs: dict[int, list[tuple[int, int]]] = {}  # tick -> [(replica, token)]
        #: tick -> [(resourceVersion written, whether the grant created, what its replica saw)]
        self.grants: dict[int, list[tuple[int, bool, Callable[[int], bool]]]] = {}
        self.fates: dict[int, dict[int, str]] = {}  # tick -> replica -> why it did not run
        self.lost_recorded: set[int] = set()
        #: resourceVersions of the job Lease's deletions by hand (the ``job-delete`` fault)
        self.deletions: list[int] = []
        #: ticks run twice because a hand deletion erased the first claim (out of scope)
        self.across_deletion: list[str] = []
        self.violations: list[str] = []
        #: replica name -> whether it is running (or releasing) the grant with this token: the
        #: truth a ``held`` skip is checked against (issue 26: a skip for a holder that runs
        #: nothing is silent unless the skipping replica reports it)
        self.running: dict[str, Callable[[int], bool]] = {}
        #: replica name -> whether it holds an unanswered claim with this token that it can
        #: no longer settle (a LEADER job's replica that stopped leading; ``sim_leader``)
        self.unsettled: dict[str, Callable[[int], bool]] = {}
        #: when (true time) the job Lease was deleted or edited by hand
        self.hand_edits: list[float] = []
        #: resourceVersions the hand edits (not the deletions) of the job Lease wrote
        self.hand_edit_rvs: set[int] = set()
        #: what the claims did: from the view / read first, 409s, reads after one, grants
        self.claims: Counter[str] = Counter()

    def granted(
        self,
        k: int,
        replica: int,
        token: int,
        rv: int,
        created: bool,
        saw: Callable[[int], bool],
    ) -> None:
        """Tick ``k`` granted to ``replica`` by the write that made ``rv``.

        A second grant is a violation, unless a hand deletion erased the first one: the second
        grant was a create, applied after a deletion that came after the first grant, by a
        replica that had seen neither the first grant nor any later write when it sent its own
        (``saw``). No conditional write can see a claim that a deletion erased: that is outside
        the safety model, counted apart."""
        runs = self.runs.setdefault(k, [])
        grants = self.grants.setdefault(k, [])
        runs.append((replica, token))
        grants.append((rv, created, saw))
        if len(runs) == 1:
            return
        if len(grants) == 2:
            # in the order the store applied them (answers may arrive the other way round)
            ordered = sorted(grants, key=lambda g: g[0])
            (first_rv, _, _), (later_rv, later_created, later_saw) = ordered
            erased = any(first_rv < d < later_rv for d in self.deletions)
            if later_created and erased and not later_saw(first_rv):
                self.across_deletion.append(f"tick {k} ran twice across a hand deletion: {runs}")
                return
        self.violations.append(f"tick {k} ran twice: {runs}")


class _SimClock:
    """A replica's clocks as :class:`k8slease.clock.Clock` (nothing here ever waits)."""

    def __init__(self, replica: Replica) -> None:
        self._replica = replica

    def monotonic(self) -> float:
        return self._replica.mono()

    def now(self) -> datetime:
        return self._replica.clock.wall(self._replica.world.t)

    def wait(self, cond: threading.Condition, timeout: float | None) -> None:
        raise AssertionError("the simulation never blocks")


class _NoTransport:
    namespace = "sim"
    request_timeout = 5.0


class _Waiting:
    """A claim waiting for its turn in the tick's claim order."""

    def __init__(self, k: int, tick: datetime, deadline: float) -> None:
        self.k = k
        self.tick = tick
        self.deadline = deadline


class JobReplica(Replica):
    def _ask(
        self,
        op: Callable[[Store], dict[str, Any] | None],
        answer: Callable[[dict[str, Any] | None, TransportError | None], None],
        *,
        timeout: float | None = None,
        late_ok: bool = False,
    ) -> None:
        """``op`` on the store over the network; ``answer(result, error)`` is this replica's
        next step, at the time the answer arrives."""
        self.net.request(
            self.index,
            op,
            lambda r, e: self.later(self.world.t, lambda: answer(r, e)),
            timeout=timeout,
            late_ok=late_ok,
        )

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
        super().__init__(index, world, net, clock)
        self.job = job
        self.lease = job_lease_name("g", job)
        self.tag = "" if job == JOB else f" [{job}]"  # in the trace
        assert claim_path in CLAIM_PATHS, claim_path
        self.me = f"r{index}"
        self.ledger = ledger
        self.period = period
        self.at_most = lock_at_most_for
        self.run_time = run_time
        self.claim_path = claim_path
        self.observations = Observations(_SimClock(self))
        self.synced = False
        self.cache = ClaimCache(
            self.observations,
            lambda: self.synced,
            step=DEFAULT_CLAIM_STEP,
            spread=DEFAULT_CLAIM_SPREAD,
        )
        # the real lock, for its judgement (``_judge``: judge_claim on an observer snapshot,
        # the highest token kept, a deleted Lease judged on what was seen before)
        self.lock = JobLock(
            _NoTransport(),  # type: ignore[arg-type]
            group="g",
            job=self.job,
            identity=self.me,
            lock_at_most_for=lock_at_most_for,
            clock=_SimClock(self),
            observations=self.observations,
            cache=self.cache,
        )
        self.lock._report_suspect = lambda *args: None  # type: ignore[method-assign]
        self.busy = False
        #: the tick whose lost race last settled an unanswered claim (once per tick)
        self._settled_for = -1
        #: the token of the claim write in flight (for the checks)
        self.in_flight: int | None = None
        #: the request budget of the claim in progress (set when the tick fires)
        self.claim_timeout = net.timeout
        self.waiting: _Waiting | None = None
        #: the grant being run or released (for the checks: see ``Ledger.running``)
        self.current: _Run | None = None
        ledger.running[self.me] = self._runs
        #: a claim write whose answer did not arrive (JobLock._pending), with (tick index,
        #: the event number it was sent at, whether it was a create)
        self.pending: PendingClaim | None = None
        self.pending_meta: tuple[int, int, bool] = (0, 0, False)
        self.seen_at: dict[int, int] = {}  # resourceVersion -> event number first seen
        #: hand edit or deletion (its resourceVersion) -> when this replica first saw it (the
        #: Lease absent after a deletion counts as seeing that deletion): it waits it out from
        #: then (rules 4, 5), so the checks' window for quiet skips starts there too
        self.saw_hand_edit: dict[int, float] = {}
        # the informer: the stream its watch events belong to (0: none), events held back
        # until the list that opened the stream is processed, the last delivery time
        self._stream = 0
        self._streams = 0
        self._held_back: list[tuple[str, dict[str, Any]]] = []
        self._last_delivery = 0.0

    def _read_op(self, store: Any) -> dict[str, Any] | None:
        try:
            lease: dict[str, Any] = store.get(self.lease)
        except NotFound:
            return None
        return lease

    # -- scheduling --------------------------------------------------------------------------

    def start(self, first_tick: int) -> None:
        self._list()
        self._schedule(first_tick)

    def _schedule(self, k: int) -> None:
        # wall(t) = T0 + t + skew reaches tick k at t = k*period - skew
        when = k * self.period - self.clock.skew
        self.later(when, lambda: self._fire(k))

    def _tick(self, k: int) -> datetime:
        return T0 + timedelta(seconds=k * self.period)

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

    def _left(self, run: _Run) -> float:
        """What an extension or the release may take (``lockbudget.remaining``): the time left
        of the grant's keep budget, never below the request timeout."""
        return remaining(run.last_ok, self.at_most, now=self.mono(), floor=self.net.timeout)

    def _runs(self, token: int) -> bool:
        """Whether this replica runs the grant with ``token``, or is releasing it: its release
        is in flight or kept (no answer; retried, and said at WARNING)."""
        run = self.current
        kept = self.lock._unwritten
        if kept is not None and kept.fencing_token == token:
            return True
        return run is not None and run.view.fencing_token == token

    def _holds_kept(self, view: LeaseView | None) -> bool:
        """Whether ``view`` shows this replica still holding the grant whose run record it
        keeps unwritten (``settle``): then that record is written by a release first."""
        kept = self.lock._unwritten
        return (
            kept is not None
            and view is not None
            and view.record.held
            and view.record.holder == self.me
            and view.fencing_token == kept.fencing_token
        )

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
        self._claim(k)

    def _read_then(
        self, k: int, then: Callable[[LeaseView | None], None]
    ) -> Callable[[dict[str, Any] | None, TransportError | None], None]:
        """The answer to a read for tick ``k``: an error other than NotFound skips the tick
        (unavailable); otherwise the Lease (or its absence) is seen and ``then`` gets its view."""

        def answer(lease: dict[str, Any] | None, error: TransportError | None) -> None:
            if error is not None and not isinstance(error, NotFound):
                self._skip(k, "unavailable")
                return
            self.see(lease)
            then(None if lease is None else LeaseView.decode(lease))

        return answer

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

    def _recorded(self, run: RunRecord) -> None:
        """A kept run record was written (by a release or carried by a claim)."""
        if self.lock._unwritten is run:
            self.lock._unwritten = None
        if run.outcome == "lost":
            self.ledger.lost_recorded.add(int((run.tick - T0).total_seconds() // self.period))

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

    def _fate(self, k: int, why: str) -> None:
        self.ledger.fates.setdefault(k, {}).setdefault(self.index, why)

    def _skip(self, k: int, why: str) -> None:
        self.busy = False
        self._fate(k, why)

    # -- claiming ----------------------------------------------------------------------------

    def see(self, lease: dict[str, Any] | None, *, event_version: str | None = None) -> None:
        """A sighting: an answer, or (``event_version`` given) a watch event, which the
        observer drops when it is older than what it shows (as the real informer's are)."""
        view = None if lease is None else LeaseView.decode(lease)
        if event_version is None:
            self.observations.see(self.lease, view)
        elif not self.observations.see_event(self.lease, view, version=event_version):
            return
        if lease is not None:  # for the checks: when this replica first saw each write
            rv = int(lease["metadata"]["resourceVersion"])
            self.seen_at.setdefault(rv, self.world.events)
            if rv in self.ledger.hand_edit_rvs:
                self.saw_hand_edit.setdefault(rv, self.world.t)
        elif self.ledger.deletions:
            self.saw_hand_edit.setdefault(self.ledger.deletions[-1], self.world.t)
        if self.waiting is not None:
            self._rejudge()

    def _judge(self, k: int, lease: LeaseView | None) -> _Judged:
        seen = self.observations.current(self.lease)
        judged = self.lock._judge(lease, seen, self._tick(k), reclaim_own=False)
        record = judged.record
        self.world.log(
            f"r{self.index}{self.tag} judges tick {k}: {judged.claim.verdict.value} "
            f"{judged.claim.detail} "
            f"(seen {'absent' if lease is None else lease.resource_version}, "
            f"token {None if record is None else record.fencing_token})"
        )
        return judged

    def _why(self, judged: _Judged) -> str:
        """The fate of a refused claim. A ``held`` skip is reported (WARNING) when the lock
        reports a silent holder; else it is a quiet (DEBUG) skip, which the checks accept only
        when the holder really is running (or releasing) that grant."""
        verdict = judged.claim.verdict
        if verdict is not Verdict.HELD:
            return verdict.value
        if judged.silent is not None:
            return "held-silent"
        record = judged.record
        running = None if record is None else self.ledger.running.get(record.holder)
        if record is not None and running is not None and running(record.fencing_token):
            return "held"
        if any(
            self.world.t - HAND_EDIT_WAIT <= at <= self.world.t
            for at in self.saw_hand_edit.values()
        ):
            return "held-quiet-after-seen-edit"  # waiting out what it saw (rules 4, 5)
        return "held-quiet"

    def _viewed(self) -> LeaseView | None:
        observation = self.observations.current(self.lease).observation
        return None if observation is None else observation.view

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

    def _write_claim(
        self,
        k: int,
        lease: LeaseView | None,
        judged: _Judged,
        *,
        on_lost_race: Callable[[int], None],
        after_409: bool = False,
    ) -> None:
        """``JobLock._write_claim``: conditional on ``lease`` (create when ``None``)."""
        claim = judged.claim
        assert claim.record is not None and claim.state is not None
        state = claim.state
        if lease is None:
            body = new_lease(
                self.lease,
                "sim",
                claim.record,
                labels={LABEL_GROUP: "g", LABEL_ROLE: ROLE_JOB, LABEL_JOB: self.job},
            )
            op = lambda s: s.create(lease_with_job_state(body, state))  # noqa: E731
        else:
            body = lease_with_job_state(lease_with_record(lease.body, claim.record), state)
            op = lambda s: s.replace(self.lease, body)  # noqa: E731
        if self.claim_path == "unconditional":  # a hole put in on purpose (test_sim.py)
            written = lease_with_job_state(body, state)
            op = lambda s: _overwrite(s, written)  # noqa: E731
        sent = self.mono()
        sent_wall = self.clock.wall(self.world.t)
        sent_event = self.world.events
        lost_tick = claim.lost_tick
        token = claim.record.fencing_token
        created = lease is None
        self.in_flight = token

        def answer(result: dict[str, Any] | None, error: TransportError | None) -> None:
            self.in_flight = None
            self.world.log(f"r{self.index}{self.tag} claim of tick {k}: {error or 'granted'}")
            if isinstance(error, AlreadyExists | Conflict | NotFound):
                self.ledger.claims["409"] += 1
                on_lost_race(k)
            elif error is not None or result is None:
                if isinstance(error, Unavailable):  # JobLock._write_claim: settled later
                    earlier = self.pending
                    self.pending = still_pending(
                        earlier,
                        PendingClaim(
                            tick=self._tick(k),
                            fencing_token=token,
                            resource_version="" if lease is None else lease.resource_version,
                            sent_mono=sent,
                            sent_wall=sent_wall,
                        ),
                    )
                    if earlier is None:
                        self.pending_meta = (k, sent_event, created)
                self._skip(k, "unavailable")
            else:
                self.pending = None
                if judged.carried is not None:
                    self._recorded(judged.carried)
                self.lock._highest_token = max(self.lock._highest_token, token)
                self.ledger.claims["granted-after-409" if after_409 else "granted"] += 1
                self._granted(k, result, sent, lost_tick, created, sent_event)

        self._ask(
            op,
            answer,
            late_ok=True,
            timeout=self.claim_timeout,
        )

    def _granted(
        self,
        k: int,
        lease: dict[str, Any],
        sent: float,
        lost_tick: Any,
        created: bool,
        sent_event: int,
    ) -> None:
        self.see(lease)
        view = LeaseView.decode(lease)
        if lost_tick is not None:
            self.ledger.lost_recorded.add(int((lost_tick - T0).total_seconds() // self.period))
        rv = int(view.resource_version)

        def saw(first: int) -> bool:
            """Whether, before sending, this replica saw the first grant or anything after it."""
            return any(self.seen_at.get(r, sent_event) < sent_event for r in range(first, rv))

        def record() -> None:
            self.ledger.granted(k, self.index, view.fencing_token, rv, created, saw)

        self._start(_Run(k=k, view=view, last_ok=sent, started=self.world.t), record)

    def _start(self, run: _Run, record: Callable[[], None]) -> None:
        """The run of ``run.k`` starts now (``record``: its grant, for the checks)."""
        record()
        self.world.log(f"r{self.index}{self.tag} runs tick {run.k} token {run.view.fencing_token}")
        run.started = self.world.t
        self.current = run
        end = self.world.t + self.world.rng.uniform(*self.run_time)
        self._keepalive(run)
        self.later(end, lambda: self._finish(run))

    # -- running -----------------------------------------------------------------------------

    def _keepalive(self, run: _Run, wait: float | None = None) -> None:
        """``JobLock._keepalive_loop`` / ``extend_once``: extend every third of the ceiling,
        retry after a second when an extension failed, lost once 2/3 of the ceiling passed
        since the last good extension was sent; a Conflict reads once and extends again when
        the Lease is still this grant's (``_write_extension``)."""
        interval = self.at_most / 3
        retry = min(1.0, interval / 2)

        def tick() -> None:
            if run.done or run.lost:
                return
            if self.mono() - run.last_ok >= self.at_most * 2 / 3:
                run.lost = True  # Grant.lost reads as set: the budget ran out
                return
            sent = self.mono()

            def done(ok: bool) -> None:
                if ok:
                    run.last_ok = sent
                elif sent - run.last_ok >= self.at_most * 2 / 3:
                    run.lost = True
                if not run.done and not run.lost:
                    self._keepalive(run, interval if ok else retry)

            self._extend(run, done, retry_on_conflict=True)

        after = interval if wait is None else wait
        self.later(self.world.t + after / (1 + self.clock.drift), tick)

    def _extend(self, run: _Run, done: Callable[[bool], None], *, retry_on_conflict: bool) -> None:
        record = extend(run.view.record, now=self.clock.wall(self.world.t))
        body = lease_with_record(run.view.body, record)

        def answer(lease: dict[str, Any] | None, error: TransportError | None) -> None:
            if error is None and lease is not None:
                run.view = LeaseView.decode(lease)
                done(True)
            elif isinstance(error, Conflict):
                if not retry_on_conflict:
                    run.lost = True
                    done(False)
                    return

                def fresh(view: LeaseView | None) -> None:
                    if view is None:
                        run.lost = True
                        done(False)
                        return
                    run.view = view
                    self._extend(run, done, retry_on_conflict=False)

                self._fresh_if_still_mine(run, fresh)
            else:
                done(False)

        self._ask(
            lambda s: s.replace(self.lease, body),
            answer,
            late_ok=True,
            timeout=self._left(run),
        )

    def _fresh_if_still_mine(self, run: _Run, then: Callable[[LeaseView | None], None]) -> None:
        """``JobLock._fresh_if_still_mine``: one read; the Lease if it is still this grant's."""

        def answer(lease: dict[str, Any] | None, error: TransportError | None) -> None:
            if error is not None or lease is None:
                then(None)
                return
            fresh = LeaseView.decode(lease)
            mine = fresh.record.holder == self.me and fresh.fencing_token == run.view.fencing_token
            then(fresh if mine else None)

        self._ask(
            self._read_op,
            answer,
            timeout=self._left(run),
        )

    def _finish(self, run: _Run) -> None:
        """``JobLock.finish``: release with the run record; a Conflict reads once and releases
        again when the Lease is still this grant's."""
        run.done = True
        if self.mono() - run.last_ok >= self.at_most * 2 / 3:
            run.lost = True
        wall = self.clock.wall(self.world.t)
        outcome = "lost" if run.lost else "succeeded"
        record = RunRecord(
            holder=self.me,
            tick=self._tick(run.k),
            started=wall,
            finished=wall,
            outcome=outcome,
            fencing_token=run.view.fencing_token,
        )
        if run.lost:
            self.ledger.lost_recorded.add(run.k)
        ran_for = (self.world.t - run.started) * (1 + self.clock.drift)

        def attempt(held: LeaseView, first: bool) -> None:
            new_record, state = release(
                held.record, held.job, record, ran_for=ran_for, lock_at_least_for=0, now=wall
            )
            body = lease_with_job_state(lease_with_record(held.body, new_record), state)

            def answer(lease: dict[str, Any] | None, error: TransportError | None) -> None:
                if lease is not None:
                    self.see(lease)
                if isinstance(error, Conflict) and first:
                    self._fresh_if_still_mine(
                        run, lambda fresh: attempt(fresh, False) if fresh else self._kept(record)
                    )
                    return
                if error is not None:
                    self._kept(record)  # JobLock.finish: the record is kept (issue 26)
                    return
                self._idle()

            self._ask(
                lambda s: s.replace(self.lease, body),
                answer,
                late_ok=True,
                timeout=self._left(run),
            )

        attempt(run.view, True)

    def _kept(self, record: RunRecord) -> None:
        self.lock._unwritten = record
        self._idle()

    def _idle(self) -> None:
        self.busy = False
        self.current = None

    # -- the informer ------------------------------------------------------------------------

    def on_change(self, kind: str, lease: dict[str, Any]) -> None:
        """A change of the job Lease, sent down this replica's watch stream (if it has one):
        events arrive in order, each after a random delay."""
        if self._stream == 0 or self.index in self.net.faults.partitioned:
            return
        stream = self._stream
        deliver = max(
            self._last_delivery, self.world.t + self.world.rng.uniform(0, self.net.faults.latency)
        )
        self._last_delivery = deliver
        self.later(deliver, lambda: self._event(stream, kind, lease))

    def _event(self, stream: int, kind: str, lease: dict[str, Any]) -> None:
        if stream != self._stream:
            return  # the watch broke: this event is lost, the next list covers it
        if not self.synced:
            self._held_back.append((kind, lease))
            return
        self._see_event(kind, lease)

    def _see_event(self, kind: str, lease: dict[str, Any]) -> None:
        version = lease["metadata"]["resourceVersion"]
        self.see(None if kind == "DELETED" else lease, event_version=version)

    def break_watch(self) -> None:
        """The watch broke (a partition): not synced until a list succeeds."""
        self._stream = 0
        self.synced = False
        self._held_back.clear()
        if not self._listing:
            self.later(self.world.t, self._list)

    _listing = False

    def _list(self) -> None:
        self._listing = True
        self._streams += 1
        stream = self._streams

        def op(store: Any) -> dict[str, Any] | None:
            self._stream = stream  # the watch starts at the list's resourceVersion
            return self._read_op(store)

        def answer(lease: dict[str, Any] | None, error: TransportError | None) -> None:
            self._listing = False
            if error is not None or self._stream != stream:
                if self._stream == stream:
                    self._stream = 0
                self._held_back.clear()
                self._listing = True
                retry = INFORMER_RETRY * self.world.rng.uniform(0.8, 1.2)
                self.later(self.world.t + retry, self._list)
                return
            if lease is not None:  # a list without the Lease says nothing of it
                self.see(lease)
            self.synced = True
            held, self._held_back = self._held_back, []
            for kind, event in held:
                self._see_event(kind, event)

        self._ask(op, answer)


def kept_release(view: LeaseView, kept: RunRecord, *, now: datetime) -> dict[str, Any]:
    """``settle._write_kept_release``'s body: ``view``'s Lease released with the kept run record
    ``kept`` (it ran for an unknown time, so nothing holds the lock on)."""
    record, state = release(
        view.record, view.job, kept, ran_for=float("inf"), lock_at_least_for=0, now=now
    )
    return lease_with_job_state(lease_with_record(view.body, record), state)


class _Run:
    def __init__(self, *, k: int, view: LeaseView, last_ok: float, started: float) -> None:
        self.k = k
        self.view = view
        self.last_ok = last_ok
        self.started = started
        self.done = False
        self.lost = False
        #: a LEADER run's real grant, bound to leadership (``sim_leader``)
        self.grant: Any = None


def _overwrite(store: Any, body: dict[str, Any]) -> dict[str, Any]:
    """A claim write without its condition: last writer wins (never what the lock does)."""
    name = body["metadata"]["name"]
    current = store.leases.get(name)
    if current is None:
        return store.create(body)  # type: ignore[no-any-return]
    body = {**body, "metadata": {**body["metadata"], **current["metadata"]}}
    return store.replace(name, body)  # type: ignore[no-any-return]

"""A replica's job scheduler and lock in the simulation, on the real pure lock code.

Each replica fires the job at every ``period`` of its own wall clock (so clock skew moves its
ticks), claims the tick with :func:`~k8slease.jobs.lockrules.judge_claim` on what its
:class:`~k8slease.lease.observe.LeaseObserver` saw (reads and a watch, as the informer feeds
it), runs for a while, keeps the lock alive with :func:`~k8slease.jobs.lockrules.extend` and
releases it with :func:`~k8slease.jobs.lockrules.release`, as :mod:`k8slease.jobs.lock` does.
One claim or run at a time (APScheduler's ``max_instances=1``): a tick that fires meanwhile is
dropped and reported. What happened to every tick on every replica is recorded for the checks.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sim_core import T0, Clock, Network, World
from sim_election import Replica

from k8slease.errors import NotFound, TransportError
from k8slease.jobs.lockrules import Verdict, extend, judge_claim, release
from k8slease.lease.jobrecord import JobState, RunRecord, lease_with_job_state
from k8slease.lease.observe import LeaseObserver
from k8slease.lease.record import lease_with_record, new_lease
from k8slease.lease.view import LeaseView

JOB_LEASE = "g.job"


class Ledger:
    """What happened to each tick (index ``k``: wall time ``T0 + k * period``)."""

    def __init__(self) -> None:
        self.runs: dict[int, list[tuple[int, int]]] = {}  # tick -> [(replica, token)]
        self.fates: dict[int, dict[int, str]] = {}  # tick -> replica -> why it did not run
        self.lost_recorded: set[int] = set()
        self.violations: list[str] = []


class JobReplica(Replica):
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
    ) -> None:
        super().__init__(index, world, net, clock)
        self.me = f"r{index}"
        self.ledger = ledger
        self.period = period
        self.at_most = lock_at_most_for
        self.run_time = run_time
        self.observer = LeaseObserver()
        self.highest_token = 0
        self.busy = False

    # -- scheduling --------------------------------------------------------------------------

    def start(self, first_tick: int) -> None:
        self._schedule(first_tick)

    def _schedule(self, k: int) -> None:
        # wall(t) = T0 + t + skew reaches tick k at t = k*period - skew
        when = k * self.period - self.clock.skew
        self.later(when, lambda: self._fire(k))

    def _fire(self, k: int) -> None:
        late = self.clock.wall(self.world.t) - (T0 + timedelta(seconds=k * self.period))
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
        self.busy = True
        self.net.request(
            self.index, _read, lambda r, e: self.later(self.world.t, lambda: self._judge(k, r, e))
        )

    def _fate(self, k: int, why: str) -> None:
        self.ledger.fates.setdefault(k, {}).setdefault(self.index, why)

    # -- claiming ----------------------------------------------------------------------------

    def see(self, lease: dict[str, Any] | None) -> None:
        observation = self.observer.observe(lease, self.mono())
        self.highest_token = max(self.highest_token, self.observer.highest_token)
        del observation

    def _judge(self, k: int, lease: dict[str, Any] | None, error: TransportError | None) -> None:
        if error is not None and not isinstance(error, NotFound):
            self.busy = False
            self._fate(k, "unavailable")
            return
        self.see(lease)
        current = self.observer.current
        assert current is not None
        view = current.view
        if view is None:
            record = current.held_before_absence
            state = JobState(claimed_tick=self.observer.highest_claimed_tick)
        else:
            record, state = view.record, view.job
        tick = T0 + timedelta(seconds=k * self.period)
        now = self.mono()
        claim = judge_claim(
            record,
            state,
            me=self.me,
            tick=tick,
            unchanged_for=max(0.0, now - current.first_seen_at),
            lock_at_most_for=self.at_most,
            now=self.clock.wall(self.world.t),
            highest_token_seen=self.highest_token,
        )
        self.world.log(
            f"r{self.index} judges tick {k}: {claim.verdict.value} {claim.detail} "
            f"(seen {'absent' if view is None else view.resource_version}, "
            f"token {None if record is None else record.fencing_token})"
        )
        if claim.verdict is not Verdict.GRANT:
            self.busy = False
            self._fate(k, claim.verdict.value)
            return
        assert claim.record is not None and claim.state is not None
        if view is None:
            body = new_lease(JOB_LEASE, "sim", claim.record)
            op = lambda s: s.create(lease_with_job_state(body, claim.state))  # noqa: E731
        else:
            body = lease_with_job_state(lease_with_record(view.body, claim.record), claim.state)
            op = lambda s: s.replace(JOB_LEASE, body)  # noqa: E731
        sent = self.mono()
        lost_tick = claim.lost_tick
        self.net.request(
            self.index,
            op,
            lambda r, e: self.later(self.world.t, lambda: self._granted(k, r, e, sent, lost_tick)),
        )

    def _granted(
        self,
        k: int,
        lease: dict[str, Any] | None,
        error: TransportError | None,
        sent: float,
        lost_tick: Any,
    ) -> None:
        self.world.log(f"r{self.index} claim of tick {k}: {error or 'granted'}")
        if error is not None or lease is None:
            self.busy = False
            self._fate(
                k, "lost-race" if error is not None and error.status == 409 else "unavailable"
            )
            return
        self.see(lease)
        view = LeaseView.decode(lease)
        if lost_tick is not None:
            self.ledger.lost_recorded.add(int((lost_tick - T0).total_seconds() // self.period))
        runs = self.ledger.runs.setdefault(k, [])
        runs.append((self.index, view.fencing_token))
        if len(runs) > 1:
            self.ledger.violations.append(f"tick {k} ran twice: {runs}")
        self.world.log(f"r{self.index} runs tick {k} token {view.fencing_token}")
        run = _Run(k=k, view=view, last_ok=sent, started=self.world.t)
        end = self.world.t + self.world.rng.uniform(*self.run_time)
        self._keepalive(run)
        self.later(end, lambda: self._finish(run))

    # -- running -----------------------------------------------------------------------------

    def _keepalive(self, run: _Run) -> None:
        def tick() -> None:
            if run.done or run.lost:
                return
            if self.mono() - run.last_ok >= self.at_most * 2 / 3:
                run.lost = True  # Grant.lost reads as set: the budget ran out
                return
            record = extend(run.view.record, now=self.clock.wall(self.world.t))
            body = lease_with_record(run.view.body, record)
            sent = self.mono()

            def answer(lease: dict[str, Any] | None, error: TransportError | None) -> None:
                def handle() -> None:
                    if error is None and lease is not None:
                        run.view = LeaseView.decode(lease)
                        run.last_ok = sent
                        self.see(lease)
                    elif error is not None and error.status in (404, 409):
                        run.lost = True
                    if not run.done:
                        self._keepalive(run)

                self.later(self.world.t, handle)

            self.net.request(self.index, lambda s: s.replace(JOB_LEASE, body), answer)

        self.later(self.world.t + self.at_most / 3 / (1 + self.clock.drift), tick)

    def _finish(self, run: _Run) -> None:
        run.done = True
        if self.mono() - run.last_ok >= self.at_most * 2 / 3:
            run.lost = True
        wall = self.clock.wall(self.world.t)
        outcome = "lost" if run.lost else "succeeded"
        record = RunRecord(
            holder=self.me,
            tick=T0 + timedelta(seconds=run.k * self.period),
            started=wall,
            finished=wall,
            outcome=outcome,
            fencing_token=run.view.fencing_token,
        )
        new_record, state = release(
            run.view.record,
            run.view.job,
            record,
            ran_for=(self.world.t - run.started) * (1 + self.clock.drift),
            lock_at_least_for=0,
            now=wall,
        )
        body = lease_with_job_state(lease_with_record(run.view.body, new_record), state)
        if run.lost:
            self.ledger.lost_recorded.add(run.k)

        def answer(lease: dict[str, Any] | None, error: TransportError | None) -> None:
            def handle() -> None:
                self.busy = False
                if lease is not None:
                    self.see(lease)

            self.later(self.world.t, handle)

        self.net.request(self.index, lambda s: s.replace(JOB_LEASE, body), answer)

    def on_change(self, kind: str, lease: dict[str, Any]) -> None:
        """The informer: a change of the job Lease reaches this replica (not while cut off)."""
        if self.index in self.net.faults.partitioned:
            return

        def handle() -> None:
            if self.index not in self.net.faults.partitioned:
                self.see(None if kind == "DELETED" else lease)

        self.later(self.world.t + self.world.rng.uniform(0, self.net.faults.latency), handle)


class _Run:
    def __init__(self, *, k: int, view: LeaseView, last_ok: float, started: float) -> None:
        self.k = k
        self.view = view
        self.last_ok = last_ok
        self.started = started
        self.done = False
        self.lost = False


def _read(store: Any) -> dict[str, Any] | None:
    try:
        lease: dict[str, Any] = store.get(JOB_LEASE)
    except NotFound:
        return None
    return lease

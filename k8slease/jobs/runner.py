"""Run one tick of one job with the coordination its class needs.

The flow, from a scheduler tick to a Lease write and back:
tick -> the job's class -> (leadership check) -> lock claim, one conditional write -> run or skip
-> release with the run record, one conditional write. EVERY_REPLICA jobs skip straight to the run.
Skips are normal: logged at debug level, counted, and nothing is written to the API.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any, TypeVar

from k8slease.callbacks import cancellable
from k8slease.clock import Clock, SystemClock
from k8slease.errors import NotFound, TransportError, Unavailable
from k8slease.jobs.context import JobContext, JobOwner
from k8slease.jobs.dropped import NotRun
from k8slease.jobs.inprogress import RunsInProgress, in_thread_then_cancel, in_thread_to_the_end
from k8slease.jobs.leadergate import bind_to_leadership
from k8slease.jobs.lock import Grant, JobLock
from k8slease.jobs.lockrules import Verdict
from k8slease.jobs.lostticks import LostTicks
from k8slease.jobs.spec import JobSpec, Mode
from k8slease.jobs.termsettle import settle_after_term
from k8slease.kube.complaints import hint
from k8slease.lease.jobrecord import Outcome
from k8slease.metrics import JobMetrics, NoopJobMetrics

T = TypeVar("T")


@dataclass
class JobStats:
    """Per-job counters kept in memory by this replica (also exported as metrics)."""

    runs: dict[str, int] = field(default_factory=dict)
    skips: dict[str, int] = field(default_factory=dict)

    def ran(self, outcome: str) -> None:
        self.runs[outcome] = self.runs.get(outcome, 0) + 1

    def skipped(self, why: str) -> None:
        self.skips[why] = self.skips.get(why, 0) + 1


#: Claim refusals that mean another replica holds the lock, so it runs the rest of the catch-up.
_SOMEONE_ELSE_CATCHES_UP = frozenset({Verdict.HELD, Verdict.LOST_RACE, Verdict.RUNNING})


@dataclass(frozen=True, slots=True)
class _Attempt:
    """One tick this replica runs: under which grant (``None`` if uncoordinated), since when."""

    tick: datetime
    grant: Grant | None
    started: float


class TickRunner:
    """Runs the ticks of one job on this replica.

    ``owner`` names whose job it is (its group, this replica's identity); ``lock`` is the job's
    :class:`JobLock` (``None`` for EVERY_REPLICA jobs); ``is_leader`` tells whether this replica
    leads its group (consulted for LEADER jobs, before the claim and again once it is granted: a
    claim slowed down by the API server may be answered after the leadership ended, and then the
    tick does not run).
    """

    def __init__(
        self,
        spec: JobSpec,
        owner: JobOwner,
        *,
        lock: JobLock | None,
        is_leader: Callable[[], bool] | None = None,
        metrics: JobMetrics | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.spec = spec
        self.owner = owner
        self.lock = lock
        self._is_leader = is_leader
        self._clock: Clock = clock or SystemClock()
        self._metrics: JobMetrics = metrics or NoopJobMetrics()
        self.stats = JobStats()
        self._degraded = False
        #: ticks skipped while the API server could not be reached (reported on recovery)
        self._unreachable: list[datetime] = []
        #: the grant of the run in progress (a LEADER run is told when leadership ends)
        self._running: Grant | None = None
        #: the thread settling a LEADER claim left unanswered when the term ended
        self._settling: threading.Thread | None = None
        #: Why the last claim was refused (``None`` when it was granted or not a lock matter).
        self.last_skip: Verdict | None = None
        #: the last claim was refused because the namespace does not exist (Jobs is not ready)
        self.namespace_missing = False
        #: the last claim was answered with a refusal (403, 422, ...): ``api-refused`` skips, and
        #: Jobs is not ready
        self.refused = False
        self._log = owner.log(spec.name)
        #: the runs in progress (``Jobs.stop()`` waits for those a scheduler shutdown cancelled)
        self.runs = RunsInProgress()
        #: ticks lost in the current outage (API unreachable, or no leader), reported once
        self.losses = LostTicks(group=owner.group, job=spec.name, log=self._log)

    # -- deciding -----------------------------------------------------------------------------

    def _skip(self, tick: datetime, why: str) -> None:
        self.stats.skipped(why)
        self._log.debug("job.skipped", tick=tick.isoformat(), why=why)
        self._metrics.skipped(self.owner.group, self.spec.name, why)

    def _claim(self, tick: datetime, *, catch_up: bool = False) -> _Attempt | None:
        """The attempt to run ``tick`` under its grant (none when uncoordinated), or ``None``
        (skipped; a tick this replica's previous run kept from running is warned about here)."""
        return self._said(self._claim_or_drop(tick, catch_up=catch_up))

    def _claim_or_drop(self, tick: datetime, *, catch_up: bool = False) -> _Attempt | NotRun | None:
        """:meth:`_claim`, but :class:`NotRun` when this replica's previous run still holds the
        lock, for the caller to report (the scheduler's listener, or :meth:`_said`)."""
        self.last_skip = None
        if self.spec.mode is Mode.EVERY_REPLICA or self.lock is None:
            return self._begin(tick, None)
        if self._leadership_ended():
            # fired here, so this replica's entry was resumed when the tick came due: its term
            # ended and the elector has not paused the entry yet (a pause, a stalled thread). A
            # leader that began after the tick came due does not fire it: it runs nowhere
            self._skip(tick, "not-leader")
            self.losses.lost(tick, "leadership-ended")
            return None
        try:
            grant = self.lock.try_acquire(tick, reclaim_own=catch_up)
        except TransportError as exc:
            if self._leadership_ended():
                self._settle_after_term()  # its claim may land: nobody else would settle it
            return self._claim_failed(tick, exc, self.lock.transport.namespace)
        if self._degraded:
            self._degraded = False
            self.namespace_missing = False
            self.refused = False
            skipped, self._unreachable = self._unreachable, []
            if skipped:
                # each tick skipped in the outage, named at WARNING once the server is back
                self._log.warning(
                    "job.api_recovered",
                    skipped=len(skipped),
                    ticks=[t.isoformat() for t in skipped[:20]],
                )
            else:
                self._log.info("job.api_recovered")
        held_while_leading = grant is Verdict.HELD and self._leads()
        if not held_while_leading:
            self.losses.ended()
        if isinstance(grant, Verdict):
            self.last_skip = grant
            # a tick this replica's own previous run keeps from running is dropped, counted here
            # once; its report (warning, Event, outage) is DroppedTicks' or _said's
            self._skip(tick, "dropped" if grant is Verdict.RUNNING else "locked")
            if held_while_leading:
                # this replica leads, yet another holds the LEADER lock: a former leader still
                # running an earlier tick past its term, or holding a claim answered after it.
                # This tick runs nowhere (the holder's entry is paused): lost, said here (the
                # others skip it quietly; soak seed 8119)
                self.losses.lost(tick, "held-by-former-leader")
            elif self._leadership_ended():
                # the claim outlasted the term (a pause while it waited its turn): no other
                # leader fired this tick unless its term began before the tick came due
                self.losses.lost(tick, "leadership-ended")
                self._settle_after_term()
            # this replica still runs (or releases) the previous tick: its lock keeps the others
            # from this one (they skip it as held, at DEBUG), so this replica reports it dropped
            return NotRun(tick) if grant is Verdict.RUNNING else None
        if self.spec.mode is Mode.LEADER and self._is_leader is not None:
            bind_to_leadership(grant, self._is_leader)
        return self._begin(tick, grant)

    def _leads(self) -> bool:
        """A LEADER job on a replica that leads (now, on the monotonic clock)."""
        return self.spec.mode is Mode.LEADER and self._is_leader is not None and self._is_leader()

    def _leadership_ended(self) -> bool:
        """A LEADER job on a replica that does not lead (now, on the monotonic clock)."""
        return (
            self.spec.mode is Mode.LEADER and self._is_leader is not None and not self._is_leader()
        )

    def _begin(self, tick: datetime, grant: Grant | None) -> _Attempt | None:
        if grant is not None and self.lock is not None:
            if not self._startable(grant):
                return None
            self._running = grant
            self.lock.start_keepalive(grant)
        return _Attempt(grant.tick if grant is not None else tick, grant, self._clock.monotonic())

    def _startable(self, grant: Grant) -> bool:
        """Whether the run of ``grant`` may start now: its lock still held within its budget
        and, for a LEADER job, this replica leading (read on the monotonic clock after the slow
        steps before the start). If not, the tick is released as ``lost``, at WARNING."""
        if not grant.lost.is_set():
            return True
        assert self.lock is not None
        leader = self.spec.mode is Mode.LEADER
        why = "leadership ended before the run started" if leader else "lock budget spent"
        self._log.warning(
            "job.not_started",
            tick=grant.tick.isoformat(),
            why=why,
            # the others skipped their ticks in between for this grant, at DEBUG while it was
            # fresh (a grant whose answer a pause held back): name the span, as settling does
            held_from=grant.tick.isoformat(),
            held_until=self._clock.now().isoformat(),
        )
        self.losses.lost(grant.tick, "leadership-ended" if leader else "lock-budget-spent")
        self._running = None
        final = self.lock.finish(grant, "lost", error=f"not started: {why}").outcome
        self.stats.ran(final)
        self._metrics.ran(self.owner.group, self.spec.name, final, 0.0)
        return False

    def leadership_ended(self) -> None:
        """This replica stopped leading: a LEADER run in progress reads ``ctx.lost`` at once
        (a coroutine job is cancelled); a LEADER claim whose answer did not arrive is settled
        now, never run (:mod:`~k8slease.jobs.termsettle`): no next claim would settle it."""
        if self.spec.mode is not Mode.LEADER:
            return
        grant = self._running
        if grant is not None:
            grant.mark_lost()
        self._settle_after_term()

    def _settle_after_term(self) -> None:
        """Settle this LEADER job's unanswered claim in a thread (one at a time): its term
        ended, or its claim returned unanswered after the term had ended."""
        lock, leading = self.lock, self._is_leader
        if lock is None or leading is None or lock._pending is None:
            return
        if self._settling is not None and self._settling.is_alive():
            return
        every = min(1.0, lock.keepalive_interval / 2)
        self._settling = settle_after_term(lock, leading=leading, every=every)

    def _context(self, attempt: _Attempt) -> JobContext:
        grant = attempt.grant
        return self.owner.context(
            self.spec.name,
            self._log.bind(tick=attempt.tick.isoformat()),
            tick=attempt.tick,
            fencing_token=grant.fencing_token if grant else None,
            lost=grant.lost if grant else threading.Event(),
        )

    def _finish(self, attempt: _Attempt, outcome: Outcome, error: str | None) -> str:
        seconds = self._clock.monotonic() - attempt.started
        final: str = outcome
        self._running = None
        if attempt.grant is not None and self.lock is not None:
            final = self.lock.finish(attempt.grant, outcome, error=error).outcome
        elif outcome == "failed":
            self._log.error("job.failed", tick=attempt.tick.isoformat(), error=error)
        self.stats.ran(final)
        self._metrics.ran(self.owner.group, self.spec.name, final, seconds)
        return final

    # -- running ------------------------------------------------------------------------------

    def catch_up(self, ticks: list[datetime]) -> list[str | None]:
        """Run missed ``ticks`` in order, stopping when another replica is catching up.

        A tick already claimed is passed over; a lock held by another replica means it is running
        the missed ticks (in order, as this replica would), so this replica leaves the rest to it.
        """
        results: list[str | None] = []
        for tick in ticks:
            results.append(self.run_tick(tick, catch_up=True))
            if self.last_skip in _SOMEONE_ELSE_CATCHES_UP:
                break
        return results

    async def catch_up_async(self, ticks: list[datetime]) -> list[str | None]:
        """The coroutine form of :meth:`catch_up`."""
        results: list[str | None] = []
        for tick in ticks:
            results.append(await self.run_tick_async(tick, catch_up=True))
            if self.last_skip in _SOMEONE_ELSE_CATCHES_UP:
                break
        return results

    def run_tick(self, tick: datetime, *, catch_up: bool = False) -> str | None:
        """Run ``tick`` if this replica should; returns the outcome, or ``None`` when skipped."""
        return self._said(self._tick(tick, catch_up=catch_up))

    def _said(self, result: T | NotRun | None) -> T | None:
        """``result`` for a caller that is not the scheduler (whose listener reports a
        :class:`NotRun`): a tick dropped as ``running`` is warned about here, then ``None``."""
        if not isinstance(result, NotRun):
            return result
        self._log.warning("job.ticks_dropped", tick=result.tick.isoformat(), why=result.why)
        return None

    def _tick(self, tick: datetime, *, catch_up: bool = False) -> str | NotRun | None:
        with self.runs.counted():
            attempt = self._claim_or_drop(tick, catch_up=catch_up)
            if not isinstance(attempt, _Attempt):
                return attempt
            outcome = self._run(attempt)
        if attempt.tick != tick:
            # this replica's earlier claim, applied after its write timed out, ran first
            return self._tick(tick, catch_up=True)
        return outcome

    def _claim_failed(self, tick: datetime, exc: TransportError, namespace: str) -> _Attempt | None:
        """The claim of ``tick`` failed with ``exc``: skip it, warning once per kind of outage.

        Only an API server that could not be asked (:class:`~k8slease.errors.Unavailable`:
        no connection, a timeout, 5xx, 429, an answer that is not JSON) lets a ``fail_open``
        job run without a lock. One that answered with a refusal (a namespace that does not
        exist, 403, 422) refuses every replica alike: run there, the job would run on all of
        them at once."""
        missing = isinstance(exc, NotFound)
        refused = not missing and not isinstance(exc, Unavailable)
        runs_open = self.spec.fail_open and not (missing or refused)
        if not self._degraded or (missing, refused) != (self.namespace_missing, self.refused):
            self._degraded = True
            self.namespace_missing, self.refused = missing, refused
            if runs_open:
                event, consequence = (
                    "job.api_unreachable",
                    "running without a lock on every replica",
                )
            elif refused:
                event, consequence = "job.claim_refused", "skipping ticks until a claim is allowed"
            else:
                event = "job.namespace_missing" if missing else "job.api_unreachable"
                consequence = "skipping ticks until the API server answers"
            todo = hint("create", exc, namespace=namespace)
            self._log.warning(
                event,
                error=str(exc),
                fail_open=self.spec.fail_open,
                consequence=consequence,
                **({"hint": todo} if todo else {}),
            )
        if runs_open:
            return self._begin(tick, None)
        reason = "api-refused" if refused else "api-unreachable"
        self._unreachable.append(tick)
        self._skip(tick, reason)
        self.losses.lost(tick, reason)
        return None

    def _run(self, attempt: _Attempt) -> str | None:
        if attempt.grant is not None and not self._startable(attempt.grant):
            return None
        try:
            self.spec.call(self._context(attempt))
        except Exception as exc:
            self._log.exception("job.raised", tick=attempt.tick.isoformat())
            return self._finish(attempt, "failed", f"{type(exc).__name__}: {exc}")
        return self._finish(attempt, "succeeded", None)

    async def run_tick_async(self, tick: datetime, *, catch_up: bool = False) -> str | None:
        """The coroutine form of :meth:`run_tick`: lock I/O in a thread, the job in the loop.

        The job's task is cancelled when its lock is lost.
        """
        return self._said(await self._tick_async(tick, catch_up=catch_up))

    async def _tick_async(self, tick: datetime, *, catch_up: bool = False) -> str | NotRun | None:
        with self.runs.counted():
            claim = partial(self._claim_or_drop, tick, catch_up=catch_up)
            attempt, cancelled = await in_thread_to_the_end(claim)
            if cancelled:  # (a shutdown) during the claim: a grant is released, never run
                await self._release_unstarted(attempt)
                raise asyncio.CancelledError
            if not isinstance(attempt, _Attempt):
                return attempt
            outcome = await self._run_async(attempt)
        if attempt.tick != tick:
            # this replica's earlier claim, applied after its write timed out, ran first
            return await self._tick_async(tick, catch_up=True)
        return outcome

    async def _run_async(self, attempt: _Attempt) -> str | None:
        grant = attempt.grant
        # the hop back to the loop is a slow step too: check again right before the start
        # (no await between this check and the call)
        if grant is not None and grant.lost.is_set():
            if (await in_thread_to_the_end(partial(self._startable, grant)))[1]:
                raise asyncio.CancelledError
            return None
        tick = attempt.tick
        try:
            job = self.spec.call(self._context(attempt))
            await cancellable(job, None if grant is None else grant.lost_hooks)
        except asyncio.CancelledError:
            if grant is not None and grant.lost.is_set():
                return await self._finished(attempt, "lost", "cancelled")
            if grant is not None:  # cancelled from outside (shutdown): release, then go on
                await self._finished(attempt, "failed", "cancelled")
            raise
        except Exception as exc:
            self._log.exception("job.raised", tick=tick.isoformat())
            return await self._finished(attempt, "failed", f"{type(exc).__name__}: {exc}")
        return await self._finished(attempt, "succeeded", None)

    async def _release_unstarted(self, attempt: object) -> None:
        """The task awaiting a claim was cancelled (a shutdown) before the claim answered: a
        grant ``attempt`` brings is released now with a ``failed`` record, never run nor left
        held until ``lock_at_most_for``; the caller raises the ``CancelledError`` then."""
        if isinstance(attempt, _Attempt) and attempt.grant is not None:
            await self._finished(attempt, "failed", "cancelled before it started")

    async def _finished(self, attempt: _Attempt, outcome: Outcome, error: str | None) -> str:
        """:meth:`_finish` in a thread, to its end even if the run is cancelled meanwhile (the
        cancellation is raised after the release); the loop runs its other tasks meanwhile."""
        return await in_thread_then_cancel(partial(self._finish, attempt, outcome, error))

    def _untold_tick(self) -> datetime:
        """The tick for a call that did not come through a k8slease executor: now, to the second."""
        self._log.warning("job.tick_unknown", hint="add k8slease jobs through Jobs, not by hand")
        return self._clock.now().replace(microsecond=0)

    def bind(self, *, on_loop: bool = True) -> Callable[..., Any]:
        """The callable registered with APScheduler: takes the tick as ``k8slease_tick``.

        It returns the outcome, ``None`` when skipped, or :class:`NotRun` for a tick this
        replica's previous run kept from running: the scheduler's EXECUTED event carries it to
        :class:`~k8slease.jobs.dropped.DroppedTicks`, which reports it as dropped.

        A coroutine job is a coroutine function for an asyncio scheduler (``on_loop``); for a
        thread scheduler it is a function that runs the coroutine in a loop of its own.
        """
        if self.spec.is_coroutine and not on_loop:

            def fire_in_thread(*, k8slease_tick: datetime | None = None) -> str | NotRun | None:
                tick = k8slease_tick or self._untold_tick()
                return asyncio.run(self._tick_async(tick))

            fire_in_thread.__name__ = self.spec.name
            return fire_in_thread
        if self.spec.is_coroutine:

            async def fire_async(*, k8slease_tick: datetime | None = None) -> str | NotRun | None:
                return await self._tick_async(k8slease_tick or self._untold_tick())

            fire_async.__name__ = self.spec.name
            return fire_async

        def fire(*, k8slease_tick: datetime | None = None) -> str | NotRun | None:
            return self._tick(k8slease_tick or self._untold_tick())

        fire.__name__ = self.spec.name
        return fire

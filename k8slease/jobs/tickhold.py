"""One claimed tick as a context manager: :class:`TickHold` (``with`` and ``async with``).

It drives the same :class:`~k8slease.jobs.runner.TickRunner` steps a ``Jobs`` tick takes (claim
through the job's :class:`~k8slease.jobs.lock.JobLock`, start the keep-alive, hand out the
:class:`~k8slease.jobs.context.JobContext`, release with the run record), so the claim, the
extension, the run record, the metrics and the logs are those of ``Jobs``; only the body is the
caller's block instead of a function.

A replica that does not run the tick learns it in ``__enter__``, which raises
:class:`TickSkipped`: Python cannot skip a ``with`` block otherwise, and an exception is the one
way a forgotten check cannot turn into a duplicate run (a flag on the grant would let the block
run on every replica whose author forgot to test it). ``contextlib.suppress(TickSkipped)`` makes
the skip silent.
"""

from __future__ import annotations

import asyncio
import types
from datetime import datetime
from functools import partial
from typing import Literal

from k8slease.jobs.context import JobContext
from k8slease.jobs.inprogress import in_thread_then_cancel, in_thread_to_the_end
from k8slease.jobs.runner import TickRunner, _Attempt


class TickSkipped(Exception):
    """This replica does not run ``tick`` of ``job``; ``reason`` says why.

    ``reason`` is one of ``already-claimed`` (another replica claimed this tick, or a later one),
    ``held`` (another replica holds the job's lock and has not been seen unchanged for
    ``lock_at_most_for``), ``lost-race`` (another replica's write won), ``running`` (this replica
    runs an earlier tick of the job), ``api-unreachable`` and ``namespace-missing`` (the API
    server could not be asked: every replica skips, with one warning per outage),
    ``api-refused`` (it answered the claim with a refusal, 403 or 422: every replica skips, with
    one warning, ``fail_open`` or not), and
    ``not-started`` (the claim was granted so late that its lock budget was spent; recorded as a
    ``lost`` run, at WARNING). Deliberately not a :class:`~k8slease.errors.K8sLeaseError`: a skip
    is the normal answer on every replica but one, not an error to alert on.
    """

    def __init__(self, job: str, tick: datetime, reason: str) -> None:
        super().__init__(f"job {job!r} tick {tick.isoformat()} skipped: {reason}")
        self.job = job
        self.tick = tick
        self.reason = reason


def _skip_reason(runner: TickRunner) -> str:
    """Why ``runner``'s last claim produced no attempt."""
    if runner.last_skip is not None:
        return runner.last_skip.value
    if runner.namespace_missing:
        return "namespace-missing"
    return "api-refused" if runner.refused else "api-unreachable"


def claim(
    runner: TickRunner, tick: datetime, *, again: bool = False
) -> tuple[JobContext, _Attempt]:
    """Claim ``tick`` through ``runner`` (blocking I/O): the context the body gets and the
    attempt to finish, or :class:`TickSkipped`. ``again``: this replica just ran an earlier
    tick of its own (see :class:`TickHold`) and may claim over its idle lock."""
    attempt = runner._claim(tick, catch_up=again)
    if attempt is None:
        raise TickSkipped(runner.spec.name, tick, _skip_reason(runner))
    grant = attempt.grant
    # the claim may have been slow: start only within the lock's budget (as Jobs does)
    if grant is not None and not runner._startable(grant):
        raise TickSkipped(runner.spec.name, tick, "not-started")
    return runner._context(attempt), attempt


def _claim_or_skip(
    runner: TickRunner, tick: datetime, again: bool
) -> tuple[JobContext, _Attempt] | TickSkipped:
    """:func:`claim`, its skip returned instead of raised (carried out of a worker thread)."""
    try:
        return claim(runner, tick, again=again)
    except TickSkipped as skip:
        return skip


async def claim_async(
    runner: TickRunner, tick: datetime, *, again: bool = False
) -> tuple[JobContext, _Attempt]:
    """:func:`claim` in a worker thread, the loop free meanwhile, awaited to its end even if
    the task is cancelled during it (a shutdown, a timeout): a claim granted after the
    cancellation is released at once with a ``failed`` record (``cancelled before it started``,
    as ``Jobs`` records it), never run nor left held until ``lock_at_most_for``, and then the
    ``CancelledError`` is raised; so it is, with nothing to release, when the claim was skipped."""
    result, cancelled = await in_thread_to_the_end(partial(_claim_or_skip, runner, tick, again))
    if cancelled:
        await runner._release_unstarted(None if isinstance(result, TickSkipped) else result[1])
        raise asyncio.CancelledError
    if isinstance(result, TickSkipped):
        raise result
    return result


def finish(
    runner: TickRunner,
    attempt: _Attempt | None,
    exc: BaseException | None,
) -> str:
    """Release the lock of ``attempt`` with its run record: ``succeeded`` when the body returned,
    ``failed`` when it raised (a lost lock is recorded ``lost`` by the lock itself)."""
    assert attempt is not None
    if exc is None:
        return runner._finish(attempt, "succeeded", None)
    if isinstance(exc, Exception):
        runner._log.error("job.raised", tick=attempt.tick.isoformat(), exc_info=exc)
    error = "cancelled" if isinstance(exc, asyncio.CancelledError) else None
    return runner._finish(attempt, "failed", error or f"{type(exc).__name__}: {exc}")


class TickHold:
    """``with`` / ``async with``: claim one tick of one job; the block runs only on the winner.

    ``__enter__`` returns the :class:`~k8slease.jobs.context.JobContext` (``tick``,
    ``fencing_token``, ``lost``, ``log``) or raises :class:`TickSkipped`. While the block runs the
    lock is extended every ``lock_at_most_for / 3``; ``ctx.lost`` is set when it could not be
    (stop soon: another replica may take over). On exit the lock is released (or kept for the
    rest of ``lock_at_least_for``) with the run record in the same write: ``succeeded``, or
    ``failed`` when the block raised (the exception goes on). ``async with`` does the lock's I/O
    in a worker thread; the block is not cancelled when the lock is lost (read ``ctx.lost``; the
    decorator form cancels a coroutine). Cancelled during its claim, ``async with`` raises
    ``CancelledError`` once the claim has answered, a grant released first (see
    :func:`claim_async`). A hold is used once.

    ``ctx.tick`` is the tick that runs. It differs from the tick asked for in one rare case: an
    earlier claim of this replica whose answer was lost (a timeout) turned out applied; that tick
    runs first, as in ``Jobs``, and the block runs once, for it (the decorator form then claims the
    tick asked for too).
    """

    def __init__(self, runner: TickRunner, tick: datetime, *, again: bool = False) -> None:
        self._runner = runner
        self._tick = tick
        self._again = again
        self._attempt: _Attempt | None = None
        self._used = False

    @property
    def tick(self) -> datetime:
        """The tick this hold claims."""
        return self._tick

    def _start(self) -> None:
        if self._used:
            raise RuntimeError("a TickHold is used once: call hold() again for the next tick")
        self._used = True

    def __enter__(self) -> JobContext:
        self._start()
        ctx, self._attempt = claim(self._runner, self._tick, again=self._again)
        return ctx

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> Literal[False]:
        finish(self._runner, self._take_attempt(), exc)
        return False

    async def __aenter__(self) -> JobContext:
        self._start()
        ctx, self._attempt = await claim_async(self._runner, self._tick, again=self._again)
        return ctx

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> Literal[False]:
        # also when the block was cancelled: released in a thread to its end, the loop free
        await in_thread_then_cancel(partial(finish, self._runner, self._take_attempt(), exc))
        return False

    def _take_attempt(self) -> _Attempt | None:
        """The claim attempt of this ``with``, handed over once (the hold can be used again)."""
        attempt, self._attempt = self._attempt, None
        return attempt

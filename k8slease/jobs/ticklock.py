"""A scheduler-agnostic tick lock: run one tick of a job once across replicas, from any code.

ShedLock's ``LockingTaskExecutor`` for k8slease: Celery beat, the ``schedule`` library, an
``asyncio`` loop or a timer of your own fires on every replica; :class:`TickLock` lets one of them
run each tick::

    ticks = TickLock("billing")

    with contextlib.suppress(TickSkipped), ticks.hold("report", period=60) as ctx:
        send_report(fencing_token=ctx.fencing_token)      # one replica per minute

    @ticks.once_per_tick(period=3600, lock_at_most_for=900)
    def hourly_rollup(ctx): ...                           # call it from any scheduler

It is the lock path of ``Jobs``, not a copy of it: each job gets the same
:class:`~k8slease.jobs.lock.JobLock` (the tick claimed in the granting conditional write, a
fencing token per grant, extension while the body runs, release with the run record) driven by the
same :class:`~k8slease.jobs.runner.TickRunner` steps, so the Lease (``<group>.<job>``), the
operator's status, the metrics and the logs are exactly those of a ``Jobs`` ONCE_PER_TICK job.
Unlike ``Jobs`` it runs no informer and no scheduler: a claim reads the job's Lease once and, when
the tick is free, writes the claim, so a replica that loses learns it at once (from that read, or
from the 409 of its write) and never waits for its turn.
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar, overload

from kubernetes import client

from k8slease.callbacks import call_with_optional, cancellable
from k8slease.clock import Clock, SystemClock
from k8slease.errors import ConfigError
from k8slease.jobs.context import JobContext
from k8slease.jobs.inprogress import in_thread_then_cancel
from k8slease.jobs.jobwiring import JobWiring
from k8slease.jobs.journal import AUTO, RunJournal, journal_path
from k8slease.jobs.lockrules import check_lock_times
from k8slease.jobs.runner import TickRunner, _Attempt
from k8slease.jobs.spec import (
    DEFAULT_LOCK_AT_MOST_FOR,
    JobSpec,
    Mode,
    _check_job_signature,
    job_name_from,
)
from k8slease.jobs.tickhold import TickHold, TickSkipped, claim_async, finish
from k8slease.jobs.tickof import check_period, check_tick, resolve_tick
from k8slease.jobs.triggers import INTERVAL_ANCHOR
from k8slease.jobs.wiring import connect_jobs, job_lock, job_runner, site_names
from k8slease.kube.apiclient import api_client_if_configured, check_api_client, default_api_client
from k8slease.kube.options import flag, seconds
from k8slease.kube.validate import is_dns_label, optional_namespace
from k8slease.lease.informer import LeaseInformer
from k8slease.metrics import JobMetrics, default_job_metrics

__all__ = ["TickLock", "TickSkipped"]

T = TypeVar("T")
#: An ``async def`` function returning ``T`` (``AsyncFunc[T | None]``: one a skip makes return
#: ``None``).
AsyncFunc = Callable[..., Coroutine[Any, Any, T]]


class OncePerTick(Protocol):
    """What :meth:`TickLock.once_per_tick` returns: a decorator for a plain or ``async def``
    function; the decorated function returns the function's result, or ``None`` on a skip."""

    @overload
    def __call__(self, func: AsyncFunc[T], /) -> AsyncFunc[T | None]: ...

    @overload
    def __call__(self, func: Callable[..., T], /) -> Callable[..., T | None]: ...


def _unused_body(ctx: JobContext) -> None:  # pragma: no cover - never called
    """The function of a tick-lock job's spec: the caller's block or decorated function runs
    instead (the runner is used for its claim, context and finish steps only)."""


@dataclass(frozen=True, slots=True)
class _LockTimes:
    most: float
    least: float


class TickLock:
    """Claim ticks of a group's jobs once across replicas, for any scheduler or loop.

    ``group`` prefixes each job's lock Lease (``<group>.<job>``, the Lease a ``Jobs`` job of the
    same name uses, so a job must be run through one of the two, not both). ``namespace``,
    ``identity`` and ``api_client`` default as for :class:`~k8slease.Jobs` (``POD_NAMESPACE``...,
    ``POD_NAME`` plus a random suffix, in-cluster configuration else the kubeconfig).
    ``request_timeout`` (seconds, default 10) bounds each connect of a lock request. ``metrics``
    (default: Prometheus when installed) gets the same run and skip counts as ``Jobs``; ``clock``
    the wall and monotonic time (tests). ``watch`` (default False) keeps one list+watch of the
    group's job Leases open from construction until :meth:`close`, as ``Jobs`` does: claims
    are judged from it (a tick seen claimed is skipped without a request), and a crashed
    holder's Lease is timed from the moment the watch first showed it, so a new process does not
    lose the first tick after a crash to a Lease it has only just seen. ``journal`` is as for
    ``Jobs`` (default ``"auto"``: the container's termination log).

    A job's ``lock_at_most_for`` / ``lock_at_least_for`` are fixed by its first use in this
    instance; using the job again with other values is a ``ConfigError`` (the lock keeps state
    between ticks: its highest token seen, an unanswered write to settle).
    """

    def __init__(
        self,
        group: str,
        *,
        namespace: str | None = None,
        identity: str | None = None,
        api_client: client.ApiClient | None = None,
        request_timeout: float = 10.0,
        metrics: JobMetrics | None = None,
        clock: Clock | None = None,
        watch: bool = False,
        journal: str | os.PathLike[str] | None = AUTO,
    ) -> None:
        # a namespace given explicitly ("" too) is checked; only None means the default
        self.group, self.namespace, self.identity = site_names(
            group, optional_namespace(namespace), identity
        )
        self._api_client = (
            api_client_if_configured() if api_client is None else check_api_client(api_client)
        )
        self.request_timeout = seconds("request_timeout", request_timeout, above=True)
        self._metrics: JobMetrics = metrics or default_job_metrics()
        self._clock: Clock = clock or SystemClock()
        self._wiring: JobWiring | None = None
        self._runners: dict[str, tuple[TickRunner, _LockTimes]] = {}
        self._mutex = threading.Lock()
        self.watch = flag("watch", watch)
        #: the run records its locks could not write, also in a file (as for ``Jobs``)
        self.journal = RunJournal.at(journal_path(journal))
        self._informer: LeaseInformer | None = None
        self._closed = False
        if self.watch:  # from now on: a Lease's age is judged from when this process saw it
            self._io()

    # -- the two forms ------------------------------------------------------------------------

    def hold(
        self,
        job: str,
        *,
        tick: datetime | None = None,
        period: float | timedelta | None = None,
        anchor: datetime = INTERVAL_ANCHOR,
        lock_at_most_for: float = DEFAULT_LOCK_AT_MOST_FOR,
        lock_at_least_for: float = 0.0,
    ) -> TickHold:
        """A context manager (``with`` or ``async with``) that claims one tick of ``job``.

        The tick is ``tick`` (timezone-aware: the time your scheduler fired for, which every
        replica must compute alike) or, without it, the current time floored to ``period``
        (seconds or a ``timedelta``, counted from ``anchor``, default 2000-01-01 UTC): fire
        within the period, never early. ``lock_at_most_for`` (seconds, default 600) is how long a
        crashed holder blocks the job; ``lock_at_least_for`` (default 0) keeps the lock after a
        faster run, so that a replica firing a little late skips. On the replica that wins, the
        block gets the :class:`~k8slease.JobContext`; every other replica gets
        :class:`TickSkipped` from the ``with`` statement at once (see :mod:`k8slease.jobs.tickhold`
        for why an exception). Options are checked here, before any request.
        """
        name = self._job_name(job)
        when = resolve_tick(
            tick=tick,
            period=None if period is None else check_period(period, prefix=f"job {name!r}: "),
            anchor=check_tick(anchor, name="anchor"),
            now=self._clock.now(),
            job=name,
        )
        return TickHold(self._runner(name, lock_at_most_for, lock_at_least_for), when)

    @overload
    def once_per_tick(self, job: AsyncFunc[T], /) -> AsyncFunc[T | None]: ...

    @overload
    def once_per_tick(self, job: Callable[..., T], /) -> Callable[..., T | None]: ...

    @overload
    def once_per_tick(
        self,
        job: str | None = None,
        /,
        *,
        period: float | timedelta | None = None,
        anchor: datetime = INTERVAL_ANCHOR,
        lock_at_most_for: float = DEFAULT_LOCK_AT_MOST_FOR,
        lock_at_least_for: float = 0.0,
    ) -> OncePerTick: ...

    def once_per_tick(
        self,
        job: str | Callable[..., Any] | None = None,
        /,
        *,
        period: float | timedelta | None = None,
        anchor: datetime = INTERVAL_ANCHOR,
        lock_at_most_for: float = DEFAULT_LOCK_AT_MOST_FOR,
        lock_at_least_for: float = 0.0,
    ) -> Any:
        """Decorate a function (plain or ``async def``; taking its ``JobContext`` or nothing, as
        ``Jobs`` jobs do) so that each call runs it only on the replica that claims the tick.

        The job is named ``job`` or after the function (lowercase, ``_`` -> ``-``). Call the
        result with ``tick=<datetime>`` (the time your scheduler fired for) or, when ``period``
        is given, with nothing (the current time floored to it); other options as for
        :meth:`hold`. A call returns what the function returned, or ``None`` when this replica
        skipped the tick (a DEBUG log and the skip metric say why); an exception is recorded as
        a ``failed`` run and raised again. An ``async def`` function is cancelled when its lock
        is lost (recorded ``lost``; the call then returns ``None``). A call cancelled from
        outside raises ``CancelledError`` once its lock is released (cancelled during its claim:
        once the claim has answered, a grant released unrun, ``cancelled before it started``).
        Options are checked at decoration.
        """
        if callable(job):
            return self.once_per_tick()(job)
        step = None if period is None else check_period(period)
        start = check_tick(anchor, name="anchor")
        times = self._lock_times(lock_at_most_for, lock_at_least_for, prefix="")

        def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
            if not callable(func):
                raise ConfigError(f"once_per_tick decorates a function, got {func!r}")
            name = self._job_name(job or job_name_from(func))
            _check_job_signature(name, func)

            def tick_of(tick: datetime | None) -> datetime:
                return resolve_tick(
                    tick=tick, period=step, anchor=start, now=self._clock.now(), job=name
                )

            if asyncio.iscoroutinefunction(func):

                @functools.wraps(func)
                async def run_async(*, tick: datetime | None = None) -> Any:
                    runner = self._runner(name, times.most, times.least)
                    return await _run_async(runner, func, tick_of(tick))

                return _own_signature(run_async)

            @functools.wraps(func)
            def run(*, tick: datetime | None = None) -> Any:
                runner = self._runner(name, times.most, times.least)
                when = tick_of(tick)
                again = False
                while True:
                    try:
                        with TickHold(runner, when, again=again) as ctx:
                            result = call_with_optional(func, ctx)
                    except TickSkipped:
                        return None
                    if ctx.tick == when:
                        return result
                    again = True  # an earlier claim of ours ran first: now the tick asked for

            return _own_signature(run)

        return decorate

    # -- internals ----------------------------------------------------------------------------

    def _job_name(self, job: object) -> str:
        if not isinstance(job, str) or not is_dns_label(job):
            raise ConfigError(
                f"job name {job!r} must be a DNS label: lowercase alphanumerics and '-', at most "
                "63 characters"
            )
        return job

    @staticmethod
    def _lock_times(most: object, least: object, *, prefix: str) -> _LockTimes:
        times = _LockTimes(
            seconds("lock_at_most_for", most, minimum=1, prefix=prefix),
            seconds("lock_at_least_for", least, prefix=prefix),
        )
        check_lock_times(times.most, times.least, prefix=prefix)
        return times

    def _runner(self, job: str, most: object, least: object) -> TickRunner:
        """The runner (and lock) of ``job``, made on first use with these lock times."""
        times = self._lock_times(most, least, prefix=f"job {job!r}: ")
        with self._mutex:
            known = self._runners.get(job)
            if known is not None:
                if known[1] != times:
                    raise ConfigError(
                        f"job {job!r} is locked with lock_at_most_for={known[1].most:g}, "
                        f"lock_at_least_for={known[1].least:g} in this TickLock; got "
                        f"{times.most:g} and {times.least:g}"
                    )
                return known[0]
            if self._closed:
                raise ConfigError("this TickLock is closed")
            wiring = self._io()
            spec = JobSpec(
                name=job,
                func=_unused_body,
                mode=Mode.ONCE_PER_TICK,
                trigger=None,
                lock_at_most_for=times.most,
                lock_at_least_for=times.least,
            )
            # no turns: a replica that loses learns it at once
            runner = job_runner(wiring, spec, job_lock(wiring, spec, ordered=False))
            self._runners[job] = (runner, times)
            return runner

    def _io(self) -> JobWiring:
        """The jobs' wiring, made on first use (the API client is loaded then when none was
        configured at construction), watching with ``watch``."""
        if self._wiring is None:
            api_client = self._api_client or default_api_client()
            self._wiring = connect_jobs(self, api_client, metrics=self._metrics, clock=self._clock)
            if self.watch:  # no turns: every replica claims at once
                self._wiring, self._informer = self._wiring.watched(step=0.0, spread=1)
        return self._wiring

    def close(self) -> None:
        """Stop the watch (with ``watch=True``); the TickLock takes no new jobs after it. Holds
        in progress finish as usual."""
        with self._mutex:
            self._closed = True
            informer, self._informer = self._informer, None
        if informer is not None:
            informer.stop()


def _own_signature(wrapper: Callable[..., Any]) -> Callable[..., Any]:
    """``wrapper`` with the function's name and docstring but its own signature (``tick=``
    only): a scheduler that inspects what it is given (APScheduler does) must not be told that
    the wrapper takes the function's ``ctx``."""
    wrapper.__dict__.pop("__wrapped__", None)
    return wrapper


async def _run_async(runner: TickRunner, func: AsyncFunc[T], tick: datetime) -> T | None:
    """Claim ``tick`` (in a worker thread, to its end: a grant answered after a cancellation is
    released, never run), run ``func`` on this loop, cancelled when the lock is lost, and
    release with the run record: :meth:`TickRunner.run_tick_async` with the body's result
    returned and its exception raised again."""
    again = False
    while True:
        try:
            ctx, attempt = await claim_async(runner, tick, again=again)
        except TickSkipped:
            return None
        result = await _run_claimed(runner, func, ctx, attempt)
        if ctx.tick == tick:
            return result
        again = True  # an earlier claim of ours ran first: now the tick asked for


async def _run_claimed(
    runner: TickRunner,
    func: AsyncFunc[T],
    ctx: JobContext,
    attempt: _Attempt,
) -> T | None:
    """Run the claimed ``attempt`` of ``func`` on this loop (see :func:`_run_async`). The release
    runs in a worker thread to its end, also when the run is cancelled (then, or during it): the
    cancellation is raised once the run record is written."""
    grant = attempt.grant
    # the hop back to the loop is a slow step too (as in Jobs): check again before the start
    if grant is not None and grant.lost.is_set():
        await in_thread_then_cancel(functools.partial(runner._startable, grant))
        return None
    try:
        result = await cancellable(
            call_with_optional(func, ctx), None if grant is None else grant.lost_hooks
        )
    except asyncio.CancelledError as exc:
        if grant is not None and grant.lost.is_set():
            await in_thread_then_cancel(
                functools.partial(runner._finish, attempt, "lost", "cancelled")
            )
            return None
        # cancelled from outside (a shutdown): release in a thread, the loop free, then go on
        await in_thread_then_cancel(functools.partial(finish, runner, attempt, exc))
        raise
    except Exception as exc:
        await in_thread_then_cancel(functools.partial(finish, runner, attempt, exc))
        raise
    await in_thread_then_cancel(functools.partial(finish, runner, attempt, None))
    return result

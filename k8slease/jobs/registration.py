"""How jobs are registered on :class:`~k8slease.jobs.registry.Jobs`: ``add``, the ``cron``,
``interval`` and ``singleton`` decorators, and the registered specs.

Kept apart from the lifecycle (``registry.py``): registering checks each job's options at once
(``ConfigError`` naming the option) and only before ``start()``; nothing here talks to the API
server.
"""

from __future__ import annotations

import threading
import types
from collections.abc import Callable, Mapping
from datetime import datetime, tzinfo
from typing import Any, TypeVar, Unpack

from apscheduler.triggers.base import BaseTrigger

from k8slease.errors import ConfigError
from k8slease.jobs.spec import JobOptions, JobSpec, Mode
from k8slease.jobs.triggers import INTERVAL_ANCHOR, cron_trigger, interval_trigger, job_spec

F = TypeVar("F", bound=Callable[..., Any])


class JobRegistrations:
    """The registering half of ``Jobs`` (which sets ``_specs``, ``_lock`` and ``_started``)."""

    _specs: dict[str, JobSpec]
    _lock: threading.RLock
    _started: bool

    def add(self, spec: JobSpec) -> JobSpec:
        """Register a job; raises ``ConfigError`` for a bad option or a duplicate name."""
        spec.validate()
        with self._lock:
            if self._started:
                raise ConfigError("register jobs before start()")
            if spec.name in self._specs:
                raise ConfigError(f"a job named {spec.name!r} is already registered")
            self._specs[spec.name] = spec
        return spec

    def cron(
        self,
        expression: str,
        *,
        mode: Mode = Mode.ONCE_PER_TICK,
        name: str | None = None,
        timezone: str | tzinfo = "UTC",
        **options: Unpack[JobOptions],
    ) -> Callable[[F], F]:
        """Register the decorated function on a five-field cron ``expression`` (in ``timezone``).

        ``lock_at_most_for`` (default 600 s) bounds how long a crashed holder blocks the job;
        ``lock_at_least_for`` (default 0) keeps the lock after a fast run. ``misfire`` (default
        COALESCE) and ``grace`` (default 300 s) decide what happens to ticks missed while every
        replica was down. ``fail_open`` runs the job everywhere when the API server is unreachable
        (default: skip).
        """
        trigger = cron_trigger(expression, timezone=timezone)
        return self._registrar(trigger, mode=mode, name=name, **options)

    def interval(
        self,
        *,
        seconds: float = 0,
        minutes: float = 0,
        hours: float = 0,
        days: float = 0,
        weeks: float = 0,
        mode: Mode = Mode.ONCE_PER_TICK,
        name: str | None = None,
        anchor: datetime = INTERVAL_ANCHOR,
        **options: Unpack[JobOptions],
    ) -> Callable[[F], F]:
        """Register the decorated function every ``weeks``/``days``/``hours``/``minutes``/
        ``seconds`` (added up).

        Ticks are counted from ``anchor`` (default 2000-01-01 UTC) so that all replicas agree on
        them. Other options as for :meth:`cron`.
        """
        trigger = interval_trigger(
            seconds=seconds, minutes=minutes, hours=hours, days=days, weeks=weeks, anchor=anchor
        )
        return self._registrar(trigger, mode=mode, name=name, **options)

    def _registrar(
        self,
        trigger: BaseTrigger | None,
        *,
        mode: Mode,
        name: str | None,
        **options: Unpack[JobOptions],
    ) -> Callable[[F], F]:
        """A decorator that registers its function as a job on ``trigger``."""

        def register(func: F) -> F:
            self.add(job_spec(func, trigger=trigger, mode=mode, name=name, options=dict(options)))
            return func

        return register

    def singleton(self, *, mode: Mode = Mode.LEADER, name: str | None = None) -> Callable[[F], F]:
        """Register a long-lived job: LEADER runs it on the leader only, EVERY_REPLICA everywhere.

        The function gets a context whose ``lost`` event is set when it must stop; it is restarted
        if it returns or raises while it should still run.
        """

        return self._registrar(None, mode=mode, name=name)

    @property
    def specs(self) -> Mapping[str, JobSpec]:
        """The registered jobs by name."""
        return types.MappingProxyType(self._specs)

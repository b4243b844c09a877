"""What a registered job is: its function, schedule, class (mode) and lock options.

Validated when the job is registered, so a bad option fails at import time of the user's module,
not at 02:00 when the job first fires.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypedDict

from apscheduler.triggers.base import BaseTrigger

from k8slease.callbacks import call_with_optional
from k8slease.errors import ConfigError
from k8slease.jobs.lockrules import check_lock_times
from k8slease.jobs.misfire import MisfirePolicy
from k8slease.kube.options import flag, member, seconds
from k8slease.kube.validate import is_dns_label


class Mode(Enum):
    """The three job classes the field's practice sorts scheduled work into."""

    #: Runs on every replica with no coordination at all (refreshing local caches).
    EVERY_REPLICA = "every-replica"
    #: Every replica fires; the one that wins the job's Lease runs the tick (reports, invoices).
    ONCE_PER_TICK = "once-per-tick"
    #: Runs only on the group's leader; told at once when leadership is lost (pollers, sweepers).
    LEADER = "leader"


#: Default ceiling for a job lock (seconds): how long a crashed holder blocks the job.
DEFAULT_LOCK_AT_MOST_FOR = 600.0
#: Default grace (seconds) within which a late or missed tick still runs.
DEFAULT_GRACE = 300.0


def job_name_from(func: Callable[..., Any]) -> str:
    """A Lease-safe job name derived from a function name: lowercase, ``_`` turned into ``-``
    (``ConfigError`` for an object without a name, such as a ``functools.partial``)."""
    name = getattr(func, "__name__", None)
    if not isinstance(name, str):
        raise ConfigError(f"{func!r} has no __name__ to name its job after: pass name=...")
    return name.lower().replace("_", "-").strip("-")


class JobOptions(TypedDict, total=False):
    """The options every scheduled job takes (see :meth:`~k8slease.Jobs.cron`)."""

    lock_at_most_for: float
    lock_at_least_for: float
    misfire: MisfirePolicy | str
    grace: float
    fail_open: bool
    #: APScheduler's name for ``grace`` (accepted)
    misfire_grace_time: float
    #: APScheduler's: True is ``misfire="coalesce"``, False ``misfire="run_all"`` (accepted)
    coalesce: bool


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One registered job. ``trigger`` is ``None`` for a long-lived singleton."""

    name: str
    func: Callable[..., Any]
    mode: Mode
    trigger: BaseTrigger | None
    lock_at_most_for: float = DEFAULT_LOCK_AT_MOST_FOR
    lock_at_least_for: float = 0.0
    misfire: MisfirePolicy = MisfirePolicy.COALESCE
    grace: float = DEFAULT_GRACE
    fail_open: bool = False

    @property
    def is_coroutine(self) -> bool:
        return inspect.iscoroutinefunction(self.func)

    def call(self, ctx: object) -> Any:
        """Call the job function with its context, or with nothing when it takes no argument
        (APScheduler users write zero-argument jobs; the elector's callbacks work the same way)."""
        return call_with_optional(self.func, ctx)

    @property
    def coordinated(self) -> bool:
        """Whether runs go through the job's Lease (claim, fencing token, run record)."""
        return self.mode is not Mode.EVERY_REPLICA and self.trigger is not None

    def validate(self) -> JobSpec:
        """Return self, or raise ``ConfigError`` saying exactly which option is wrong."""
        if not isinstance(self.name, str) or not is_dns_label(self.name):
            # part of a Lease name and a label value
            raise ConfigError(
                f"job name {self.name!r} must be a DNS label: lowercase alphanumerics and '-', "
                "at most 63 characters (pass name=... to choose one)"
            )
        prefix = f"job {self.name!r}: "
        # Enum options also take their value or name as a string ("skip", "RUN_ALL", "leader").
        object.__setattr__(self, "mode", member("mode", self.mode, Mode, prefix=prefix))
        object.__setattr__(
            self, "misfire", member("misfire", self.misfire, MisfirePolicy, prefix=prefix)
        )
        if self.trigger is not None and not isinstance(self.trigger, BaseTrigger):
            raise ConfigError(
                f"job {self.name!r}: trigger must be an APScheduler trigger (a BaseTrigger such as"
                f" CronTrigger or IntervalTrigger) or None for a singleton, got {self.trigger!r}"
            )
        if not callable(self.func):
            raise ConfigError(f"job {self.name!r}: {self.func!r} is not callable")
        _check_job_signature(self.name, self.func)
        most = seconds("lock_at_most_for", self.lock_at_most_for, minimum=1, prefix=prefix)
        least = seconds("lock_at_least_for", self.lock_at_least_for, prefix=prefix)
        check_lock_times(most, least, prefix=prefix)
        seconds("grace", self.grace, prefix=prefix)
        flag("fail_open", self.fail_open, prefix=prefix)
        if self.fail_open and self.mode is Mode.EVERY_REPLICA:
            raise ConfigError(f"job {self.name!r}: fail_open only applies to coordinated jobs")
        if self.trigger is None and self.mode is Mode.ONCE_PER_TICK:
            raise ConfigError(f"job {self.name!r}: a singleton cannot be ONCE_PER_TICK")
        return self


def _check_job_signature(name: str, func: Callable[..., Any]) -> None:
    """Refuse at registration a function that can be called neither with its ``JobContext``
    nor with nothing (it would raise ``TypeError`` on every tick)."""
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):  # a builtin without a signature: trust it
        return
    for args in ((None,), ()):
        try:
            signature.bind(*args)
        except TypeError:
            continue
        return
    raise ConfigError(
        f"job {name!r}: {getattr(func, '__qualname__', func)!r} must take one argument "
        f"(its JobContext) or none; its signature is {signature}"
    )

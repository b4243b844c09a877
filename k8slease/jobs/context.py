"""What a job function receives: :class:`JobContext`; and whose jobs they are: :class:`JobOwner`."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from k8slease.logs import get_logger

log = get_logger("k8slease.jobs")


@dataclass(frozen=True, slots=True)
class JobContext:
    """The context passed to every job function as its only argument.

    ``tick`` is the scheduled fire time being run (``None`` for singletons). ``fencing_token`` is
    the grant's token for coordinated jobs (pass it to the systems you write to so they can reject
    a stale holder) and ``None`` for EVERY_REPLICA jobs. ``lost`` is set when this replica may no
    longer be the only one running the job (the lock or leadership could not be kept): stop soon.
    Coroutine jobs are also cancelled then. ``log`` is a structlog logger bound to the job.
    """

    job: str
    group: str
    identity: str
    tick: datetime | None
    fencing_token: int | None
    lost: threading.Event
    log: Any


@dataclass(frozen=True, slots=True)
class JobOwner:
    """Whose jobs these are: their ``group`` and the ``identity`` of the replica running them.

    One replica's runners of scheduled ticks (:class:`~k8slease.jobs.runner.TickRunner`) and of
    singletons (:class:`~k8slease.jobs.singletons.SingletonRun`) are each given theirs; it binds a
    job's logger and makes the :class:`JobContext` the job's function gets.
    """

    group: str
    identity: str

    def log(self, job: str) -> Any:
        """The structlog logger of job ``job`` run by this owner."""
        return log.bind(job=job, group=self.group, identity=self.identity)

    def context(
        self,
        job: str,
        log: Any,
        *,
        tick: datetime | None,
        fencing_token: int | None,
        lost: threading.Event,
    ) -> JobContext:
        """The context of a run of job ``job`` by this owner, logging to ``log``."""
        return JobContext(
            job=job,
            group=self.group,
            identity=self.identity,
            tick=tick,
            fencing_token=fencing_token,
            lost=lost,
            log=log,
        )

"""APScheduler executors that tell the job which tick it is running.

APScheduler 3 calls a job's function without its scheduled run time, but a per-job lock must
claim exactly that tick. These executors hand it over as the ``k8slease_tick`` keyword argument
through a thin view of the job, using ``_do_submit_job``, the extension point APScheduler's
executors are built on. k8slease adds its jobs with ``coalesce=True``, so there is one run time.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from apscheduler.executors.asyncio import AsyncIOExecutor
from apscheduler.executors.pool import ThreadPoolExecutor

#: The keyword argument that carries the scheduled fire time into k8slease's job wrapper.
TICK_KWARG = "k8slease_tick"


class _TickView:
    """The job as APScheduler sees it, with the run time added to its keyword arguments."""

    def __init__(self, job: Any, tick: datetime) -> None:
        self._job = job
        self.kwargs = {**job.kwargs, TICK_KWARG: tick}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._job, name)

    def __str__(self) -> str:
        """What APScheduler's own log lines print (``Job "..." raised an exception``): the job's
        id, ``k8slease:<group>:<job>``, and the tick; never an object address (issue 23)."""
        return f"{getattr(self._job, 'id', None) or self._job} tick {self.kwargs[TICK_KWARG]}"

    __repr__ = __str__


class TickThreadPoolExecutor(ThreadPoolExecutor):  # type: ignore[misc]
    """A thread pool executor that passes each job its scheduled run time."""

    def _do_submit_job(self, job: Any, run_times: list[datetime]) -> None:
        super()._do_submit_job(_TickView(job, run_times[-1]), run_times[-1:])


class TickAsyncIOExecutor(AsyncIOExecutor):  # type: ignore[misc]
    """The asyncio executor that passes each job its scheduled run time."""

    def _do_submit_job(self, job: Any, run_times: list[datetime]) -> None:
        super()._do_submit_job(_TickView(job, run_times[-1]), run_times[-1:])

"""Test doubles that record what the code under test reports (``tests.support.recorders``):
the Events it posts, the skips it counts and the ticks a job ran for, with a way to wait for
them; and a :class:`Journal` of anything, in order, to wait on."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Generic, TypeVar

from k8slease import JobContext

T = TypeVar("T")


class PostedEvents:
    """Stands in for an ``EventRecorder``: keeps every posted Event (its involved object, reason,
    message, type and action) and sets ``first`` on the first one."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.first = threading.Event()

    def post(
        self,
        involved: Mapping[str, Any],
        *,
        reason: str,
        message: str,
        type_: str = "Normal",
        action: str = "",
    ) -> bool:
        self.events.append(
            {
                "involved": dict(involved),
                "reason": reason,
                "message": message,
                "type": type_,
                "action": action,
            }
        )
        self.first.set()
        return True

    @property
    def reasons(self) -> list[str]:
        """The reasons of the Events posted so far, in order."""
        return [event["reason"] for event in self.events]


class CountedSkips:
    """Stands in for the metrics of a job group (``JobMetrics``): keeps every skip it is told of
    as ``(group, job, reason)`` and sets ``third`` once three are counted; runs are not kept."""

    def __init__(self) -> None:
        self.skips: list[tuple[str, str, str]] = []
        self.third = threading.Event()

    def skipped(self, group: str, job: str, reason: str) -> None:
        self.skips.append((group, job, reason))
        if len(self.skips) >= 3:
            self.third.set()

    def ran(self, group: str, job: str, outcome: str, seconds: float) -> None:
        """A run: not what this double records."""

    @property
    def reasons(self) -> list[str]:
        """The reasons of the skips counted so far, in order."""
        return [reason for _, _, reason in self.skips]


class SeenTicks:
    """An ``async def`` job (:meth:`job`) that notes the tick of each run and sets ``ran``: an
    asyncio or a threading Event, whichever the test's scheduler lets it wait on."""

    def __init__(self, ran: asyncio.Event | threading.Event) -> None:
        self.ticks: list[datetime | None] = []
        self.ran = ran

    async def job(self, ctx: JobContext) -> None:
        self.ticks.append(ctx.tick)
        self.ran.set()


class Journal(Generic[T]):
    """An ordered, thread-safe record of what happened (``entries``), that a test waits on."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.entries: list[T] = []

    def add(self, entry: T) -> None:
        with self.cond:
            self.entries.append(entry)
            self.cond.notify_all()

    def within(self, predicate: Callable[[list[T]], bool], timeout: float) -> bool:
        """Whether ``predicate(entries)`` holds within ``timeout`` seconds."""
        with self.cond:
            return self.cond.wait_for(lambda: predicate(self.entries), timeout)

    def count(self, entry: T) -> int:
        with self.cond:
            return self.entries.count(entry)

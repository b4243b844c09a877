"""Whose jobs they are (:class:`~k8slease.jobs.context.JobOwner`): a scheduled tick's and a
singleton's function get a context, and log through a logger, naming the job, its group and the
replica running it."""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from k8slease.jobs.context import JobContext, JobOwner
from k8slease.jobs.runner import TickRunner
from k8slease.jobs.singletons import SingletonRun
from k8slease.jobs.spec import JobSpec, Mode

OWNER = JobOwner("billing", "replica-0")
NAMED = {"job": "invoices", "group": "billing", "identity": "replica-0"}


def _said(ctx: JobContext) -> dict[str, Any]:
    return {"job": ctx.job, "group": ctx.group, "identity": ctx.identity}


def _logged(caplog: pytest.LogCaptureFixture, event: str) -> dict[str, Any]:
    (record,) = [r for r in caplog.records if getattr(r, "k8slease_event", "") == event]
    fields: dict[str, Any] = getattr(record, "k8slease_fields", {})
    return fields


def test_a_tick_context_and_its_log_name_the_owner(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[JobContext] = []

    def invoices(ctx: JobContext) -> None:
        seen.append(ctx)
        ctx.log.info("invoices.sent")

    spec = JobSpec(name="invoices", func=invoices, mode=Mode.EVERY_REPLICA, trigger=None)
    tick = datetime(2026, 1, 1, tzinfo=UTC)
    with caplog.at_level(logging.INFO, logger="k8slease"):
        assert TickRunner(spec, OWNER, lock=None).run_tick(tick) == "succeeded"
    assert _said(seen[0]) == NAMED and seen[0].tick == tick
    assert _logged(caplog, "invoices.sent") == {**NAMED, "tick": tick.isoformat()}


def test_a_singleton_context_and_its_log_name_the_owner(caplog: pytest.LogCaptureFixture) -> None:
    lost = threading.Event()
    seen: list[JobContext] = []

    def poller(ctx: JobContext) -> None:
        seen.append(ctx)
        ctx.lost.set()

    spec = JobSpec(name="invoices", func=poller, mode=Mode.LEADER, trigger=None)
    run = SingletonRun(spec, OWNER, lost=lost, fencing_token=7)
    with caplog.at_level(logging.INFO, logger="k8slease"):
        run.start()
        run.thread.join(5)
    assert not run.thread.is_alive()
    assert _said(seen[0]) == NAMED and seen[0].fencing_token == 7 and seen[0].lost is lost
    assert _logged(caplog, "singleton.started") == {**NAMED, "fencing_token": 7}

"""The tick period a locked job needs under a slow API server (issue 22): every tick costs its
holder two delayed conditional writes in a row (claim, release), so a job runs every tick only
when ``2 * latency + run_time`` is shorter than its period, and otherwise its runs are as many
ticks apart as :func:`~k8slease.jobs.lockbudget.ticks_between_runs` says, the ticks between
dropped and reported (docs/operations.md states the formula; this checks it on three replicas,
and failed with default claim waits before the formula counted them)."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import datetime

import pytest

from k8slease import ElectionTiming, JobContext
from k8slease.jobs.lockbudget import shortest_tick_period, ticks_between_runs
from k8slease.testing.server import APIServer
from tests.support.factories import make_replicas
from tests.support.lifecycle import all_started
from tests.support.polling import poll

TIMING = ElectionTiming(lease_duration=6, renew_interval=2, renew_deadline=4, retry_interval=1)
LATENCY, RUN = 0.6, 0.3  # a tick needs 2 * 0.6 + 0.3 = 1.5 s
SPELL = 16.0


def test_the_formula() -> None:
    assert shortest_tick_period(LATENCY, RUN) == pytest.approx(1.5)
    assert ticks_between_runs(2.0, LATENCY, RUN) == (1, 1)
    assert ticks_between_runs(1.0, LATENCY, RUN) == (2, 2)
    # a later-ranked replica judging its claim 1 s after the tick may find the release landed
    assert ticks_between_runs(1.0, LATENCY, RUN, claim_wait=1.0) == (1, 2)
    # the 10 s delay and 10 s ticks, three replicas (claim waits up to 2 * 0.5 s)
    assert ticks_between_runs(10.0, 10.0, 1.0, claim_wait=1.0) == (2, 3)
    assert ticks_between_runs(30.0, 10.0, 1.0) == (1, 1)


@pytest.fixture
def runs(k8s_embedded_apiserver: APIServer) -> Iterator[tuple[APIServer, list[datetime]]]:
    ticks: list[datetime] = []
    lock = threading.Lock()

    def job(ctx: JobContext) -> None:
        assert ctx.tick is not None
        with lock:
            ticks.append(ctx.tick)
        ctx.lost.wait(RUN)

    # claim_step=0: every replica judges at the tick, so the bounds meet (see the formula)
    group = make_replicas(
        "period", k8s_embedded_apiserver, 3, election=TIMING, handle_signals=False, claim_step=0
    )
    for jobs in group:
        jobs.interval(seconds=1, lock_at_most_for=30, name="tick")(job)
    with all_started(group):
        yield k8s_embedded_apiserver, ticks


@pytest.mark.embedded_only  # faults
@pytest.mark.timeout(90)
def test_a_locked_job_slower_than_its_period_runs_as_the_formula_says_and_reports_the_rest(
    runs: tuple[APIServer, list[datetime]], caplog: pytest.LogCaptureFixture
) -> None:
    server, ticks = runs
    poll("a first run", lambda: ticks, 20)
    caplog.set_level(logging.WARNING, logger="k8slease")
    server.faults.add(latency=LATENCY, duration=SPELL)
    start = time.time()
    time.sleep(SPELL)  # the spell is the experiment
    fewest, most = ticks_between_runs(1.0, LATENCY, RUN)
    assert fewest == most == 2
    spell = sorted(t for t in ticks if start + 2 <= t.timestamp() <= start + SPELL - 2)
    assert len(spell) >= 4, spell
    assert set(Counter(spell).values()) == {1}, "no tick twice"
    gaps = {round((b - a).total_seconds()) for a, b in itertools.pairwise(spell)}
    # never two ticks in a row (the formula's bound); under load a tick may come later still
    assert min(gaps) >= fewest, (gaps, spell)
    assert len(spell) >= (SPELL - 4) / (most + 1), (len(spell), spell)
    dropped = [r for r in caplog.records if "job.ticks_dropped" in r.getMessage()]
    assert dropped, "the dropped ticks are reported at WARNING"

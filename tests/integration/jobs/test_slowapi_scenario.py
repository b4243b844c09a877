"""Three replicas (a ONCE_PER_TICK and a LEADER-class job) through a slow-API spell (issue 22).

Every request to the embedded API server takes ``LATENCY`` (more than ``request_timeout``, which
once bounded every request; less than the latency the election tolerates) for the spell. The
leader keeps leading, every tick in the spell runs once, nothing runs twice. The spell lasts
``K8SLEASE_SLOW_SECONDS`` (default 12 s; the figures in docs/reliability.md come from longer runs
of the same scenario).
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from k8slease import ElectionTiming, JobContext, Jobs, Mode
from k8slease.election.budgets import tolerated_latency
from k8slease.testing.server import APIServer
from tests.support.factories import make_replicas
from tests.support.lifecycle import all_started
from tests.support.polling import poll

TIMING = ElectionTiming(lease_duration=5, renew_interval=1, renew_deadline=3.5, retry_interval=1)
LATENCY = 1.3  # request_timeout: min(10, 3.5 / 3) = 1.17 s; tolerated: 1.75 s
EVERY = 4  # a tick needs a claim and a release: 2 * LATENCY fits in the period
SPELL = float(os.environ.get("K8SLEASE_SLOW_SECONDS", "12"))


@pytest.fixture
def replicas(k8s_embedded_apiserver: APIServer) -> Iterator[tuple[list[Jobs], list[tuple]]]:
    runs: list[tuple[str, str, datetime]] = []
    lock = threading.Lock()

    def record(kind: str, who: str) -> object:
        def job(ctx: JobContext) -> None:
            assert ctx.tick is not None
            with lock:
                runs.append((kind, who, ctx.tick))

        return job

    # TIMING's request_timeout is the one of the locks and Events too
    group = make_replicas("slow", k8s_embedded_apiserver, 3, election=TIMING, handle_signals=False)
    for jobs in group:
        who = jobs.identity
        jobs.interval(seconds=EVERY, lock_at_most_for=12, grace=EVERY, name="tick")(
            record("tick", who)
        )
        jobs.interval(seconds=EVERY, mode=Mode.LEADER, name="lead")(record("lead", who))
    with all_started(group):
        yield group, runs


@pytest.mark.embedded_only  # faults
@pytest.mark.timeout(120)
def test_three_replicas_keep_their_leader_and_run_every_tick_once_through_a_slow_spell(
    k8s_embedded_apiserver: APIServer, replicas: tuple[list[Jobs], list[tuple]]
) -> None:
    assert TIMING.timeout < LATENCY < tolerated_latency(TIMING)
    group, runs = replicas
    poll("a leader", lambda: any(j.is_leader for j in group), 20)
    leader = next(j for j in group if j.is_leader)
    start = datetime.now(UTC)
    k8s_embedded_apiserver.faults.add(latency=LATENCY, duration=SPELL)
    seen: set[tuple[str, ...]] = set()
    end = time.monotonic() + SPELL
    while time.monotonic() < end:
        seen.add(tuple(j.identity for j in group if j.is_leader))
        time.sleep(0.05)  # a sampler through the spell (its length is the experiment)
    assert seen == {(leader.identity,)}, "the same single leader throughout"
    # ticks whose claim began and finished within the spell (plus a claim and a release): all
    # recorded once both jobs ran a tick after the spell (claims fast again)
    over = start + timedelta(seconds=SPELL + 1)
    for job in ("tick", "lead"):
        poll(
            f"a {job} run after the spell",
            lambda job=job: [t for kind, _, t in runs if kind == job and t >= over],
            2 * LATENCY + 20,
        )
    first = start + timedelta(seconds=1)
    last = start + timedelta(seconds=SPELL - 2 * LATENCY - 1)
    tick_runs = Counter(t for kind, _, t in runs if kind == "tick" and first <= t <= last)
    lead_runs = Counter(t for kind, _, t in runs if kind == "lead" and first <= t <= last)
    expected = int((last - first).total_seconds() // EVERY)
    assert len(tick_runs) >= expected, sorted(tick_runs)
    assert set(tick_runs.values()) == {1}, "no tick twice"
    assert len(lead_runs) >= expected and set(lead_runs.values()) == {1}
    assert {who for kind, who, _ in runs if kind == "lead"} == {leader.identity}

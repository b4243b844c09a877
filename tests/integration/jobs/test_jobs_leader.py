"""LEADER jobs follow the group's leadership: they move on failover and the old leader is told
first; ``wrap()`` does the same for a scheduler the app keeps itself."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from apscheduler.schedulers.background import BackgroundScheduler
from kubernetes import client

from k8slease import ElectionTiming, JobContext, Jobs, Mode
from k8slease.election.elector import LeaderElector
from k8slease.jobs.wrap import wrap
from k8slease.testing.server import APIServer
from tests.support.factories import JobsFactory, make_jobs
from tests.support.timing import JOBS_FAST as FAST


class Journal:
    """An ordered, thread-safe record of what happened, with waiting on conditions."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.entries: list[tuple[Any, ...]] = []

    def add(self, *entry: Any) -> None:
        with self.cond:
            self.entries.append(entry)
            self.cond.notify_all()

    def wait_for(self, predicate: Callable[[list[tuple[Any, ...]]], bool], timeout: float) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: predicate(self.entries), timeout), self.entries


@pytest.fixture
def group_of(new_jobs: JobsFactory) -> Iterator[Callable[..., list[Jobs]]]:
    made: list[Jobs] = []

    def make(count: int, register: Callable[[Jobs], None], **options: Any) -> list[Jobs]:
        replicas = []
        for i in range(count):
            jobs = new_jobs(
                "leaders",
                identity=f"r{i}",
                election=ElectionTiming(**FAST),
                **options,
            )
            register(jobs)
            made.append(jobs)
            replicas.append(jobs)
        for jobs in replicas:
            jobs.start()
        return replicas

    yield make
    for jobs in made:
        jobs.stop()


def leader_of(replicas: list[Jobs], journal: Journal) -> Jobs:
    journal.wait_for(lambda e: any(x[0] == "start" for x in e), 10)
    starts = [x for x in journal.entries if x[0] == "start"]
    return next(j for j in replicas if j.identity == starts[-1][1])


def test_a_leader_singleton_moves_on_failover_and_the_old_leader_is_told_first(
    group_of: Callable[..., list[Jobs]],
) -> None:
    journal = Journal()

    def poller(ctx: JobContext) -> None:
        journal.add("start", ctx.identity, ctx.fencing_token)
        ctx.lost.wait()
        journal.add("lost", ctx.identity)

    replicas = group_of(3, lambda jobs: jobs.singleton(mode=Mode.LEADER, name="poller")(poller))
    first = leader_of(replicas, journal)
    assert [x for x in journal.entries if x[0] == "start"] == [("start", first.identity, 1)]
    first.stop()
    journal.wait_for(lambda e: len([x for x in e if x[0] == "start"]) == 2, 10)
    kinds = [x[:2] for x in journal.entries]
    assert kinds.index(("lost", first.identity)) < [x[0] for x in journal.entries].index("start", 1)
    second = [x for x in journal.entries if x[0] == "start"][1]
    assert second[1] != first.identity
    assert second[2] == 2  # a new grant, a new fencing token


def test_leader_scheduled_jobs_fire_only_on_the_leader_and_resume_on_the_new_one(
    group_of: Callable[..., list[Jobs]],
) -> None:
    journal = Journal()

    def every_second(ctx: JobContext) -> None:
        journal.add("tick", ctx.identity, ctx.tick, ctx.fencing_token)

    def register(jobs: Jobs) -> None:
        jobs.interval(seconds=1, mode=Mode.LEADER, name="sweep", lock_at_most_for=5)(every_second)
        jobs.singleton(mode=Mode.LEADER, name="marker")(
            lambda ctx: (journal.add("start", ctx.identity), ctx.lost.wait())
        )

    replicas = group_of(2, register)
    first = leader_of(replicas, journal)
    journal.wait_for(lambda e: sum(1 for x in e if x[0] == "tick") >= 2, 10)
    first.stop()
    journal.wait_for(lambda e: any(x[0] == "tick" and x[1] != first.identity for x in e), 10)
    ticks = [x for x in journal.entries if x[0] == "tick"]
    by_first = [x for x in ticks if x[1] == first.identity]
    by_second = [x for x in ticks if x[1] != first.identity]
    assert by_first and by_second
    # Never both: every tick of the old leader precedes every tick of the new one.
    assert max(x[2] for x in by_first) < min(x[2] for x in by_second)
    assert len({x[2] for x in ticks}) == len(ticks)


def test_a_leader_cut_off_from_the_api_stops_its_leader_jobs_before_its_lease_expires(
    k8s_embedded_apiserver: APIServer,
) -> None:
    server = k8s_embedded_apiserver
    journal = Journal()
    jobs = make_jobs(
        "cutoff", server.api_client(), identity="only", election=ElectionTiming(**FAST)
    )

    @jobs.singleton(mode=Mode.LEADER, name="poller")
    def poller(ctx: JobContext) -> None:
        journal.add("start", ctx.identity)
        ctx.lost.wait()
        journal.add("lost", ctx.identity)

    jobs.start()
    try:
        journal.wait_for(lambda e: ("start", "only") in e, 10)
        server.faults.add(["update", "get"], "leases", status=503)
        journal.wait_for(lambda e: ("lost", "only") in e, 5)
        assert not jobs.is_leader
    finally:
        jobs.stop()


def test_wrap_runs_a_plain_apscheduler_scheduler_only_while_leading(
    k8s_api_client: client.ApiClient, k8s_namespace: str
) -> None:
    journal = Journal()
    pairs = []
    for i in range(2):
        scheduler = BackgroundScheduler(timezone=UTC)
        identity = f"w{i}"
        scheduler.add_job(
            lambda identity=identity: journal.add("run", identity),
            "interval",
            seconds=0.2,
            next_run_time=datetime.now(UTC),
        )
        elector = LeaderElector(
            "wrapped", namespace=k8s_namespace, identity=identity, api_client=k8s_api_client, **FAST
        )
        wrap(scheduler, elector)
        pairs.append((scheduler, elector))
    try:
        for _, elector in pairs:
            elector.start()
        journal.wait_for(lambda e: len(e) >= 3, 10)
        runners = {x[1] for x in journal.entries}
        assert len(runners) == 1
        (leader_id,) = runners
        leader = next(e for _, e in pairs if e.identity == leader_id)
        leader.stop()
        journal.wait_for(lambda e: any(x[1] != leader_id for x in e), 10)
        with journal.cond:
            after = journal.entries[
                [x[1] for x in journal.entries].index(
                    next(x[1] for x in journal.entries if x[1] != leader_id)
                ) :
            ]
        assert all(x[1] != leader_id for x in after)
    finally:
        for scheduler, elector in pairs:
            elector.stop()
            scheduler.shutdown(wait=False)

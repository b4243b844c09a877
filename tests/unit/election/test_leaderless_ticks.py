"""LEADER-class ticks that fire while nobody leads are lost: each replica tells from what it has
seen of the group Lease, and reports them once per outage with the count (issue 22)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from elector_model import Cluster

from k8slease.jobs.lostticks import LostTicks, leaderless_watch, nobody_leads
from k8slease.logs import get_logger
from k8slease.metrics import NoopJobMetrics


class ModelClock:
    """The model cluster's time, for replica ``i``."""

    def __init__(self, cluster: Cluster, i: int) -> None:
        self.cluster, self.i = cluster, i

    def monotonic(self) -> float:
        return self.cluster.mono(self.i)

    def now(self) -> Any:
        return self.cluster.wall(self.i)

    def wait(self, cond: Any, timeout: float | None) -> None:
        raise AssertionError("not used")


def _events(caplog: pytest.LogCaptureFixture, name: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "k8slease_event", "") == name]


def test_a_replica_that_sees_the_leader_lapse_reports_the_lost_ticks_once_with_their_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cluster = Cluster(2)  # lease 10 s, renew 3 s, deadline 7 s
    while cluster.leader() != 0:
        cluster.roundtrip(0)
    cluster.roundtrip(1)  # r1 has read the Lease: r0 holds it
    follower = cluster.replicas[1].machine
    losses = LostTicks(group="billing", job="sweep", log=get_logger("k8slease.jobs"))
    tick = leaderless_watch(
        losses, machine=lambda: follower, clock=ModelClock(cluster, 1), metrics=NoopJobMetrics()
    )
    with caplog.at_level(logging.DEBUG, logger="k8slease"):
        tick()
        assert losses.count == 0 and not nobody_leads(follower, now=cluster.mono(1))
        # r0 goes silent: after leaseDurationSeconds seen unchanged, nobody leads for r1
        cluster.advance(9.9)
        tick()
        assert losses.count == 0, "still within the lease r1 saw last"
        cluster.advance(0.2)
        for _ in range(3):
            tick()
            cluster.advance(5)
        assert losses.count == 3
        assert len(_events(caplog, "job.ticks_being_lost")) == 1, "warned once, at the start"
        assert not _events(caplog, "job.ticks_lost")
        # r1 takes over (or sees anyone lead again): the outage ends, with its count
        cluster.run_until(lambda: cluster.leader() is not None)
        tick()
    ended = _events(caplog, "job.ticks_lost")
    assert len(ended) == 1 and ended[0].levelno == logging.WARNING
    fields = getattr(ended[0], "k8slease_fields", {})
    assert fields["lost"] == 3 and fields["why"] == "no-leader" and fields["job"] == "sweep"
    assert losses.count == 0


def test_nothing_is_lost_before_the_lease_was_ever_seen_or_while_this_replica_leads() -> None:
    cluster = Cluster(1)
    machine = cluster.replicas[0].machine
    assert not nobody_leads(machine, now=cluster.mono(0)), "cannot tell yet"
    while cluster.leader() != 0:
        cluster.roundtrip(0)
    assert not nobody_leads(machine, now=cluster.mono(0))

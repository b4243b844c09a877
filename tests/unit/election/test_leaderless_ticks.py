"""LEADER-class ticks that fire while nobody leads are lost: each replica tells from what it has
seen of the group Lease, and reports them once per outage with the count (issue 22)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from k8slease.election.commands import Update
from k8slease.jobs.lostticks import LostTicks, leaderless_watch, nobody_leads
from k8slease.logs import get_logger
from k8slease.metrics import NoopJobMetrics
from tests.unit.election.elector_model import Cluster


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
        # r0 goes silent (crashed): its belief ends 7 s (renew_deadline) after its last write
        # was sent; r1 counts from when it saw that write, plus half the 3 s margin for clock
        # rates: nobody leads from 8.5 s on, though r1 may take the Lease only at 10 s
        cluster.advance(8.4)
        tick()
        assert losses.count == 0, "r0 may still believe it leads"
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


def _r0_leading_both_watching() -> Cluster:
    """Two replicas, r0 leading, both watching the Lease and up to date."""
    cluster = Cluster(2)
    while cluster.leader() != 0:
        cluster.roundtrip(0)
    for i in (0, 1):
        cluster.replicas[i].machine.set_watching(True, cluster.mono(i))
        cluster.deliver_watch(i, 1000)
    return cluster


def _drop_holder(lease: dict[str, Any]) -> None:
    lease["spec"].pop("holderIdentity")


@pytest.mark.parametrize("then_delete", [False, True])
def test_the_holder_that_steps_down_on_a_hand_edit_reports_the_ticks_at_once(
    then_delete: bool,
) -> None:
    """Found by the simulation: a hand edit removed the holder; the holder stepped down on
    seeing it, and candidates wait out the whole duration before taking the Lease. Nobody led
    for those ticks and nobody said so (every replica saw a Lease someone might hold). The
    former holder knows: it reports them at once; the others after renew_deadline plus half the
    margin (before that, the holder might not have seen the edit yet). Also when the Lease is
    then deleted."""
    cluster = _r0_leading_both_watching()
    holder, follower = cluster.replicas[0].machine, cluster.replicas[1].machine
    cluster.store.edit("demo", _drop_holder)
    if then_delete:
        cluster.store.delete("demo")
    for i in (0, 1):
        cluster.deliver_watch(i, 1000)
    assert cluster.leader() is None, "the holder stepped down on seeing the edit"
    assert nobody_leads(holder, now=cluster.mono(0))
    assert not nobody_leads(follower, now=cluster.mono(1)), "r0 might not have seen it yet"
    cluster.advance(8.6)
    assert nobody_leads(follower, now=cluster.mono(1))


def test_a_lease_naming_this_replica_that_it_does_not_lead_on_reports_the_ticks_at_once() -> None:
    """Found by the simulation once its leader-Lease watch delivered in order (soak seed 8025,
    tick 369): r2 led; a hand deletion; r1's create, sent before and given up on, was applied
    then. r1 waits out a Lease naming itself that came back after another's held Lease was
    deleted (rule 4); r2, the deleted Lease's holder, saw a Lease naming r1 and could not tell
    whether r1 led; the third replica neither. Nobody led and nobody said so. r1 knows it does
    not lead on it: it reports the ticks from the moment it sees it until it leads."""
    cluster = _r0_leading_both_watching()
    holder, named = cluster.replicas[0].machine, cluster.replicas[1].machine
    body = cluster.store.get("demo")
    cluster.store.delete("demo")
    body["spec"]["holderIdentity"] = "r1"  # r1's create, given up on, applied now
    body["metadata"].pop("resourceVersion", None)
    body["metadata"].pop("uid", None)
    cluster.store.create(body)
    cluster.advance(0.5)
    for i in (0, 1):
        cluster.deliver_watch(i, 1000)
    assert cluster.leader() is None, "the holder stepped down on seeing the deletion"
    assert nobody_leads(named, now=cluster.mono(1)), "it does not lead on a Lease naming it"
    assert not nobody_leads(holder, now=cluster.mono(0)), "r1 might lead: r0 cannot tell"
    # through the wait of the deletion, until r1 takes the Lease and leads
    for _ in range(40):
        taking = isinstance(cluster.act(1), Update)
        cluster.apply(1)
        cluster.respond(1)
        if taking:
            break
        assert nobody_leads(named, now=cluster.mono(1)), "still waiting out the deletion"
        cluster.advance(0.5)
    assert cluster.leader() == 1 and not nobody_leads(named, now=cluster.mono(1))


def _shorten(lease: dict[str, Any]) -> None:
    lease["spec"]["leaseDurationSeconds"] = 1


def _drop_spec(lease: dict[str, Any]) -> None:
    lease.pop("spec")


def _new_holder(lease: dict[str, Any]) -> None:
    lease["spec"].update(holderIdentity="go-controller", renewTime="2026-01-01T00:00:09.000000Z")


@pytest.mark.parametrize(
    ("edits", "watch_breaks", "reported"),
    [
        ((_shorten, _drop_spec), False, True),
        ((_drop_holder,), False, True),
        ((_shorten, _drop_spec), True, False),  # a change may have been missed meanwhile
        ((_shorten, _new_holder), False, False),  # someone new may lead
    ],
    ids=["shorten-then-drop-spec", "drop-holder", "watch-broke-between", "a-new-holder"],
)
def test_hand_edits_after_the_last_holder_write_do_not_delay_the_report(
    edits: tuple[Any, ...], watch_breaks: bool, reported: bool
) -> None:
    """Found by the soak (seed 8006, tick 232): a create applied after its sender, cut off, gave
    up on it; then two hand edits (a shorter duration, the spec dropped). Each edit restarted
    the "unchanged for renew_deadline plus half the margin" wait, so nobody led and nobody said
    so. No holder writes such an edit: the belief of whoever wrote the Lease last ends
    renew_deadline after this replica first saw that write, if its watch has shown it every
    change since."""
    cluster = _r0_leading_both_watching()  # then r0 is cut off: it writes nothing more
    follower = cluster.replicas[1].machine
    for edit in edits:
        cluster.advance(3.0)
        cluster.store.edit("demo", edit)
        cluster.deliver_watch(1, 1000)
        if watch_breaks:
            follower.set_watching(False, cluster.mono(1))
            follower.set_watching(True, cluster.mono(1))
    assert not nobody_leads(follower, now=cluster.mono(1)), "r0 may still believe"
    cluster.advance(8.6 - 3.0 * len(edits))  # 8.6 s after r0's last write was seen
    assert nobody_leads(follower, now=cluster.mono(1)) is reported

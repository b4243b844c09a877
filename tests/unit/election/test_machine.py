"""The election state machine, driven step by step against an in-memory Lease store: creating
the Lease, renewing it, stepping down, taking over (after a crash, a release, reads answered
late), and what the watch shows. The release on stop: test_machine_release.py; malformed and
deleted Leases, late answers and API errors: test_machine_faults.py."""

from __future__ import annotations

import pytest

from k8slease.election.commands import (
    Create,
    Done,
    NewLeader,
    Purpose,
    Read,
    Released,
    StartedLeading,
    StoppedLeading,
    Update,
    Wait,
)
from k8slease.lease.record import record_from_lease
from k8slease.names import LABEL_GROUP, LABEL_ROLE
from tests.unit.election.elector_model import NAME, Cluster, lease_record


def _two_with_a_leader() -> tuple[Cluster, int, int]:
    """Two replicas, run until one leads; returns them, the leader and the other."""
    c = Cluster(2)
    c.run_until(lambda: c.leader() is not None)
    old = c.leader()
    assert old is not None
    return c, old, 1 - old


def test_first_replica_creates_the_lease_labelled_with_its_group() -> None:
    c = Cluster(2)
    assert isinstance(c.roundtrip(0), Read)
    command = c.roundtrip(0)
    assert isinstance(command, Create)
    assert c.leader() == 0
    lease = c.store.get(NAME)
    assert lease["metadata"]["labels"] == {LABEL_GROUP: NAME, LABEL_ROLE: "leader"}
    record = record_from_lease(lease)
    assert (record.holder, record.duration_seconds, record.fencing_token) == ("r0", 10, 1)
    assert [type(e) for e in c.replicas[0].events] == [NewLeader, StartedLeading]


def test_create_race_loses_with_already_exists_and_waits() -> None:
    c = Cluster(2)
    c.roundtrip(0)
    c.roundtrip(1)  # both saw nothing
    assert isinstance(c.act(0), Create) and isinstance(c.act(1), Create)
    c.apply(0)
    c.apply(1)
    c.respond(0)
    c.respond(1)
    assert c.leader() == 0
    assert isinstance(c.roundtrip(1), Read), "AlreadyExists means read again, not a crash"
    c.replicas[1].machine.set_watching(True, c.mono(1))
    command = c.act(1)
    assert isinstance(command, Wait) and command.until == pytest.approx(c.mono(1) + 10)


def test_leader_renews_with_a_single_put_and_candidates_wait() -> None:
    c = Cluster(2)
    c.run_until(lambda: c.leader() is not None)
    leader = c.leader()
    other = 1 - leader
    token = lease_record(c).fencing_token
    for _ in range(20):
        c.advance(1.0)
        for i in (leader, other):
            c.deliver_watch(i, 100)
            c.roundtrip(i)
        assert c.leader() == leader
    assert lease_record(c).fencing_token == token
    assert all(kind == "update" for kind, _ in c.store.writes[1:])


def test_renew_conflict_rereads_once_and_retries_when_still_ours() -> None:
    c = Cluster(1)
    c.run_until(lambda: c.leader() == 0)
    # someone relabels the Lease: its resourceVersion changes, the record does not
    c.store.edit(NAME, lambda lease: lease["metadata"].setdefault("labels", {}).update(x="y"))
    c.advance(3.0)
    assert isinstance(c.roundtrip(0), Update)  # conflict
    command = c.roundtrip(0)
    assert isinstance(command, Read) and command.purpose is Purpose.REREAD
    command = c.roundtrip(0)
    assert isinstance(command, Update) and command.purpose is Purpose.RENEW
    assert c.leader() == 0
    assert c.store.get(NAME)["metadata"]["labels"]["x"] == "y", "unknown fields are kept"


def test_renew_conflict_when_taken_steps_down_without_waiting_for_the_deadline() -> None:
    c = Cluster(1)
    c.run_until(lambda: c.leader() == 0)
    c.store.edit(NAME, lambda lease: lease["spec"].update(holderIdentity="intruder"))
    c.advance(3.0)
    c.roundtrip(0)  # renew: conflict
    c.roundtrip(0)  # reread: taken
    assert c.leader() is None
    stopped = [e for e in c.replicas[0].events if isinstance(e, StoppedLeading)]
    assert "intruder" in stopped[-1].reason


def test_leader_steps_down_at_the_renew_deadline_when_renewals_fail() -> None:
    c = Cluster(1)
    c.run_until(lambda: c.leader() == 0)
    sent = c.replicas[0].machine.last_success_sent_at
    assert sent is not None
    while c.replicas[0].machine.believes_leading(c.mono(0)):
        command = c.act(0)
        if isinstance(command, Update):
            c.respond(0, lose=True)
        c.advance(0.1)
        c.check(0)
    assert c.mono(0) == pytest.approx(sent + 7.0, abs=0.11)
    assert isinstance(c.replicas[0].events[-1], StoppedLeading)
    assert c.replicas[0].events[-1].reason == "renew deadline passed"


def test_crash_takeover_happens_only_after_the_lease_duration_of_unchanged_observation() -> None:
    c = Cluster(2)
    c.run_until(lambda: c.leader() is not None)
    dead = c.leader()
    alive = 1 - dead
    c.deliver_watch(alive, 100)
    seen = c.replicas[alive].machine.observation
    assert seen is not None
    first_seen = seen.first_seen_at
    while c.replicas[alive].machine.believes_leading(c.mono(alive)) is False:
        c.advance(0.25)
        c.deliver_watch(alive, 100)
        c.roundtrip(alive)
        assert (
            c.replicas[alive].machine.believes_leading(c.mono(alive))
            is (c.mono(alive) >= first_seen + 10)
            or c.mono(alive) >= first_seen + 10
        )
    assert c.mono(alive) >= first_seen + 10
    assert lease_record(c).transitions == 1
    assert lease_record(c).fencing_token == 2


def test_graceful_stop_releases_and_a_watching_candidate_takes_over_at_once() -> None:
    c, old, new = _two_with_a_leader()
    c.stop(old)
    assert isinstance(c.replicas[old].events[-1], StoppedLeading)
    assert c.leader() is None
    command = c.roundtrip(old)  # one request: the write, on the body the term last wrote
    assert isinstance(command, Update) and command.purpose is Purpose.RELEASE
    assert isinstance(c.replicas[old].events[-1], Released)
    assert isinstance(c.act(old), Done)
    released = lease_record(c)
    assert (released.holder, released.duration_seconds) == ("", 1)
    c.deliver_watch(new, 100)
    command = c.roundtrip(new)
    assert isinstance(command, Update) and command.purpose is Purpose.TAKE
    assert c.leader() == new
    assert lease_record(c).fencing_token == released.fencing_token + 1


def test_a_read_answered_after_a_newer_watch_event_does_not_hide_a_release() -> None:
    """A read served before the release and answered after the watch delivered the release must
    not put the held record back as the latest observation: the candidate would wait a whole
    lease instead of taking over at once (CI saw a 2.01 s graceful takeover with a 2 s lease)."""
    c, old, new = _two_with_a_leader()
    candidate = c.replicas[new].machine
    c.deliver_watch(new, 100)
    candidate.set_watching(False, c.mono(new))  # its watch broke: it polls
    command = c.act(new)
    for _ in range(100):  # until the candidate, polling, reads (25 s of its clock at most)
        if isinstance(command, Read):
            break
        c.advance(0.25)
        c.roundtrip(old)  # the leader renews when due
        c.deliver_watch(new, 100)
        command = c.act(new)
    assert isinstance(command, Read), f"the polling candidate never read: {command!r}"
    assert command.purpose is Purpose.OBSERVE
    c.apply(new)  # served now, while old still holds the Lease ...
    candidate.set_watching(True, c.mono(new))  # ... and meanwhile its watch is back
    c.stop(old)
    c.roundtrip(old)  # the release: one write
    released = lease_record(c)
    assert released.holder == ""
    c.deliver_watch(new, 100)  # the watch delivers the release ...
    c.respond(new)  # ... and then the read's answer (old holding) arrives
    for _ in range(3):  # no time passes: a read or two, then the take
        command = c.roundtrip(new)
        if isinstance(command, Update):
            break
    assert isinstance(command, Update) and command.purpose is Purpose.TAKE, command
    assert c.leader() == new
    assert lease_record(c).fencing_token == released.fencing_token + 1


def test_a_read_answered_after_the_create_it_missed_does_not_make_the_lease_look_deleted() -> None:
    """The case CI hit: a candidate's first read (NotFound) is served before the leader's
    create and heard after its watch delivered the create. Taken as the latest, the Lease
    looked deleted by hand, and its release was waited out for a whole lease."""
    c = Cluster(2)
    candidate = c.replicas[1].machine
    assert isinstance(c.act(1), Read)
    c.apply(1)  # served now: no Lease yet
    assert isinstance(c.roundtrip(0), Read) and isinstance(c.roundtrip(0), Create)
    assert c.leader() == 0
    candidate.set_watching(True, c.mono(1))
    c.deliver_watch(1, 100)  # ADDED, held by r0 ...
    c.respond(1)  # ... then the NotFound
    c.stop(0)
    c.roundtrip(0)  # the release: one write
    c.deliver_watch(1, 100)
    for _ in range(3):  # no time passes
        command = c.roundtrip(1)
        if isinstance(command, Update):
            break
    assert isinstance(command, Update) and command.purpose is Purpose.TAKE, command
    assert c.leader() == 1


def test_watch_showing_another_grant_makes_the_leader_step_down_at_once() -> None:
    c = Cluster(1)
    c.run_until(lambda: c.leader() == 0)
    token = lease_record(c).fencing_token

    def steal(lease: dict) -> None:  # type: ignore[type-arg]
        lease["spec"]["holderIdentity"] = "go-controller"

    c.store.edit(NAME, steal)
    c.deliver_watch(0, 100)
    assert c.leader() is None
    assert lease_record(c).fencing_token == token


def test_late_watch_events_from_before_the_grant_do_not_unseat_the_leader() -> None:
    c, old, new = _two_with_a_leader()
    c.stop(old)
    c.roundtrip(old)
    c.roundtrip(old)
    cursor = c.replicas[new].cursor
    c.deliver_watch(new, 100)
    c.roundtrip(new)
    assert c.leader() == new
    c.replicas[new].cursor = cursor  # replay everything, late
    c.deliver_watch(new, 100)
    assert c.leader() == new


def test_candidates_poll_only_without_a_watch() -> None:
    c = Cluster(2)
    c.run_until(lambda: c.leader() is not None)
    other = 1 - c.leader()  # type: ignore[operator]
    machine = c.replicas[other].machine
    machine.set_watching(True, c.mono(other))
    command = c.act(other)
    assert isinstance(command, Wait)
    assert command.until == pytest.approx(machine.observation.first_seen_at + 10)  # type: ignore[union-attr]
    machine.set_watching(False, c.mono(other))
    command = c.act(other)
    assert isinstance(command, Wait) and command.until is not None
    assert command.until <= c.mono(other) + 2 * 1.5 + 1e-9

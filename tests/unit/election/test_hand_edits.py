"""Hole 1 of issue 15: a hand edit of the held Lease must never make two leaders.

The holder ends its belief the moment it sees an edit of its record it did not write; candidates
never honour a shortened duration at once and treat a Lease without spec or holder (that is not a
release) as held by someone unknown.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest

from k8slease.election.commands import Read, StoppedLeading, Update, Wait
from k8slease.lease.view import LeaseView
from tests.unit.election.elector_model import NAME, Cluster

Edit = Callable[[dict[str, Any]], None]  # a hand edit of the Lease's body


def _lead(c: Cluster) -> tuple[int, int]:
    c.run_until(lambda: c.leader() is not None)
    leader = c.leader()
    assert leader is not None
    for i in range(len(c.replicas)):
        c.deliver_watch(i, 1000)
    return leader, 1 - leader


def _lead_then_edit(edit: Edit) -> tuple[Cluster, int, int]:
    """Two replicas, one leading (:func:`_lead`), then its Lease edited by hand with ``edit``,
    seen by neither yet; returns the cluster, the leader and the other."""
    c = Cluster(2)
    leader, other = _lead(c)
    c.store.edit(NAME, edit)
    return c, leader, other


def _shorten(lease: dict[str, Any]) -> None:
    lease["spec"]["leaseDurationSeconds"] = 1


def _drop_spec(lease: dict[str, Any]) -> None:
    lease.pop("spec")


def _drop_holder(lease: dict[str, Any]) -> None:
    lease["spec"].pop("holderIdentity")


EDITS: list[Edit] = [_shorten, _drop_spec, _drop_holder]
EACH_EDIT = pytest.mark.parametrize("edit", EDITS, ids=lambda e: e.__name__)


@EACH_EDIT
def test_the_holder_steps_down_the_moment_it_sees_an_edit_it_did_not_make(edit: Edit) -> None:
    c, leader, _ = _lead_then_edit(edit)
    c.deliver_watch(leader, 1000)
    assert not c.replicas[leader].machine.believes_leading(c.mono(leader))
    stopped = [e for e in c.replicas[leader].events if isinstance(e, StoppedLeading)]
    assert stopped and "edit" in stopped[-1].reason


def test_the_holder_keeps_leading_through_late_events_of_its_own_renewals() -> None:
    c = Cluster(1)
    c.run_until(lambda: c.leader() == 0)
    c.deliver_watch(0, 1000)
    backlog = len(c.store.history)
    for _ in range(3):
        c.advance(3.0)
        assert isinstance(c.roundtrip(0), Update)
    assert c.replicas[0].cursor < backlog + 3
    c.deliver_watch(0, 1000)  # three renewals, delivered late, after all were answered
    assert c.leader() == 0


def test_the_holder_keeps_leading_when_its_own_renewal_is_seen_before_the_answer() -> None:
    c = Cluster(1)
    c.run_until(lambda: c.leader() == 0)
    c.deliver_watch(0, 1000)
    c.advance(3.0)
    assert isinstance(c.act(0), Update)
    c.apply(0)
    c.deliver_watch(0, 1000)  # the watch is faster than the PUT's answer
    c.respond(0)
    assert c.leader() == 0


def test_a_renew_conflict_on_an_edited_record_steps_down_instead_of_renewing() -> None:
    c = Cluster(1)
    c.run_until(lambda: c.leader() == 0)
    c.store.edit(NAME, _shorten)
    c.advance(3.0)
    assert isinstance(c.roundtrip(0), Update)  # conflict
    command = c.roundtrip(0)
    assert isinstance(command, Read)
    assert c.leader() is None


@EACH_EDIT
def test_a_candidate_waits_its_configured_duration_after_a_hand_edit(edit: Edit) -> None:
    c, leader, other = _lead_then_edit(edit)
    c.deliver_watch(other, 1000)
    seen = c.replicas[other].machine.observation
    assert seen is not None
    edited_at = seen.first_seen_at
    # the holder's watch is broken: it never hears of the edit and the renewals fail
    while c.mono(other) < edited_at + 10 - 0.25:
        c.advance(0.25)
        c.check(leader)
        command = c.act(other)
        if command is not None:
            c.apply(other)
            c.respond(other)
        assert not c.replicas[other].machine.believes_leading(c.mono(other)), (
            f"took over {c.mono(other) - edited_at:.2f}s after the edit, before the 10s lease"
        )
        c.leader()


def test_a_real_release_is_still_taken_at_once() -> None:
    c = Cluster(2)
    leader, other = _lead(c)
    c.stop(leader)
    c.roundtrip(leader)  # the release: one write
    c.deliver_watch(other, 1000)
    assert isinstance(c.roundtrip(other), Update)
    assert c.leader() == other


def test_two_replicas_never_both_lead_when_hand_edits_race_renewals() -> None:
    for edit in EDITS:
        c = Cluster(3)
        leader, _ = _lead(c)
        for round_ in range(40):
            if round_ % 7 == 0:
                with contextlib.suppress(KeyError):  # the spec was dropped by the last edit
                    c.store.edit(NAME, edit)
            c.advance(0.5)
            for i in range(3):
                if i != leader or round_ % 3 == 0:
                    c.deliver_watch(i, 1000)
                c.check(i)
                command = c.act(i)
                if command is not None:
                    c.apply(i)
                    c.respond(i)
                c.leader()  # asserts at most one believer


def _assert_release_by_hand_is_waited_out(c: Cluster, other: int, *edits: Any) -> None:
    """``edits`` by hand leave a release record; ``other``, seeing it, waits the full duration
    (10 s) from when it first saw it rather than trusting it as a release."""
    for edit in edits:
        c.store.edit(NAME, edit)
    c.deliver_watch(other, 1000)
    seen = c.replicas[other].machine.observation
    assert seen is not None and seen.record is not None and not seen.record.held
    command = c.act(other)
    if isinstance(command, Read):  # an overtaken answer set aside is read again: same record
        c.apply(other)
        c.respond(other)
        command = c.act(other)
    assert isinstance(command, Wait) and command.until == pytest.approx(seen.first_seen_at + 10)


def test_hand_edits_that_compose_into_a_release_are_not_trusted_as_one() -> None:
    """Found by the simulation (seed 9): shortening the duration to 1 and then removing the
    holder leaves exactly a release record, but its renewTime is the holder's last one. A real
    release always moves renewTime forward; one that does not is held by someone unknown."""
    c = Cluster(2)
    _, other = _lead(c)
    _assert_release_by_hand_is_waited_out(c, other, _shorten, _drop_holder)


def test_a_lease_deleted_after_a_release_is_waited_out_before_it_is_created() -> None:
    """The election twin of simulation seed 10: a Lease seen released and then absent may have
    been taken (unseen) before it was deleted; its holder may still believe. Wait the duration."""
    c = Cluster(2)
    leader, other = _lead(c)
    c.stop(leader)
    c.roundtrip(leader)
    c.roundtrip(leader)  # released
    c.deliver_watch(other, 1000)
    c.store.delete(NAME)
    c.deliver_watch(other, 1000)
    command = c.act(other)
    assert isinstance(command, Wait)


def test_a_stale_read_answer_does_not_make_hand_edits_look_like_a_release() -> None:
    """Found by the simulation (seed 7265 with late applies, two leaders): the candidate's read
    of renewal N-1 was answered after its watch had delivered renewal N. Then a hand edit
    removed the holder and another shortened the duration, leaving renewal N's renewTime: later
    than N-1's, the last held record the candidate had *seen last*, so it took the Lease 3.4 s
    after the first edit while the partitioned holder still believed. A release must renew
    after every held record seen, not after whichever arrived last. (The answer, overtaken by
    the watch, is now also set aside and read again.)"""
    c = Cluster(2)
    leader, other = _lead(c)
    c.replicas[other].machine.set_watching(False, c.mono(other))  # so that it polls
    c.advance(3.0)
    assert isinstance(c.roundtrip(leader), Update)  # renewal N-1
    assert isinstance(c.act(other), Read)
    c.apply(other)  # the read is served here, before renewal N
    c.advance(3.0)
    assert isinstance(c.roundtrip(leader), Update)  # renewal N
    c.deliver_watch(other, 1000)
    c.respond(other)  # ... and answered after the watch delivered renewal N
    c.replicas[other].machine.set_watching(True, c.mono(other))
    _assert_release_by_hand_is_waited_out(c, other, _drop_holder, _shorten)


def test_a_lease_naming_this_replica_that_reappears_after_a_deletion_is_waited_out() -> None:
    """Found by the simulation with late applies on the leader Lease (soak seed 8041): r0's
    create, judged on an absent Lease and unanswered, was applied after r1 had created and
    renewed the Lease and a hand deletion had removed it. r0 had seen r1's grant and the
    deletion (r1, paused, still believed), then a Lease naming itself that it did not remember
    writing, and took it at once, as after a restart under the same identity: two leaders. A
    deleted held Lease is waited out (rule 4) whoever the next Lease names."""
    c = Cluster(2)
    _, other = _lead(c)
    body = c.store.get(NAME)
    c.store.delete(NAME)
    c.deliver_watch(other, 1000)  # r1's grant and its deletion, seen
    deleted_seen = c.mono(other)
    body["spec"]["holderIdentity"] = f"r{other}"  # its own unanswered create, applied late
    body["metadata"].pop("resourceVersion", None)
    body["metadata"].pop("uid", None)
    c.store.create(body)
    c.advance(1.0)
    c.deliver_watch(other, 1000)
    command = c.act(other)
    assert isinstance(command, Wait), f"took a Lease naming itself at once: {command}"
    assert command.until == pytest.approx(deleted_seen + 10)


def test_a_lease_naming_this_replica_after_its_own_lease_was_deleted_is_taken_at_once() -> None:
    """The wait after a deletion is for the deleted Lease's holder; when that was this replica
    (it stepped down on seeing the deletion), a Lease naming it (its own late create, or a
    stale read) is taken at once through a conditional write, as before."""
    c = Cluster(2)
    leader, _ = _lead(c)
    body = c.store.get(NAME)
    c.store.delete(NAME)
    c.deliver_watch(leader, 1000)
    assert c.leader() is None, "stepped down on seeing the deletion"
    body["metadata"].pop("resourceVersion", None)
    body["metadata"].pop("uid", None)
    c.store.create(body)
    c.advance(1.0)
    c.deliver_watch(leader, 1000)
    assert isinstance(c.act(leader), Update)


def _candidate_misses_a_renewal(c: Cluster, leader: int, other: int) -> None:
    """``other``'s watch breaks (a partition) while ``leader`` renews: it misses that renewal."""
    c.replicas[other].machine.set_watching(False, c.mono(other))
    c.advance(3.0)
    assert isinstance(c.roundtrip(leader), Update)  # a renewal the candidate misses
    c.deliver_watch(leader, 1000)


def _candidate_heals(c: Cluster, other: int) -> None:
    """``other``'s watch is back; its first event is the Lease as it is now (a relist)."""
    machine = c.replicas[other].machine
    machine.set_watching(True, c.mono(other))
    machine.on_watch(LeaseView.decode(c.store.get(NAME)), deleted=False, now=c.mono(other))
    c.replicas[other].cursor = len(c.store.history)


def test_hand_edits_of_a_renewal_the_candidate_missed_are_not_a_release() -> None:
    """Simulation seed 8143: the candidate, cut off, missed the holder's last renewal; hand
    edits then shortened the duration to 1 and dropped the holder, leaving that renewal's
    ``renewTime``, later than any the candidate saw. Taken for a release, it was taken at once
    while the holder still believed (two leaders for 0.65 s). The edits keep the term's
    ``acquireTime``, which a release sets to its ``renewTime``: waited out."""
    c = Cluster(2)
    leader, other = _lead(c)
    _candidate_misses_a_renewal(c, leader, other)
    c.store.edit(NAME, _shorten)
    c.store.edit(NAME, _drop_holder)  # the holder has not seen the edits yet
    _candidate_heals(c, other)

    command = c.roundtrip(other)

    assert isinstance(command, Wait), f"taken at once: {command!r}"
    assert c.believers() == [leader]


def test_a_release_after_a_missed_renewal_is_still_taken_at_once() -> None:
    """The same missed renewal, then a real release: the holder's release sets ``acquireTime``
    and ``renewTime`` to when it gave the Lease up, so the candidate takes it at once."""
    c = Cluster(2)
    leader, other = _lead(c)
    _candidate_misses_a_renewal(c, leader, other)
    c.stop(leader)
    c.roundtrip(leader)  # the release: one write
    _candidate_heals(c, other)

    command = c.roundtrip(other)

    assert isinstance(command, Update), f"not taken at once: {command!r}"
    assert c.leader() == other

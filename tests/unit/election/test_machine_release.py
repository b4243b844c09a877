"""The election state machine's release on stop, step by step: retried when an answer is lost,
given up before the term's lease runs out, read again after a 409, skipped when someone else
holds the Lease or when release is off; and abdication (release, then step aside)."""

from __future__ import annotations

import pytest

from k8slease.election.commands import Done, Purpose, Read, Released, Update, Wait
from tests.unit.election.elector_model import NAME, Cluster, alternates, lease_record


def release_steps(c: Cluster, *, lose: list[bool]) -> list[str]:
    """Drive replica 0's release, losing the answers ``lose`` says (in order); the steps taken."""
    steps: list[str] = []
    while True:
        command = c.act(0)
        if isinstance(command, Done):
            return steps
        if isinstance(command, Wait):
            steps.append("wait")
            c.advance(command.until - c.mono(0))
            continue
        assert isinstance(command, Read | Update)
        steps.append(command.purpose.value)
        if lose and lose.pop(0):
            c.respond(0, lose=True)  # the answer broke (a timeout, a connection cut mid-answer)
        else:
            c.apply(0)
            c.respond(0)


@pytest.mark.parametrize(
    "lose",
    [[True], [True, True], [True, False, True], [True, True, False, True]],
    ids=["write-lost", "write-then-read-lost", "write-then-rewrite-lost", "three-lost"],
)
def test_a_failed_release_attempt_is_tried_again_within_the_term_s_lease(
    lose: list[bool],
) -> None:
    c = Cluster(1)
    c.run_until(lambda: c.leader() == 0)
    c.stop(0)
    steps = release_steps(c, lose=list(lose))
    assert lease_record(c).holder == "", f"released after {steps}"
    assert isinstance(c.replicas[0].events[-1], Released)
    assert steps.count("wait") == sum(lose), "each failed attempt waits renew_retry_interval"


def test_a_release_gives_up_when_the_term_s_lease_would_run_out() -> None:
    c = Cluster(1)
    c.run_until(lambda: c.leader() == 0)
    sent = c.replicas[0].machine.last_success_sent_at
    assert sent is not None
    c.stop(0)
    steps = release_steps(c, lose=[True] * 1000)
    assert lease_record(c).holder == "r0", "nothing could be written"
    timing = c.replicas[0].machine.timing
    # past the renew deadline still (a late release helps candidates that would wait the lease
    # out), never past the lease: then they take over anyway
    assert sent + timing.renew_deadline < c.mono(0) <= sent + timing.lease_duration
    assert steps.count("release-read") > 1, "it was tried more than once"
    assert not any(isinstance(e, Released) for e in c.replicas[0].events)


def test_a_release_that_meets_a_409_reads_again_at_once_and_writes_on_the_fresh_lease() -> None:
    c = Cluster(1)
    c.run_until(lambda: c.leader() == 0)
    # someone relabels the Lease after the last renew: the release's write on the body the
    # term last wrote meets a 409
    c.store.edit(NAME, lambda lease: lease["metadata"].setdefault("labels", {}).update(x="y"))
    c.stop(0)
    command = c.roundtrip(0)
    assert isinstance(command, Update) and command.purpose is Purpose.RELEASE
    assert lease_record(c).holder == "r0"
    command = c.roundtrip(0)
    assert isinstance(command, Read) and command.purpose is Purpose.RELEASE_READ, "no wait"
    command = c.roundtrip(0)
    assert isinstance(command, Update) and command.purpose is Purpose.RELEASE
    assert lease_record(c).holder == ""
    assert c.store.get(NAME)["metadata"]["labels"]["x"] == "y", "the edit is kept"


def test_a_release_after_a_conflicted_renew_reads_first() -> None:
    """A renew that met a 409 leaves the term's last body in doubt (the machine re-reads):
    stopped then, the release reads before it writes."""
    c = Cluster(1)
    c.run_until(lambda: c.leader() == 0)
    c.store.edit(NAME, lambda lease: lease["metadata"].setdefault("labels", {}).update(x="y"))
    command = c.act(0)
    for _ in range(100):  # until the renew falls due (no watch event delivered)
        if not isinstance(command, Wait):
            break
        c.advance(command.until - c.mono(0))
        command = c.act(0)
    assert isinstance(command, Update) and command.purpose is Purpose.RENEW, command
    c.apply(0)
    c.respond(0)  # 409: the edit came first
    lead = c.replicas[0].machine._lead
    assert lead is not None and lead.needs_reread
    c.stop(0)
    command = c.roundtrip(0)
    assert isinstance(command, Read) and command.purpose is Purpose.RELEASE_READ
    command = c.roundtrip(0)
    assert isinstance(command, Update) and command.purpose is Purpose.RELEASE
    assert lease_record(c).holder == ""


def test_release_is_skipped_when_a_fresh_read_shows_someone_else() -> None:
    c = Cluster(1)
    c.run_until(lambda: c.leader() == 0)
    c.stop(0)
    c.store.edit(NAME, lambda lease: lease["spec"].update(holderIdentity="other"))
    command = c.roundtrip(0)  # the write on the term's last body: 409
    assert isinstance(command, Update) and command.purpose is Purpose.RELEASE
    command = c.roundtrip(0)  # the fresh read: not ours
    assert isinstance(command, Read) and command.purpose is Purpose.RELEASE_READ
    assert isinstance(c.act(0), Done)
    assert lease_record(c).holder == "other"


def test_stop_without_release_leaves_the_lease_to_expire() -> None:
    c = Cluster(1)
    c.replicas[0].machine._options.release_on_stop = False
    c.run_until(lambda: c.leader() == 0)
    c.stop(0)
    assert isinstance(c.act(0), Done)
    assert lease_record(c).holder == "r0"


def test_abdication_releases_and_steps_aside_before_competing_again() -> None:
    c = Cluster(1)
    c.run_until(lambda: c.leader() == 0)
    c.abdicate(0)
    assert c.leader() is None
    c.roundtrip(0)
    c.roundtrip(0)
    assert lease_record(c).holder == ""
    command = c.act(0)
    assert isinstance(command, Wait) and command.until is not None and command.until > c.mono(0)
    c.run_until(lambda: c.leader() == 0, limit=10)
    assert alternates(c.replicas[0].events)

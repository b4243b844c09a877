"""The election state machine against faults, step by step: malformed and nonsense Leases, a
held Lease deleted, a renew that finds none, an answer after the deadline, API errors backed off
with jitter, and outcomes that match no outstanding command."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from k8slease.election.commands import Create, StartedLeading, Wait
from k8slease.errors import Conflict, Forbidden, NotFound, Unavailable
from k8slease.lease.record import record_from_lease
from k8slease.names import ANN_FENCING_TOKEN
from tests.unit.election.elector_model import NAME, Cluster, lease_record


def test_malformed_lease_is_waited_out_for_our_duration_and_repaired() -> None:
    c = Cluster(1)
    c.store.create(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": NAME, "labels": {"mine": "yes"}},
            "spec": {"holderIdentity": "ghost", "leaseDurationSeconds": -5, "strategy": "x"},
        }
    )
    c.roundtrip(0)
    c.replicas[0].machine.set_watching(True, c.mono(0))
    first_seen = c.mono(0)
    command = c.act(0)
    assert isinstance(command, Wait) and command.until == pytest.approx(first_seen + 10)
    c.run_until(lambda: c.leader() == 0, limit=30)
    assert c.mono(0) >= first_seen + 10
    lease = c.store.get(NAME)
    assert lease["spec"]["leaseDurationSeconds"] == 10
    assert lease["spec"]["strategy"] == "x"
    assert lease["metadata"]["labels"] == {"mine": "yes"}
    assert not record_from_lease(lease).malformed


@pytest.mark.parametrize(
    "spec",
    [
        None,
        "nonsense",
        {"holderIdentity": 7, "leaseDurationSeconds": 10},
        {"holderIdentity": "a", "leaseDurationSeconds": 0},
        {"holderIdentity": "a", "leaseDurationSeconds": 10, "renewTime": "later"},
        {"holderIdentity": "a"},
    ],
)
def test_nonsense_leases_never_crash_and_are_taken_after_waiting(spec: object) -> None:
    c = Cluster(2)
    lease: dict = {"metadata": {"name": NAME, "annotations": {ANN_FENCING_TOKEN: "zz"}}}  # type: ignore[type-arg]
    if spec is not None:
        lease["spec"] = spec
    c.store.create(lease)
    c.run_until(lambda: c.leader() is not None, limit=30)
    holder = lease_record(c)
    assert not holder.malformed and holder.holder in ("r0", "r1")


def test_deleted_held_lease_is_recreated_only_after_the_old_holder_would_have_stopped() -> None:
    c = Cluster(2)
    c.run_until(lambda: c.leader() is not None)
    token = lease_record(c).fencing_token
    c.store.delete(NAME)
    deleted_at = c.t
    c.deliver_watch(0, 100)
    c.deliver_watch(1, 100)
    assert c.leader() is None, "the leader sees the deletion and steps down"
    c.run_until(lambda: c.leader() is not None, limit=30)
    assert c.t - deleted_at >= 10 - 0.25
    assert lease_record(c).fencing_token == token + 1


def test_renew_not_found_steps_down() -> None:
    c = Cluster(1)
    c.run_until(lambda: c.leader() == 0)
    c.store.delete(NAME)
    c.advance(3.0)
    c.roundtrip(0)
    assert c.leader() is None


def test_answer_arriving_after_the_deadline_does_not_start_leadership() -> None:
    c = Cluster(1)
    c.roundtrip(0)
    assert isinstance(c.act(0), Create)
    c.apply(0)
    c.advance(7.0)
    c.respond(0)
    assert c.leader() is None
    assert not any(isinstance(e, StartedLeading) for e in c.replicas[0].events)
    c.run_until(lambda: c.leader() == 0, limit=5)
    assert lease_record(c).fencing_token == 2


def test_errors_on_take_back_off_with_jitter() -> None:
    c = Cluster(1)
    c.roundtrip(0)
    assert isinstance(c.act(0), Create)
    c.replicas[0].machine.write_failed(Unavailable("503"), sent_at=c.mono(0), now=c.mono(0))
    c.replicas[0].pending = None
    command = c.act(0)
    assert isinstance(command, Wait) and command.until is not None
    assert 2.0 <= command.until - c.mono(0) <= 3.0


@pytest.mark.parametrize(
    "error", [NotFound("namespaces missing not found"), Forbidden("forbidden", status=403)]
)
def test_persistent_errors_on_create_back_off_like_any_other(error: Exception) -> None:
    """A 404 on create is a missing namespace, not a race: the next try waits retry_interval."""
    c = Cluster(1)
    c.roundtrip(0)
    assert isinstance(c.act(0), Create)
    machine = c.replicas[0].machine
    machine.write_failed(error, sent_at=c.mono(0), now=c.mono(0))  # type: ignore[arg-type]
    c.replicas[0].pending = None
    command = c.act(0)
    assert isinstance(command, Wait) and command.until is not None
    assert 2.0 <= command.until - c.mono(0) <= 3.0


def test_outcomes_must_match_the_outstanding_command() -> None:
    c = Cluster(1)
    machine = c.replicas[0].machine
    with pytest.raises(RuntimeError):
        machine.read_done(None, now=0.0)
    c.act(0)
    with pytest.raises(RuntimeError):
        machine.next_command(0.0, datetime(2026, 1, 1, tzinfo=UTC))
    with pytest.raises(RuntimeError):
        machine.write_failed(Conflict("x"), sent_at=0.0, now=0.0)

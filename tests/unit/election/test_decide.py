"""Pure leader and candidate decisions: renew, wait or step down; read, create, take or wait."""

from __future__ import annotations

from datetime import UTC, datetime

from k8slease.election.decide import CandidateAction, LeaderAction, decide_candidate, decide_leader
from k8slease.lease.observe import Observation
from k8slease.lease.record import LeaseRecord, new_lease
from k8slease.lease.view import LeaseView

T0 = datetime(2026, 1, 1, tzinfo=UTC)
HELD = LeaseRecord(
    holder="other", duration_seconds=15, renew_time=T0, transitions=2, fencing_token=7
)


def seen(record: LeaseRecord | None, at: float) -> Observation:
    """The Lease seen carrying ``record`` (``None``: absent) since monotonic ``at``."""
    view = None if record is None else LeaseView.decode(new_lease("l", "ns", record))
    return Observation(view, first_seen_at=at)


# -- leader and candidate steps --------------------------------------------------------------


def test_leader_renews_when_due_and_steps_down_at_the_deadline_first() -> None:
    kw = {"last_success_sent_at": 100.0, "next_attempt_at": 120.0, "renew_deadline": 40.0}
    assert decide_leader(now=110.0, **kw).action is LeaderAction.WAIT
    assert decide_leader(now=110.0, **kw).until == 120.0
    assert decide_leader(now=120.0, **kw).action is LeaderAction.RENEW
    assert decide_leader(now=140.0, **kw).action is LeaderAction.STEP_DOWN
    late = decide_leader(
        last_success_sent_at=100.0, next_attempt_at=150.0, renew_deadline=40.0, now=130.0
    )
    assert late.until == 140.0, "a wait never goes past the deadline"


def test_candidate_steps() -> None:
    kw = {"identity": "me", "fallback_duration": 10.0}
    assert decide_candidate(None, now=0.0, **kw).action is CandidateAction.READ
    assert decide_candidate(seen(None, 0.0), now=0.0, **kw).action is CandidateAction.CREATE
    waiting = decide_candidate(seen(HELD, 0.0), now=1.0, **kw)
    assert (waiting.action, waiting.until) == (CandidateAction.WAIT, 15.0)
    polling = decide_candidate(seen(HELD, 0.0), now=1.0, poll_at=5.0, **kw)
    assert polling.until == 5.0
    due = decide_candidate(seen(HELD, 0.0), now=6.0, poll_at=5.0, **kw)
    assert due.action is CandidateAction.READ
    assert decide_candidate(seen(HELD, 0.0), now=15.0, **kw).action is CandidateAction.TAKE


def test_a_candidate_waits_out_a_lease_deleted_while_held_before_creating_it() -> None:
    """The observation's memory of a deletion travels into the decision: a Lease seen held,
    then absent, is created only once the old holder's duration has passed."""
    kw = {"identity": "me", "fallback_duration": 10.0}
    absent = Observation(None, first_seen_at=5.0, held_before_absence=HELD)
    waiting = decide_candidate(absent, now=6.0, **kw)
    assert (waiting.action, waiting.until) == (CandidateAction.WAIT, 20.0)
    assert decide_candidate(absent, now=20.0, **kw).action is CandidateAction.CREATE


# -- observations ----------------------------------------------------------------------------

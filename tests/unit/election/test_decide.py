"""Pure leader and candidate decisions: renew, wait or step down; read, create, take or wait."""

from __future__ import annotations

from datetime import UTC, datetime

from k8slease.election.decide import CandidateAction, LeaderAction, decide_candidate, decide_leader
from k8slease.lease.record import LeaseRecord

T0 = datetime(2026, 1, 1, tzinfo=UTC)
HELD = LeaseRecord(
    holder="other", duration_seconds=15, renew_time=T0, transitions=2, fencing_token=7
)


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
    assert decide_candidate(
        record=None, exists=False, first_seen_at=None, now=0.0, **kw
    ).action is (CandidateAction.READ)
    assert decide_candidate(record=None, exists=False, first_seen_at=0.0, now=0.0, **kw).action is (
        CandidateAction.CREATE
    )
    waiting = decide_candidate(record=HELD, exists=True, first_seen_at=0.0, now=1.0, **kw)
    assert (waiting.action, waiting.until) == (CandidateAction.WAIT, 15.0)
    polling = decide_candidate(
        record=HELD, exists=True, first_seen_at=0.0, now=1.0, poll_at=5.0, **kw
    )
    assert polling.until == 5.0
    due = decide_candidate(record=HELD, exists=True, first_seen_at=0.0, now=6.0, poll_at=5.0, **kw)
    assert due.action is CandidateAction.READ
    assert decide_candidate(record=HELD, exists=True, first_seen_at=0.0, now=15.0, **kw).action is (
        CandidateAction.TAKE
    )


# -- observations ----------------------------------------------------------------------------

"""The pure rules of k8slease.jobs.unsettled (issue 26), on a fake clock's times."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from k8slease.jobs.unsettled import (
    Decision,
    PendingClaim,
    Settled,
    adopt_or_release,
    settle_claim,
    silent_holder,
)
from k8slease.lease.jobrecord import JobState, Outcome, RunRecord, lease_with_job_state
from k8slease.lease.keptruns import merge_run
from k8slease.lease.record import LeaseRecord, new_lease
from k8slease.lease.view import LeaseView
from tests.support.factories import make_run

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _view(holder: str, token: int, claimed: datetime | None, rv: str) -> LeaseView:
    record = LeaseRecord(
        holder=holder,
        duration_seconds=600,
        acquire_time=T0,
        renew_time=T0,
        transitions=token,
        fencing_token=token,
    )
    lease = new_lease("g.job", "default", record)
    lease["metadata"].update(resourceVersion=rv, uid="u1")
    return LeaseView.decode(lease_with_job_state(lease, JobState(claimed_tick=claimed)))


def _pending(rv: str = "7", token: int = 4) -> PendingClaim:
    return PendingClaim(
        tick=T0, fencing_token=token, resource_version=rv, sent_mono=100.0, sent_wall=T0
    )


def _run(tick: datetime, outcome: Outcome = "succeeded", token: int = 4) -> RunRecord:
    return make_run(tick, outcome, token=token)


def test_a_claim_is_applied_when_the_lease_names_its_holder_token_and_tick() -> None:
    assert settle_claim(_pending(), _view("r0", 4, T0, "8"), me="r0") is Settled.APPLIED


def test_a_claim_is_open_while_the_lease_is_at_the_version_it_was_conditioned_on() -> None:
    assert settle_claim(_pending(), _view("", 3, None, "7"), me="r0") is Settled.OPEN


def test_a_claim_is_refused_once_the_lease_moved_on_without_it() -> None:
    assert settle_claim(_pending(), _view("r1", 4, T0, "8"), me="r0") is Settled.REFUSED
    assert settle_claim(_pending(), None, me="r0") is Settled.REFUSED  # replace of a gone Lease


def test_a_create_is_open_while_the_lease_is_absent_and_refused_when_another_exists() -> None:
    create = _pending(rv="")
    assert settle_claim(create, None, me="r0") is Settled.OPEN
    assert settle_claim(create, _view("r1", 1, T0, "3"), me="r0") is Settled.REFUSED
    assert settle_claim(create, _view("r0", 4, T0, "3"), me="r0") is Settled.APPLIED


def test_an_applied_claim_runs_within_grace_and_budget_else_it_is_released() -> None:
    pending = _pending()
    at = {"grace": 300.0, "lock_at_most_for": 600.0}
    run = adopt_or_release(pending, now=T0 + timedelta(seconds=15), mono=115.0, **at)
    assert run.decision is Decision.RUN
    late = adopt_or_release(pending, now=T0 + timedelta(seconds=301), mono=401.0, **at)
    assert late.decision is Decision.RELEASE and "grace" in late.why
    spent = adopt_or_release(
        pending, now=T0 + timedelta(seconds=21), mono=121.0, grace=300, lock_at_most_for=30
    )
    assert spent.decision is Decision.RELEASE and "budget" in spent.why


def test_a_kept_record_is_merged_as_the_newest_run() -> None:
    before = JobState(claimed_tick=T0, counts={"succeeded": 3})
    merged = merge_run(before, _run(T0), lease_token=4)
    assert merged is not None
    assert merged.last_run == _run(T0) and merged.count("succeeded") == 4
    assert merged.completed_tick == T0


def test_a_kept_record_already_on_the_lease_is_not_written_again() -> None:
    state = JobState(claimed_tick=T0, last_run=_run(T0), counts={"succeeded": 1})
    assert merge_run(state, _run(T0), lease_token=4) is None


def test_a_takeover_that_recorded_the_run_lost_is_corrected() -> None:
    state = JobState(claimed_tick=T0, last_run=_run(T0, "lost"), counts={"lost": 1})
    merged = merge_run(state, _run(T0), lease_token=5)
    assert merged is not None
    assert merged.count("lost") == 0 and merged.count("succeeded") == 1
    assert merged.last_run is not None and merged.last_run.outcome == "succeeded"


def test_after_a_takeover_a_kept_run_turns_the_takeovers_lost_count_into_its_outcome() -> None:
    """The lock was granted again (token 5) and the taker has since recorded a newer run: its
    takeover counted this run lost; the kept record corrects the count and is the write's last
    run (the chaos partition scenario: the operator's recent runs showed the tick lost for
    good, since the correction never reached a watcher), the completed tick stays."""
    newer = _run(T0 + timedelta(seconds=10), token=5)
    state = JobState(last_run=newer, completed_tick=newer.tick, counts={"succeeded": 1, "lost": 1})
    merged = merge_run(state, _run(T0), lease_token=5)
    assert merged is not None
    assert merged.last_run == _run(T0)
    assert merged.completed_tick == newer.tick
    assert merged.count("succeeded") == 2 and merged.count("lost") == 0
    # the next release records the newest run again (lockrules.release)


def test_after_a_takeover_a_kept_lost_run_is_not_counted_twice() -> None:
    """Chaos suite (stalled holder): the holder's own record says lost, and the takeover
    counted that tick lost already; carrying it must add nothing (counted twice before)."""
    newer = _run(T0 + timedelta(seconds=10), token=5)
    state = JobState(last_run=newer, counts={"succeeded": 1, "lost": 1})
    assert merge_run(state, _run(T0, "lost"), lease_token=5) is None


def test_a_holder_is_silent_when_its_claim_is_unfinished_and_unrenewed_past_a_keepalive() -> None:
    view = _view("r0", 4, T0, "8")

    def silent(state: JobState, unchanged_for: float) -> bool:
        return silent_holder(
            view.record,
            state,
            me="r1",
            unchanged_for=unchanged_for,
            keepalive_interval=200.0,
            request_timeout=10.0,
        )

    assert not silent(view.job, 200.0)
    assert silent(view.job, 211.0)
    assert not silent(JobState(claimed_tick=T0, last_run=_run(T0)), 500.0)


def test_a_holder_whose_own_last_write_is_old_is_silent_from_the_first_look() -> None:
    """A claim applied long after it was sent (its holder gave up on it, then lost touch):
    just seen, so not yet unchanged for a keep-alive, but its ``renewTime`` is older than a
    keep-alive plus a request timeout, plus one more keep-alive for clock skew."""
    view = _view("r0", 4, T0, "8")

    def silent(renewed_ago: float | None) -> bool:
        return silent_holder(
            view.record,
            view.job,
            me="r1",
            unchanged_for=0.0,
            keepalive_interval=5.0,
            request_timeout=5.0,
            renewed_ago=renewed_ago,
        )

    assert silent(29.0)
    assert not silent(15.0)  # within the skew allowance: a live holder may have written then
    assert not silent(None)

"""The pure status fold, the leader: failover reasons and gaps, bounded history, conditions,
restarts, and a property test over random holder sequences. The runs of its jobs:
test_operator_status_runs.py; malformed and hostile input: test_operator_status_malformed.py."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from k8slease.operator.groupspec import parse_spec
from k8slease.operator.patch import merge_patch, significant
from tests.unit.operator.operator_helpers import (
    at,
    group_object,
    job_lease,
    leader_lease,
    run_record,
)
from tests.unit.operator.status_helpers import SPEC, conditions, fold, reasons


def test_first_holder_is_recorded_as_first() -> None:
    f = fold()
    f.observe(leader_lease("billing", "a", acquire=-5, renew=-1), at(0))
    status = f.render(SPEC, at(1))
    assert status["leader"] == "a"
    assert status["leaderSince"] == "2026-01-01T01:59:55Z"
    assert status["failovers"] == [
        {"from": "", "to": "a", "time": "2026-01-01T01:59:55Z", "reason": "first"}
    ]
    assert "lastFailoverTime" not in status  # the first election is not a failover
    assert conditions(status)["LeaderElected"]["status"] == "True"
    # the Event waits until the holder is seen renewing: the Lease may be abandoned
    assert reasons(f.take_notices()) == []
    f.observe(leader_lease("billing", "a", acquire=-5, renew=1), at(1))
    notices = f.take_notices()
    assert [(n.reason, n.message) for n in notices] == [("LeaderElected", "a became leader")]


def test_an_abandoned_lease_expires_by_observation_and_never_becomes_leader() -> None:
    f = fold()
    # renewTime an hour ago: judged by what the operator sees, not by comparing clocks
    f.observe(leader_lease("billing", "a", renew=-3600, duration=10), at(0))
    live = f.render(SPEC, at(10))
    assert live["leader"] == "a" and "expiredLeader" not in live
    status = f.render(SPEC, at(10.5))
    assert status["leader"] == ""
    assert status["expiredLeader"] == "a"
    assert status["leaderExpiredTime"] == "2026-01-01T02:00:10Z"
    assert "leaderSince" not in status
    assert status["message"].startswith("no leader: the Lease of a expired at 2026-01-01T02:00:10Z")
    assert conditions(status)["LeaderElected"]["reason"] == "LeaseExpired"
    notices = f.take_notices()
    assert reasons(notices) == ["LeaderExpired"]  # and no "a became leader"
    assert notices[0].type == "Warning"
    # since the operator first saw the Lease (it may have started then), not since a renewal
    assert notices[0].message == (
        "a was not seen renewing Lease ns/billing for its lease duration (10s) since "
        "2026-01-01T02:00:00Z: no leader"
    )
    assert conditions(status)["LeaderElected"]["message"] == (
        "a was not seen renewing Lease ns/billing since 2026-01-01T02:00:00Z"
    )
    f.render(SPEC, at(20))
    assert f.take_notices() == []  # announced once
    # the same holder renewing again leads again
    f.observe(leader_lease("billing", "a", renew=21, duration=10), at(21))
    again = f.render(SPEC, at(22))
    assert again["leader"] == "a" and "expiredLeader" not in again


def test_expired_leader_replaced_by_another_is_an_expired_failover() -> None:
    f = fold()
    f.observe(leader_lease("billing", "a", renew=0, duration=10), at(0))
    f.observe(leader_lease("billing", "a", renew=1, duration=10), at(1))
    assert f.render(SPEC, at(12))["expiredLeader"] == "a"
    f.observe(leader_lease("billing", "b", renew=12, transitions=1, duration=10), at(12.5))
    status = f.render(SPEC, at(13))
    assert status["leader"] == "b" and "expiredLeader" not in status
    last = status["failovers"][-1]
    assert (last["from"], last["to"], last["reason"], last["gapSeconds"]) == (
        "a",
        "b",
        "expired",
        11.5,
    )


def test_release_then_acquire_is_released_with_gap_between_observations() -> None:
    f = fold()
    f.observe(leader_lease("billing", "a", renew=0), at(0))
    f.observe(leader_lease("billing", "a", renew=2), at(2))
    f.observe(leader_lease("billing", "", renew=2), at(3))
    mid = f.render(SPEC, at(3.5))
    assert mid["leader"] == ""
    assert mid["leaderlessSince"] == "2026-01-01T02:00:03Z"
    assert mid["releasedBy"] == "a"
    assert conditions(mid)["LeaderElected"]["reason"] == "NoLeader"
    f.observe(leader_lease("billing", "b", acquire=4, renew=4, transitions=1, token=2), at(4.25))
    status = f.render(SPEC, at(5))
    last = status["failovers"][-1]
    assert last == {
        "from": "a",
        "to": "b",
        "time": "2026-01-01T02:00:04.25Z",
        "reason": "released",
        "gapSeconds": 1.25,
    }
    assert status["lastFailoverTime"] == "2026-01-01T02:00:04Z"
    assert status["transitions"] == 1 and status["fencingToken"] == 2
    assert "leaderlessSince" not in status
    assert reasons(f.take_notices()) == ["LeaderElected", "LeaderReleased", "LeaderElected"]


def test_direct_takeover_is_expired_with_gap_from_last_observed_renewal() -> None:
    f = fold()
    f.observe(leader_lease("billing", "a", renew=0), at(0))
    f.observe(leader_lease("billing", "a", renew=2), at(2))
    f.observe(leader_lease("billing", "a", renew=2), at(3))  # no renewal: the gap starts at 2
    f.observe(leader_lease("billing", "b", acquire=19, renew=19, transitions=1), at(19.5))
    last = f.render(SPEC, at(20))["failovers"][-1]
    assert (last["from"], last["to"], last["reason"]) == ("a", "b", "expired")
    assert last["gapSeconds"] == 17.5
    notices = f.take_notices()
    assert "took over from a" in notices[-1].message


def test_renewals_do_not_add_failovers() -> None:
    f = fold()
    for i in range(10):
        f.observe(leader_lease("billing", "a", renew=i * 2), at(i * 2))
    status = f.render(SPEC, at(20))
    assert len(status["failovers"]) == 1
    assert status["lastRenewTime"] == "2026-01-01T02:00:18Z"
    assert status["expiryTime"] == "2026-01-01T02:00:33Z"


def test_same_holder_reacquiring_after_release_is_a_released_failover() -> None:
    f = fold()
    f.observe(leader_lease("billing", "a", renew=0), at(0))
    f.observe(leader_lease("billing", "", renew=0), at(1))
    f.observe(leader_lease("billing", "a", acquire=2, renew=2, token=2), at(2))
    last = f.render(SPEC, at(3))["failovers"][-1]
    assert (last["from"], last["to"], last["reason"], last["gapSeconds"]) == (
        "a",
        "a",
        "released",
        1,
    )


def test_unheld_lease_then_holder_is_first_when_never_held() -> None:
    f = fold()
    f.observe(leader_lease("billing", "", renew=0, token=0), at(0))
    f.observe(leader_lease("billing", "a", renew=1, token=1), at(1))
    assert f.render(SPEC, at(2))["failovers"][-1]["reason"] == "first"


def test_history_is_bounded_by_history_limit() -> None:
    spec = parse_spec(group_object("billing", {"historyLimit": 3}))
    f = fold()
    for i in range(10):
        f.observe(leader_lease("billing", f"r{i}", renew=i, transitions=i), at(i))
    history = f.render(spec, at(11))["failovers"]
    assert [h["to"] for h in history] == ["r7", "r8", "r9"]
    assert all(h["reason"] == "expired" for h in history)


def test_candidates_are_holders_seen_on_leader_and_job_leases() -> None:
    f = fold()
    f.observe(leader_lease("billing", "a", renew=0), at(0))
    f.observe(job_lease("billing", "nightly", "c"), at(1))
    f.observe(leader_lease("billing", "b", renew=30, transitions=1), at(30))
    ids = [c["identity"] for c in f.render(SPEC, at(31))["candidates"]]
    assert ids == ["a", "b", "c"]


def test_leader_condition_turns_false_when_the_lease_is_not_renewed() -> None:
    f = fold()
    f.observe(leader_lease("billing", "a", renew=0, duration=10), at(0))
    assert conditions(f.render(SPEC, at(9)))["LeaderElected"]["status"] == "True"
    cond = conditions(f.render(SPEC, at(11)))["LeaderElected"]
    assert (cond["status"], cond["reason"]) == ("False", "LeaseExpired")
    assert cond["lastTransitionTime"] == "2026-01-01T02:00:11Z"
    # a stale Lease seen for the first time is judged by when we saw it, not by its renewTime
    # (another machine's clock): seen unchanged for its duration
    g = fold()
    g.observe(leader_lease("billing", "a", renew=-100, duration=10), at(0))
    assert conditions(g.render(SPEC, at(1)))["LeaderElected"]["reason"] == "Elected"
    assert conditions(g.render(SPEC, at(11)))["LeaderElected"]["reason"] == "LeaseExpired"


def test_condition_transition_time_only_moves_when_status_flips() -> None:
    f = fold()
    f.observe(leader_lease("billing", "a", renew=0), at(0))
    first = conditions(f.render(SPEC, at(1)))["LeaderElected"]["lastTransitionTime"]
    f.observe(leader_lease("billing", "a", renew=5), at(5))
    again = conditions(f.render(SPEC, at(6)))["LeaderElected"]["lastTransitionTime"]
    assert first == again == "2026-01-01T02:00:01Z"


def test_missing_leader_lease_and_deleted_lease() -> None:
    f = fold()
    status = f.render(SPEC, at(0))
    assert conditions(status)["LeaderElected"]["reason"] == "LeaseNotFound"
    assert status["message"].startswith("Lease ns/billing not found")
    body = leader_lease("billing", "a", renew=0)
    f.observe(body, at(1))
    assert f.render(SPEC, at(2))["message"] == "ok"
    f.observe(body, at(3), deleted=True)
    status = f.render(SPEC, at(4))
    assert status["leader"] == ""
    assert conditions(status)["LeaderElected"]["reason"] == "LeaseNotFound"
    assert "LeaderLeaseDeleted" in reasons(f.take_notices())


def test_spec_lease_name_selects_the_leader_lease() -> None:
    f = fold()
    f.observe(leader_lease("billing", "a", renew=0, name="billing-leader"), at(0))
    assert f.render(SPEC, at(1))["leader"] == ""
    spec = parse_spec(group_object("billing", {"leaseName": "billing-leader"}))
    status = f.render(spec, at(2))
    assert status["leader"] == "a" and status["leaseName"] == "billing-leader"


def test_seed_continues_the_history_after_an_operator_restart() -> None:
    f = fold()
    f.observe(leader_lease("billing", "a", renew=0), at(0))
    f.observe(leader_lease("billing", "b", renew=20, transitions=1), at(20))
    f.observe(job_lease("billing", "nightly", run=run_record("b", at(0))), at(21))
    old = f.render(SPEC, at(22))

    same = fold()
    same.observe(leader_lease("billing", "b", renew=40, transitions=1), at(40))
    same.seed(old)
    status = same.render(SPEC, at(41))
    assert status["failovers"] == old["failovers"]
    assert same.take_notices() == []

    moved = fold()
    moved.observe(leader_lease("billing", "c", renew=60, transitions=2), at(60))
    moved.seed(old)
    history = moved.render(SPEC, at(61))["failovers"]
    assert [h["to"] for h in history] == ["a", "b", "c"]
    # b -> c happened while the operator was away: how and how long are unknown; no gap made up
    assert history[-1] == {
        "from": "b",
        "to": "c",
        "time": "2026-01-01T02:00:00Z",
        "reason": "unobserved",
    }
    notices = moved.take_notices()
    assert [(n.reason, n.message) for n in notices] == [
        ("LeaderElected", "c leads; it took over from b while the operator was not watching")
    ]

    # a release while away is known from the Lease itself (empty holder): released, no gap
    released = fold()
    released.observe(leader_lease("billing", "", renew=50, transitions=1, duration=1), at(60))
    released.seed(old)
    mid = released.render(SPEC, at(61))
    assert (mid["leader"], mid["releasedBy"]) == ("", "b")
    assert reasons(released.take_notices()) == ["LeaderReleased"]
    released.observe(leader_lease("billing", "c", renew=70, transitions=2), at(70))
    last = released.render(SPEC, at(71))["failovers"][-1]
    assert (last["from"], last["to"], last["reason"]) == ("b", "c", "released")
    assert "gapSeconds" not in last  # the release was not seen when it happened

    runs = fold()
    runs.seed(old)
    (job,) = runs.render(SPEC, at(62))["jobs"]
    assert job["lastRun"]["holder"] == "b" and len(job["recentRuns"]) == 1


def test_significant_ignores_renewal_only_changes_and_merge_patch_removes_keys() -> None:
    f = fold()
    f.observe(leader_lease("billing", "a", renew=0), at(0))
    one = f.render(SPEC, at(1))
    f.observe(leader_lease("billing", "a", renew=2), at(2))
    two = f.render(SPEC, at(3))
    assert one != two and significant(one) == significant(two)
    patch = merge_patch(one, two)
    assert set(patch) <= {"lastRenewTime", "expiryTime", "candidates"}
    assert merge_patch({"a": 1, "b": 2}, {"a": 1}) == {"b": None}


HOLDERS = st.sampled_from(["", "a", "b", "c"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(HOLDERS, st.floats(0.01, 30)), min_size=1, max_size=30))
def test_any_sequence_of_holders_gives_a_consistent_history(steps: list[tuple[str, float]]) -> None:
    f = fold()
    now = 0.0
    previous: str | None = None
    expected_entries = 0
    transitions = 0
    for holder, delta in steps:
        now += delta
        if previous is not None and holder and holder != previous:
            transitions += 1
        body = leader_lease("billing", holder, renew=now, transitions=transitions)
        f.observe(body, at(now))
        if holder and holder != previous:
            expected_entries += 1
        previous = holder
    status = f.render(SPEC, at(now + 1))
    history = status["failovers"]
    assert len(history) == min(expected_entries, 20)
    assert status["leader"] == previous
    for entry in history:
        assert entry["reason"] in ("first", "released", "expired")
        assert entry.get("gapSeconds", 0) >= 0
        assert entry["to"]
    if history:
        assert history[-1]["to"] == next(h for h, _ in reversed(steps) if h)
    times = [datetime.fromisoformat(h["time"].replace("Z", "+00:00")) for h in history]
    assert times == sorted(times)
    assert all(t.tzinfo == UTC for t in times)


def test_an_expired_lease_does_not_change_the_status_at_every_evaluation() -> None:
    f = fold()
    f.observe(leader_lease("billing", "a", renew=0, duration=10), at(0))
    later = [significant(f.render(SPEC, at(t))) for t in (20, 25, 300)]
    assert later[0] == later[1] == later[2]

"""The time budgets of a job lock's requests (issue 22)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from k8slease.jobs.lockbudget import claim_budget, keep_budget, remaining

TICK = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def test_a_claim_may_take_as_long_as_its_grant_would_be_kept() -> None:
    now = TICK + timedelta(seconds=1)
    assert claim_budget(30, tick=TICK, grace=300, now=now, floor=10) == keep_budget(30) == 20


def test_a_claim_may_take_no_longer_than_the_tick_stays_within_its_grace() -> None:
    now = TICK + timedelta(seconds=280)
    assert claim_budget(600, tick=TICK, grace=300, now=now, floor=1) == 20


def test_a_tick_fired_past_its_grace_is_not_cut_short_and_no_budget_is_below_the_floor() -> None:
    late = TICK + timedelta(days=1)
    assert claim_budget(60, tick=TICK, grace=300, now=late, floor=10) == 40
    assert claim_budget(6, tick=TICK, grace=None, now=late, floor=10) == 10


def test_an_extension_may_take_the_time_the_grant_has_left() -> None:
    assert remaining(100.0, 30, now=110.0, floor=1) == 10.0
    assert remaining(100.0, 30, now=125.0, floor=1) == 1.0

"""The chaos checker's leadership segments: a real overlap is found, a fencing token stuck at its
ceiling across two terms of one process is not mistaken for one (a warm CI run's false alarm)."""

from __future__ import annotations

from tests.chaos.chaoslib import overlaps, segments_by

MAX = str(2**63 - 1)


def acts(who: str, key: str, start: float, seconds: float) -> list[tuple[str, str, float]]:
    return [(who, key, start + i * 0.005) for i in range(int(seconds / 0.005))]


def test_two_terms_at_the_token_ceiling_around_another_are_not_an_overlap() -> None:
    rows = acts("a", MAX, 0, 1) + acts("b", MAX, 5, 1) + acts("a", MAX, 10, 1)
    assert overlaps(segments_by(rows)) != [], "merged by key alone, it looks like two leaders"
    assert overlaps(segments_by(rows, split_after=1.0)) == []


def test_a_leader_still_acting_while_another_leads_is_an_overlap() -> None:
    rows = acts("a", MAX, 0, 11) + acts("b", MAX, 5, 1)
    assert overlaps(segments_by(rows, split_after=1.0)) != []

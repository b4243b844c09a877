"""The deterministic simulation in CI: a bounded set of seeds, and proof that it finds a hole."""

from __future__ import annotations

import pytest
from sim_report import Coverage, replay_text
from sim_run import simulate

SECONDS = 600.0
SEEDS = range(10)


@pytest.mark.timeout(300)  # about 15 s on an idle core
def test_bounded_seeds_keep_one_leader_one_run_per_tick_and_report_every_lost_tick() -> None:
    coverage = Coverage()
    for seed in SEEDS:
        out = simulate(seed, seconds=SECONDS)
        assert not out.violations, replay_text(out, SECONDS)
        coverage.add(out)
    print(coverage.render())
    assert coverage.faults["pause"] > 0 and coverage.faults["partition"] > 0
    assert coverage.terms > len(SEEDS), "faults made leadership change"
    assert coverage.runs > coverage.ticks / 3


def test_a_seed_replays_exactly() -> None:
    first, second = simulate(3, seconds=200), simulate(3, seconds=200)
    assert first.trace == second.trace and first.events == second.events


@pytest.mark.timeout(300)
def test_the_simulation_finds_the_hand_edit_hole_when_it_is_put_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Put back the rules before issue 15 (a record's own shortened duration honoured, a
    holder-less Lease free): some seed must report two leaders."""
    import k8slease.lease.rules as rules

    def old_duration(record, fallback):  # type: ignore[no-untyped-def]
        if record.malformed or record.duration_seconds <= 0:
            return max(float(record.duration_seconds), float(fallback))
        return float(record.duration_seconds)

    monkeypatch.setattr(rules, "effective_duration", old_duration)
    monkeypatch.setattr(rules, "is_release", lambda r: not r.malformed and not r.held)
    found = [simulate(seed, seconds=SECONDS).violations for seed in range(6)]
    assert any(any("two leaders" in v for v in found_) for found_ in found)

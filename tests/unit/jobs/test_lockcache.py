"""The informer's view as the locks read it: members remembered for a window, options checked."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from k8slease.errors import ConfigError
from k8slease.jobs.lockcache import ClaimCache
from k8slease.lease.jobrecord import JobState, RunRecord, lease_with_job_state
from k8slease.lease.observe import Observations
from k8slease.lease.record import LeaseRecord, new_lease
from k8slease.lease.view import LeaseView
from tests.support.fakeclock import FakeClock

T0 = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)


def _lease(job: str, winner: str, version: int) -> LeaseView:
    run = RunRecord(
        holder=winner, tick=T0, started=T0, finished=T0, outcome="succeeded", fencing_token=version
    )
    body = new_lease(f"g.{job}", "default", LeaseRecord(duration_seconds=60, fencing_token=version))
    body["metadata"]["resourceVersion"] = str(version)  # type: ignore[index]
    return LeaseView.decode(lease_with_job_state(body, JobState(claimed_tick=T0, last_run=run)))


def test_a_winner_stays_a_member_after_its_lease_is_overwritten_until_the_window_ends() -> None:
    clock = FakeClock()
    observations = Observations(clock)
    cache = ClaimCache(observations, lambda: True, window=600)
    observations.see("g.a", _lease("a", "r1", 1))
    assert cache.members(clock.monotonic()) == {"r1"}
    clock.advance(300)
    observations.see("g.a", _lease("a", "r2", 2))  # r1 no longer named, but seen 300 s ago
    assert cache.members(clock.monotonic()) == {"r1", "r2"}
    clock.advance(301)
    assert cache.members(clock.monotonic()) == {"r2"}  # r1 (crashed?) forgotten
    clock.advance(300)
    assert cache.members(clock.monotonic()) == set()  # nothing written for 10 minutes


def test_a_lease_seen_unchanged_does_not_refresh_who_it_names() -> None:
    clock = FakeClock()
    observations = Observations(clock)
    cache = ClaimCache(observations, lambda: True, window=600)
    observations.see("g.a", _lease("a", "r1", 1))
    clock.advance(500)
    observations.see("g.a", _lease("a", "r1", 1))  # a relist: the same content
    observations.see("g.b", _lease("b", "r2", 1))
    clock.advance(101)
    assert cache.members(clock.monotonic()) == {"r2"}


@pytest.mark.parametrize(
    ("step", "spread", "message"),
    [
        (-0.1, 3, "claim_step must be between 0 and 60 seconds, got -0.1"),
        (61, 3, "claim_step must be between 0 and 60 seconds"),
        ("0.5", 3, "claim_step"),
        (0.5, 0, "claim_spread must be an integer >= 1, got 0"),
        (0.5, 1.5, "claim_spread must be an integer >= 1"),
        (0.5, True, "claim_spread"),
    ],
)
def test_bad_claim_spacing_is_refused_naming_the_option(
    step: object, spread: object, message: str
) -> None:
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        ClaimCache(Observations(FakeClock()), lambda: True, step=step, spread=spread)  # type: ignore[arg-type]

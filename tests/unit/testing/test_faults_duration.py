"""A fault rule with a ``duration`` (a slow spell of the embedded API server) ends by itself."""

from __future__ import annotations

import pytest

from k8slease.testing.faults import Faults


class Ticks:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_latency_spell_applies_for_its_duration_then_is_gone() -> None:
    clock = Ticks()
    faults = Faults(clock=clock)
    spell = faults.add(latency=10.0, duration=300)
    forever = faults.add("update", "leases", latency=0.5)
    assert faults.take("get", "leases", "coordination.k8s.io", "", "default", "x") == [spell]
    clock.now += 299.9
    found = faults.take("update", "leases", "coordination.k8s.io", "", "default", "x")
    assert found == [spell, forever]
    clock.now += 0.1
    assert faults.take("get", "leases", "coordination.k8s.io", "", "default", "x") == []
    assert faults.rules() == [forever]
    assert spell.to_json()["expires_at"] == pytest.approx(400.0)


@pytest.mark.parametrize("bad", [0, -1, "10", float("nan")])
def test_a_duration_that_is_not_a_positive_number_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="duration must be a positive number"):
        Faults().add(latency=1.0, duration=bad)  # type: ignore[arg-type]

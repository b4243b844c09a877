"""The operator judges expiry on its own monotonic clock: a jump of the wall clock neither
expires a live leader nor keeps an expired one."""

from __future__ import annotations

from datetime import timedelta

from k8slease.operator.groups import PatchStatus
from k8slease.operator.settings import OperatorConfig
from k8slease.operator.writeloop import OperatorRuntime
from tests.support.fakeclock import FakeClock
from tests.unit.operator.operator_helpers import T0, group_object, leader_lease


def leader_shown(runtime: OperatorRuntime, clock: FakeClock) -> str:
    actions = runtime.registry.plan(runtime.observed_now(), clock.monotonic())
    (patch,) = [a for a in actions if isinstance(a, PatchStatus)]
    runtime.registry.written(patch, clock.monotonic())
    return str(patch.status["leader"])


def test_a_wall_clock_jump_does_not_bend_expiry() -> None:
    clock = FakeClock(wall=T0)
    settings = OperatorConfig(min_write_interval=0.0, renew_write_interval=0.0)
    runtime = OperatorRuntime(settings, clock=clock)
    runtime.on_object("ADDED", group_object("billing"))
    runtime.on_lease("ADDED", leader_lease("billing", "a", renew=0, duration=15))
    assert leader_shown(runtime, clock) == "a"
    clock.advance(1)
    clock.set_wall(T0 + timedelta(hours=1))  # NTP jumps an hour ahead
    runtime.registry.dirty.add(("ns", "billing"))
    assert runtime.registry.plan(runtime.observed_now(), clock.monotonic()) == []  # no change
    clock.advance(15)  # now the Lease has been unchanged for longer than its duration
    runtime.registry.dirty.add(("ns", "billing"))
    assert leader_shown(runtime, clock) == ""
    clock.set_wall(T0)  # and jumps back: still expired
    runtime.registry.dirty.add(("ns", "billing"))
    assert runtime.registry.plan(runtime.observed_now(), clock.monotonic()) == []

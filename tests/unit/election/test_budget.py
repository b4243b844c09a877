"""Request budgets of the election (issue 22) and the latency a timing tolerates.

``tolerated_latency`` is the formula docs/operations.md states; here it is checked against the
election machine itself: a leader whose every request takes a little less keeps its lease for
many deadlines, one whose requests take a little more steps down, at its deadline.
"""

from __future__ import annotations

import pytest

from k8slease.election.budgets import election_budget, tolerated_latency
from k8slease.election.commands import Purpose, Read, StoppedLeading, Wait
from k8slease.election.timing import ElectionTiming
from tests.unit.election.elector_model import Cluster

DEFAULT = ElectionTiming()
FAST = ElectionTiming(lease_duration=15, renew_interval=5, renew_deadline=10, retry_interval=2)


def test_a_renew_may_take_the_time_left_before_the_deadline() -> None:
    budget = election_budget(Purpose.RENEW, timing=DEFAULT, now=100.0, leading_until=125.0)
    assert budget == 25.0 and budget > DEFAULT.timeout
    assert election_budget(Purpose.REREAD, timing=DEFAULT, now=100.0, leading_until=103.0) == 3.0
    assert election_budget(Purpose.RENEW, timing=DEFAULT, now=130.0, leading_until=125.0) == 0.0


def test_a_take_or_read_may_take_as_long_as_a_grant_can_still_be_used() -> None:
    for purpose in (Purpose.TAKE, Purpose.CREATE, Purpose.OBSERVE):
        budget = election_budget(purpose, timing=DEFAULT, now=5.0, leading_until=None)
        assert budget == DEFAULT.renew_deadline


def test_a_release_keeps_request_timeout_so_a_stop_does_not_wait_on_a_slow_server() -> None:
    for purpose in (Purpose.RELEASE, Purpose.RELEASE_READ):
        budget = election_budget(purpose, timing=DEFAULT, now=5.0, leading_until=None)
        assert budget == DEFAULT.timeout == 10.0


@pytest.mark.parametrize(
    ("timing", "tolerance"),
    [
        (DEFAULT, 20.0),  # 60/20/40: min(40 - 20, 40 / 2)
        (FAST, 5.0),  # 15/5/10: min(10 - 5, 10 / 2)
        (ElectionTiming(lease_duration=10, renew_interval=2, renew_deadline=8), 4.0),
        (ElectionTiming(lease_duration=10, renew_interval=6, renew_deadline=8), 2.0),
    ],
)
def test_the_tolerated_latency_formula(timing: ElectionTiming, tolerance: float) -> None:
    assert tolerated_latency(timing) == tolerance


def _stepped_down_under_latency(timing: ElectionTiming, latency: float, span: float) -> bool:
    """One replica leads, then every request takes ``latency`` (answered then, or timed out at
    its budget); the watchdog checks the deadline while a request is out. Whether it stepped
    down within ``span`` seconds."""
    cluster = Cluster(1, timing=timing)
    machine = cluster.replicas[0].machine
    while cluster.leader() is None:
        cluster.roundtrip(0)
    start = cluster.t
    while cluster.t - start < span:
        command = cluster.act(0)
        if isinstance(command, Wait):
            assert command.until is not None
            cluster.advance(max(0.0, command.until - cluster.mono(0)))
            cluster.check(0)
        elif command is not None:
            assert not isinstance(command, Read) or command.purpose is not Purpose.OBSERVE
            now, until = cluster.mono(0), machine.leading_until
            budget = election_budget(command.purpose, timing=timing, now=now, leading_until=until)
            took = min(latency, budget)
            if until is not None and now + took >= until:  # the watchdog, while it is out
                cluster.advance(until - now)
                cluster.check(0)
                cluster.advance(took - (until - now))
            else:
                cluster.advance(took)
            cluster.apply(0)
            cluster.respond(0, lose=latency > budget)
        if any(isinstance(e, StoppedLeading) for e in cluster.replicas[0].events):
            return True
    return False


@pytest.mark.parametrize(
    "timing",
    [
        DEFAULT,
        FAST,
        ElectionTiming(lease_duration=10, renew_interval=2, renew_deadline=8),
        ElectionTiming(lease_duration=10, renew_interval=6, renew_deadline=8),
    ],
)
def test_a_leader_holds_just_below_the_tolerated_latency_and_not_above(
    timing: ElectionTiming,
) -> None:
    tolerance = tolerated_latency(timing)
    span = 20 * timing.renew_deadline
    below, above = 0.97 * tolerance, 1.03 * tolerance
    assert not _stepped_down_under_latency(timing, below, span)
    assert _stepped_down_under_latency(timing, above, span)
    if tolerance > timing.timeout:  # what request_timeout alone used to allow
        assert below > timing.timeout


@pytest.mark.parametrize(
    "timing",
    [DEFAULT, FAST, ElectionTiming(lease_duration=10, renew_interval=6, renew_deadline=8)],
)
def test_renews_leave_no_slack_and_exactly_the_tolerance_cannot_be_held(
    timing: ElectionTiming,
) -> None:
    # each renew goes out the instant the previous answer arrives (when the latency is at least
    # renew_interval): the leader holds at 0.9999 of the tolerance. At exactly half the deadline
    # no schedule can hold: the next renew cannot be sent before the previous answer (it is
    # conditional on the resourceVersion that answer brings), so its answer comes 2 * latency
    # = renew_deadline after the last good renew was sent: at its deadline, not before.
    tolerance = tolerated_latency(timing)
    span = 20 * timing.renew_deadline
    assert not _stepped_down_under_latency(timing, (1 - 1e-4) * tolerance, span)
    assert _stepped_down_under_latency(timing, tolerance, span)


def test_the_operations_guide_states_the_formula_and_its_table_matches_it() -> None:
    import re
    from pathlib import Path

    guide = (Path(__file__).parents[3] / "docs" / "operations.md").read_text()
    assert "min(renew_deadline - renew_interval, renew_deadline / 2)" in guide
    rows = re.findall(r"^\| (\d+) / (\d+) / (\d+)[^|]*\| ([\d.]+) s \|$", guide, re.M)
    assert len(rows) >= 4 and ("60", "20", "40", "20") in rows
    for duration, interval, deadline, stated in rows:
        timing = ElectionTiming(
            lease_duration=int(duration),
            renew_interval=float(interval),
            renew_deadline=float(deadline),
        )
        assert tolerated_latency(timing) == float(stated), (duration, interval, deadline)
        assert not _stepped_down_under_latency(
            timing, 0.97 * float(stated), 10 * timing.renew_deadline
        )

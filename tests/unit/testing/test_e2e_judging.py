"""The e2e suite's judge of ticks (tests/e2e/ticks.py, leasehistory.py), on made-up Lease
histories: it must see a tick run twice, a tick run nowhere, and a lost tick reported or not;
an e2e test that passes must mean something."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.e2e import ticks
from tests.e2e.leasehistory import LeaseVersion, grid, handovers_in, runs_in
from tests.e2e.ticks import Window, assert_each_tick_once, assert_lost_ticks_reported

T0 = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)


def tick(n: int) -> datetime:
    return T0 + timedelta(seconds=4 * n)


def version(holder: str, run: tuple[int, str, str] | None, claimed: int | None) -> LeaseVersion:
    annotations = {}
    if claimed is not None:
        annotations["k8slease.io/claimed-tick"] = tick(claimed).isoformat()
    if run is not None:
        n, who, outcome = run
        annotations["k8slease.io/last-run"] = json.dumps(
            {"tick": tick(n).isoformat(), "holder": who, "outcome": outcome, "fencingToken": n}
        )
    return LeaseVersion(
        "MODIFIED", "billing.nightly-invoices", "1", holder, None, None, annotations, 0.0
    )


def judged(
    versions: list[LeaseVersion], ticks: int, logged: dict[int, list[str]] | None = None
) -> Window:
    window = Window(tick(0), tick(ticks - 1), [tick(n) for n in range(ticks)])
    for run in runs_in(versions):
        window.runs.setdefault(run.tick, []).append(run)
    for n, pods in (logged or {}).items():
        window.logged[tick(n)] = pods
    return window


def steady(ticks: int) -> list[LeaseVersion]:
    found = []
    for n in range(ticks):
        who = f"pod-{n % 3}-x"
        found += [
            version(who, None if n == 0 else (n - 1, f"pod-{(n - 1) % 3}-x", "succeeded"), n),
            version(who, (n, who, "succeeded"), n),
        ]
    return found


def test_every_tick_once_passes_and_the_records_repeat_in_versions_only_once() -> None:
    assert_each_tick_once(judged(steady(6), 6), at_least=6)


def test_a_tick_run_nowhere_fails() -> None:
    history = [
        v for v in steady(6) if "T12:00:12" not in v.annotations.get("k8slease.io/last-run", "")
    ]
    with pytest.raises(AssertionError, match="ticks with no run record: 2026-12-01T12:00:12"):
        assert_each_tick_once(judged(history, 6))


def test_a_tick_run_twice_fails_from_the_lease_or_from_the_logs() -> None:
    twice = [*steady(6), version("pod-1-x", (2, "pod-1-x", "succeeded"), 2)]
    with pytest.raises(AssertionError, match="more than once"):
        assert_each_tick_once(judged(twice, 6))
    with pytest.raises(AssertionError, match="logged by pod-2"):
        assert_each_tick_once(judged(steady(6), 6, logged={3: ["pod-1", "pod-2"]}))


def test_a_lost_tick_passes_only_where_the_killed_holder_held_the_lock_and_reported() -> None:
    # pod-9 claimed tick 2 and was killed; ticks 3 and 4 fired while its lock was held;
    # pod-0 took over at tick 5 and recorded tick 2 lost.
    history = [
        v
        for v in steady(6)
        if json.loads(v.annotations.get("k8slease.io/last-run", '{"tick": "x"}'))["tick"]
        not in {tick(n).isoformat() for n in (2, 3, 4)}
    ]
    history.append(version("pod-0-x", (2, "pod-9-x", "lost"), 5))
    window = judged(history, 6)
    warned = [{"event": "lock.tick_lost", "lost_tick": tick(2).isoformat()}]
    unrun = assert_lost_ticks_reported(window, holder_prefix="pod-9-", warnings=lambda e: warned)
    assert unrun == [tick(3), tick(4)]
    with pytest.raises(AssertionError, match=r"without a lock\.tick_lost warning"):
        assert_lost_ticks_reported(window, holder_prefix="pod-9-", warnings=lambda e: [])
    with pytest.raises(AssertionError, match="lost by a live pod"):
        assert_lost_ticks_reported(window, holder_prefix="pod-0-", warnings=lambda e: warned)
    with pytest.raises(AssertionError, match="no run record"):
        assert_each_tick_once(window)


def test_the_grid_counts_from_2000_and_handovers_measure_the_gap() -> None:
    assert grid(T0 + timedelta(seconds=1), T0 + timedelta(seconds=9), every=4) == [tick(1), tick(2)]
    a = LeaseVersion("MODIFIED", "billing", "1", "a", T0, T0 + timedelta(seconds=5), {}, 0.0)
    released = LeaseVersion("MODIFIED", "billing", "2", "", T0, T0 + timedelta(seconds=6), {}, 0.0)
    b = LeaseVersion("MODIFIED", "billing", "3", "b", T0 + timedelta(seconds=6.25), None, {}, 0.0)
    (handover,) = handovers_in([a, released, b])
    assert (handover.old, handover.new, handover.gap_seconds) == ("a", "b", 0.25)


class History:
    """What :func:`ticks.await_ticks` reads of a :class:`leasehistory.LeaseHistory`."""

    def __init__(self, versions: list[LeaseVersion]) -> None:
        self.versions = versions

    def runs(self, name: str) -> list[Any]:
        assert name == "billing.nightly-invoices"
        return runs_in(self.versions)


def test_await_ticks_waits_for_run_records_of_judged_ticks_not_for_seconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[Callable[[], object]] = []

    def poll(what: str, probe: Callable[[], object], within: float, every: float = 0.05) -> object:
        asked.append(probe)
        return True

    monkeypatch.setattr(ticks, "poll", poll)
    now = datetime.now(UTC)
    old = now - timedelta(seconds=ticks.SETTLE_SECONDS + 1)
    history = History([])

    def ran(*at: datetime) -> list[LeaseVersion]:
        found = []
        for when in at:
            record = {"tick": when.isoformat(), "holder": "a", "outcome": "succeeded"}
            annotations = {"k8slease.io/last-run": json.dumps(record)}
            found.append(
                LeaseVersion(
                    "MODIFIED", "billing.nightly-invoices", "1", "a", None, None, annotations, 0.0
                )
            )
        return found

    ticks.await_ticks(history, after=old - timedelta(seconds=20), count=2)  # type: ignore[arg-type]
    (done,) = asked
    assert not done(), "no run record yet"
    history.versions = ran(old - timedelta(seconds=8))
    assert not done(), "one tick run, and a tick with no record does not count"
    history.versions = ran(old - timedelta(seconds=8), now)
    assert not done(), "the second tick is too young to be judged"
    history.versions = ran(old - timedelta(seconds=8), old - timedelta(seconds=4))
    assert done()
    history.versions = ran(old - timedelta(seconds=30), old - timedelta(seconds=4))
    assert not done(), "a tick before `after` does not count"

"""Judging a window of ticks of the app's ONCE_PER_TICK job from the job Lease's history.

Every tick of the window must have exactly one run record, ``succeeded``; a tick with two
records that ran (or logged as run by two pods) is a double run; a tick with no record at all
was never run. A tick may be ``lost`` only where the documented model says so, and then it
must be reported: see :func:`assert_lost_ticks_reported`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from tests.e2e.leasehistory import Claim, LeaseHistory, Run, grid
from tests.e2e.runlog import PodLogs
from tests.support.polling import poll

GROUP = "billing"
JOB_LEASE = "billing.nightly-invoices"
TICK_SECONDS = 4.0
#: How long after its time a tick's run record may still be coming (the claim order's wait,
#: a slow request under load): ticks younger than this are not judged yet.
SETTLE_SECONDS = 8.0


@dataclass
class Window:
    """The ticks from ``start`` to ``end`` and what the Lease and the logs say of them."""

    start: datetime
    end: datetime
    ticks: list[datetime]
    runs: dict[datetime, list[Run]] = field(default_factory=dict)
    claims: dict[datetime, list[Claim]] = field(default_factory=dict)
    logged: dict[datetime, list[str]] = field(default_factory=dict)

    def missing(self) -> list[datetime]:
        """Ticks with no run record at all."""
        return [t for t in self.ticks if not self.runs.get(t)]

    def duplicates(self) -> dict[str, list[str]]:
        """Ticks run more than once: two records that ran, or two pods that logged the run."""
        found = {}
        for tick in self.ticks:
            ran = [
                f"{r.holder} ({r.outcome}, token {r.fencing_token})"
                for r in self.runs.get(tick, [])
                if r.outcome != "lost"
            ]
            if len(ran) > 1:
                found[tick.isoformat()] = ran
            pods = self.logged.get(tick, [])
            if len(pods) > 1:
                found[tick.isoformat()] = [*ran, *(f"logged by {p}" for p in pods)]
        return found

    def lost(self) -> dict[datetime, Run]:
        """Ticks whose only record says ``lost``."""
        return {
            t: runs[0]
            for t, runs in self.runs.items()
            if t in self.ticks and [r.outcome for r in runs] == ["lost"]
        }

    def failed(self) -> list[Run]:
        return [r for t in self.ticks for r in self.runs.get(t, []) if r.outcome == "failed"]

    def describe(self, tick: datetime) -> str:
        claims = [f"{c.holder} token {c.fencing_token}" for c in self.claims.get(tick, [])]
        return f"{tick.isoformat()}: claims {claims or 'none'}"


def window(
    history: LeaseHistory, logs: PodLogs | None, *, start: datetime, within: float = 15
) -> Window:
    """The window from ``start`` to now less :data:`SETTLE_SECONDS`, once every tick in it has
    a record or ``within`` seconds have passed (a record still on its way under load, or a
    ``lost`` record a taker writes once the lock expired)."""
    end = datetime.now(UTC) - timedelta(seconds=SETTLE_SECONDS)
    ticks = grid(start, end, every=TICK_SECONDS)

    def complete() -> Window | None:
        judged = _window(history, logs, start, end, ticks)
        return None if judged.missing() else judged

    try:
        return poll("a record of every tick", complete, within, every=0.5)
    except AssertionError:
        return _window(history, logs, start, end, ticks)  # judged with what is missing


def await_ticks(
    history: LeaseHistory, *, after: datetime, count: int, judged: bool = True
) -> datetime:
    """Wait until ``count`` ticks later than ``after`` have a run record on the job Lease (the
    watch's history), older than :data:`SETTLE_SECONDS` when ``judged`` (ticks a
    :func:`window` taken now judges); returns now. A tick never run does not count: the wait
    goes on, and the window then shows it missing."""

    def done() -> bool:
        latest = datetime.now(UTC) - timedelta(seconds=SETTLE_SECONDS if judged else 0.0)
        ran = {r.tick for r in history.runs(JOB_LEASE) if after < r.tick <= latest}
        return len(ran) >= count

    poll(
        f"{count} ticks run after {after.isoformat()}",
        done,
        (count + 2) * TICK_SECONDS + SETTLE_SECONDS + 60,
        every=0.5,
    )
    return datetime.now(UTC)


def _window(
    history: LeaseHistory,
    logs: PodLogs | None,
    start: datetime,
    end: datetime,
    ticks: list[datetime],
) -> Window:
    assert history.gaps == [], f"the Lease watch missed events: {history.gaps}"
    judged = Window(start, end, ticks)
    for run in history.runs(JOB_LEASE):
        judged.runs.setdefault(run.tick, []).append(run)
    for claim in history.claims(JOB_LEASE):
        judged.claims.setdefault(claim.tick, []).append(claim)
    if logs is not None:
        for record in logs.events("invoices.written"):
            tick = datetime.fromisoformat(str(record["period"])).replace(tzinfo=UTC)
            judged.logged.setdefault(tick, []).append(str(record["pod"]))
    return judged


def assert_each_tick_once(judged: Window, *, at_least: int = 1) -> None:
    """Every tick of the window ran exactly once and succeeded: none twice, none missing,
    none lost or failed."""
    duplicates = judged.duplicates()
    assert duplicates == {}, f"ticks that ran more than once: {duplicates}"
    missing = judged.missing()
    assert missing == [], "ticks with no run record: " + "; ".join(
        judged.describe(t) for t in missing
    )
    lost = judged.lost()
    assert lost == {}, f"ticks recorded lost: {lost}"
    assert judged.failed() == [], f"runs that failed: {judged.failed()}"
    assert len(judged.ticks) >= at_least, (
        f"only {len(judged.ticks)} ticks in the window {judged.start} .. {judged.end}"
    )


def assert_lost_ticks_reported(
    judged: Window, *, holder_prefix: str, warnings: Callable[[str], list[dict[str, object]]]
) -> list[datetime]:
    """The documented model of a holder killed in the middle of a run (docs/reliability.md,
    "Reporting lost ticks"): the tick it claimed and never finished is recorded ``lost`` by
    whoever takes the lock over (``lock.tick_lost`` warning); the ticks fired while its lock
    was still held ran nowhere, and only those. ``warnings(event)`` gives the survivors' log
    records of ``event``. Returns the ticks that ran nowhere.

    Nothing else may be missing, lost, or run twice.
    """
    duplicates = judged.duplicates()
    assert duplicates == {}, f"ticks that ran more than once: {duplicates}"
    lost = judged.lost()
    for tick, run in lost.items():
        assert run.holder.startswith(holder_prefix), f"a tick lost by a live pod: {run}"
        reported = [w for w in warnings("lock.tick_lost") if w.get("lost_tick") == tick.isoformat()]
        assert reported, f"tick {tick} recorded lost without a lock.tick_lost warning"
    first_lost = min(lost, default=None)
    missing = judged.missing()
    if missing:
        assert first_lost is not None, "ticks ran nowhere and none was recorded lost: " + (
            "; ".join(judged.describe(t) for t in missing)
        )
        taken_over = min(
            (t for t in judged.ticks if t > first_lost and judged.runs.get(t)), default=None
        )
        outside = [t for t in missing if not first_lost < t < (taken_over or judged.end)]
        assert outside == [], "ticks ran nowhere outside the killed holder's lock: " + (
            "; ".join(judged.describe(t) for t in outside)
        )
    assert judged.failed() == [], f"runs that failed: {judged.failed()}"
    return missing

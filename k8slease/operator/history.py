"""The history a ScheduledJobGroup status keeps, and how it is written to and read from status.

Failovers, runs, jobs and conditions as the fold (:mod:`k8slease.operator.fold`) holds them, with
their status form: rendered for the status subresource, read back when the operator restarts so
that it continues the history instead of starting over. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from k8slease.kube.microtime import format_rfc3339, parse_microtime
from k8slease.lease.jobrecord import RunRecord
from k8slease.shown import shown

FailoverReason = Literal["first", "released", "expired", "unobserved"]
FAILOVER_REASONS = ("first", "released", "expired", "unobserved")
NoticeType = Literal["Normal", "Warning"]

#: How many distinct holders ``status.candidates`` keeps (least recently seen are dropped).
MAX_CANDIDATES = 50
#: Cap of ``jobs[].recentRuns`` (further bounded by ``spec.historyLimit``).
MAX_RECENT_RUNS = 10
#: ``jobs[].missedTicks`` counts up to this many missed ticks.
MAX_COUNTED_TICKS = 100
#: Cap of ``status.message``.
MAX_MESSAGE = 600
#: Cap of an identity (holder) copied from a Lease: the longest DNS subdomain (a pod name).
MAX_IDENTITY = 253
#: Cap of any other string in the status.
MAX_STRING = 1024

COND_LEADER_ELECTED = "LeaderElected"
COND_RUN_MISSING = "RunMissing"
COND_DEGRADED = "Degraded"

#: Status fields that change with every renewal or tick; written at a slower pace.
MINOR_FIELDS = ("lastRenewTime", "expiryTime")
MINOR_CANDIDATE_FIELDS = ("lastSeen",)
MINOR_JOB_FIELDS = ("nextTick",)


def format_time(value: datetime) -> str:
    """RFC 3339 in UTC with second precision, as Kubernetes writes ``metav1.Time``."""
    return format_rfc3339(value)


def format_precise(value: datetime) -> str:
    text = format_rfc3339(value, digits=6).removesuffix("Z")
    return text.rstrip("0").rstrip(".") + "Z"


def parse_time(value: Any) -> datetime | None:
    try:
        return parse_microtime(value)
    except ValueError:
        return None


def short(text: str, limit: int = MAX_MESSAGE) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def bound_identity(text: str) -> str:
    """An identity from a Lease, cut to :data:`MAX_IDENTITY` characters."""
    return short(text, MAX_IDENTITY)


def bound_strings(value: Any, limit: int = MAX_STRING) -> Any:
    """``value`` (a status or a part of it) with every string cut to ``limit`` characters."""
    if isinstance(value, str):
        return short(value, limit)
    if isinstance(value, Mapping):
        return {bound_strings(k, limit): bound_strings(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [bound_strings(v, limit) for v in value]
    return value


@dataclass(frozen=True, slots=True)
class Failover:
    """One change of leadership as the operator saw it.

    Reasons, from what the operator observes on the group's leader Lease:

    ``first``
        a holder appears and the operator knows of no earlier one;
    ``released``
        the holder gave the Lease up (``holderIdentity`` emptied) and later someone acquired it; the
        gap is measured from the observation of the release to the observation of the acquisition;
    ``expired``
        a different holder replaced the previous one directly, which a well-behaved elector only
        does after the Lease expired; the gap runs from the last observed renewal of the old holder
        to the observation of the new one;
    ``unobserved``
        the holder changed while the operator was not watching (it was restarted): the entry names
        both holders and the new holder's ``acquireTime``; how it happened and the gap are
        unknown, so no gap is given. A release that happened meanwhile is still recognised from
        the Lease itself (an empty ``holderIdentity``) and recorded as ``released``, without a gap.
    """

    from_holder: str
    to_holder: str
    time: datetime
    reason: FailoverReason
    gap_seconds: float | None = None

    def describe(self) -> str:
        """One sentence for the LeaderElected Event."""
        if self.reason == "first":
            text = f"{self.to_holder} became leader"
        elif self.reason == "released":
            text = f"{self.to_holder} became leader after {self.from_holder or 'a holder'} released"
        elif self.reason == "unobserved":
            text = (
                f"{self.to_holder} leads; it took over from {self.from_holder or 'a holder'} "
                "while the operator was not watching"
            )
        else:
            text = f"{self.to_holder} took over from {self.from_holder} (Lease expired)"
        if self.gap_seconds is not None:
            text += f"; {self.gap_seconds:.1f}s without a leader"
        return text

    def to_status(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "from": self.from_holder,
            "to": self.to_holder,
            "time": format_precise(self.time),
            "reason": self.reason,
        }
        if self.gap_seconds is not None:
            data["gapSeconds"] = round(self.gap_seconds, 3)
        return data

    @classmethod
    def from_status(cls, data: Any) -> Failover | None:
        if not isinstance(data, Mapping):
            return None
        when = parse_time(data.get("time"))
        reason = data.get("reason")
        if when is None or reason not in FAILOVER_REASONS:
            return None
        gap = data.get("gapSeconds")
        gap_value = (
            float(gap) if isinstance(gap, int | float) and not isinstance(gap, bool) else None
        )
        return cls(str(data.get("from") or ""), str(data.get("to") or ""), when, reason, gap_value)


@dataclass(frozen=True, slots=True)
class Notice:
    """Something worth an Event on the ScheduledJobGroup."""

    type: NoticeType
    reason: str
    message: str

    def __post_init__(self) -> None:
        # holder identities and job names in the text come from Leases others write
        object.__setattr__(self, "message", shown(short(self.message)))


def run_to_status(run: RunRecord) -> dict[str, Any]:
    data: dict[str, Any] = {
        "holder": bound_identity(run.holder),
        "tick": format_time(run.tick),
        "started": format_precise(run.started),
        "finished": format_precise(run.finished),
        "outcome": run.outcome,
        "durationSeconds": round(max(0.0, (run.finished - run.started).total_seconds()), 3),
        "fencingToken": run.fencing_token,
    }
    if run.error:
        data["error"] = short(run.error, 200)
    return data


def run_from_status(data: Any) -> RunRecord | None:
    if not isinstance(data, Mapping):
        return None
    tick, started, finished = (parse_time(data.get(k)) for k in ("tick", "started", "finished"))
    outcome = data.get("outcome")
    token = data.get("fencingToken", 0)
    if tick is None or started is None or finished is None:
        return None
    if outcome not in ("succeeded", "failed", "lost"):
        return None
    error = data.get("error")
    return RunRecord(
        holder=str(data.get("holder") or ""),
        tick=tick,
        started=started,
        finished=finished,
        outcome=outcome,
        fencing_token=(
            token
            if isinstance(token, int) and not isinstance(token, bool) and 0 <= token < 2**63
            else 0
        ),
        error=error if isinstance(error, str) else None,
    )


def run_key(run: RunRecord) -> tuple[datetime, datetime, str]:
    return (run.tick, run.started, run.holder)


@dataclass
class JobFold:
    """What the operator knows about one job of a group."""

    name: str
    lease_name: str = ""
    lease_present: bool = False
    holder: str = ""
    claimed_tick: datetime | None = None
    completed_tick: datetime | None = None
    last_run: RunRecord | None = None
    counts: dict[str, int] = field(default_factory=dict)
    recent: deque[RunRecord] = field(default_factory=lambda: deque(maxlen=MAX_RECENT_RUNS))
    #: The earliest tick found without a run, once alerted (so that the alert fires once).
    alerted_tick: datetime | None = None
    #: True once the job's Lease was observed (runs seen later are new, worth an Event).
    observed: bool = False

    def covered_until(self, now: datetime | None = None) -> datetime | None:
        """The newest tick this job is known to have claimed or run, up to ``now``.

        A tick later than ``now`` (claimed by a replica whose wall clock runs ahead, or by a hand
        edit) covers nothing yet: counting it would hide every tick missed until then.
        """
        ticks = [t for t in (self.claimed_tick, self.completed_tick) if t is not None]
        if self.last_run is not None:
            ticks.append(self.last_run.tick)
        if now is not None:
            ticks = [t for t in ticks if t <= now]
        return max(ticks) if ticks else None

    def correct_run(self, run: RunRecord) -> RunRecord | None:
        """Put ``run`` in place of a ``lost`` record of the same grant (tick and fencing token:
        a takeover recorded it before its holder could write how it really ended); returns the
        record replaced, or ``None`` when there is none."""
        if run.outcome == "lost":
            return None
        for i, known in enumerate(self.recent):
            if known.outcome == "lost" and (known.tick, known.fencing_token) == (
                run.tick,
                run.fencing_token,
            ):
                self.recent[i] = run
                if self.last_run == known:
                    self.last_run = run
                return known
        return None

    def add_run(self, run: RunRecord) -> bool:
        """Record ``run`` unless already known; returns True when it is new."""
        if any(run_key(known) == run_key(run) for known in self.recent):
            return False
        self.recent.append(run)
        return True

    def to_status(self) -> dict[str, Any]:
        """This job's entry of ``status.jobs`` (without the expectation fields)."""
        item: dict[str, Any] = {"name": self.name}
        if self.lease_name:
            item["lease"] = self.lease_name
        if self.holder:
            item["holder"] = self.holder
        if self.claimed_tick is not None:
            item["claimedTick"] = format_time(self.claimed_tick)
        if self.completed_tick is not None:
            item["completedTick"] = format_time(self.completed_tick)
        if self.last_run is not None:
            item["lastRun"] = run_to_status(self.last_run)
        item["counts"] = {k: int(self.counts.get(k, 0)) for k in ("succeeded", "failed", "lost")}
        item["recentRuns"] = [run_to_status(r) for r in self.recent]
        return item

    def seed(self, item: Mapping[str, Any]) -> None:
        """Continue from this job's entry of an earlier status (runs, alert, last run)."""
        runs = item.get("recentRuns")
        if isinstance(runs, list):
            known = list(self.recent)
            self.recent.clear()
            for raw in runs:
                run = run_from_status(raw)
                if run is not None:
                    self.add_run(run)
            for run in known:
                self.add_run(run)
        missed = parse_time(item.get("missedTick"))
        if missed is not None:
            self.alerted_tick = missed
        if self.last_run is None:
            self.last_run = run_from_status(item.get("lastRun"))


@dataclass
class ConditionState:
    """One condition as last rendered: its status, reason, message and transition time."""

    status: str
    reason: str
    message: str
    since: datetime


def failovers_from_status(items: Any) -> list[Failover]:
    """The readable entries of ``status.failovers``."""
    entries = (Failover.from_status(item) for item in items) if isinstance(items, list) else ()
    return [entry for entry in entries if entry is not None]


def candidates_from_status(items: Any) -> dict[str, tuple[datetime, datetime]]:
    """``status.candidates`` as identity -> (first seen, last seen)."""
    found: dict[str, tuple[datetime, datetime]] = {}
    for item in items if isinstance(items, list) else ():
        if isinstance(item, Mapping) and isinstance(item.get("identity"), str):
            first = parse_time(item.get("firstSeen"))
            last = parse_time(item.get("lastSeen"))
            if first and last:
                found.setdefault(item["identity"], (first, last))
    return found


def conditions_from_status(items: Any) -> dict[str, ConditionState]:
    """``status.conditions`` by type (entries without a transition time are dropped)."""
    found: dict[str, ConditionState] = {}
    for item in items if isinstance(items, list) else ():
        if not isinstance(item, Mapping) or not isinstance(item.get("type"), str):
            continue
        since = parse_time(item.get("lastTransitionTime"))
        if since is not None:
            found[item["type"]] = ConditionState(
                str(item.get("status")),
                str(item.get("reason") or ""),
                str(item.get("message") or ""),
                since,
            )
    return found

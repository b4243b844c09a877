"""Fold observations of a group's Leases into the status of its ScheduledJobGroup.

Pure: no kopf, no I/O and no clock. Every call takes the operator's observation time; the Lease's
own ``acquireTime``/``renewTime`` are reported as the replicas wrote them. A :class:`GroupFold`
holds what one group's history needs (the leader it last saw, when the group lost its leader,
the failover history, the holders seen, each job's runs) and renders it as the ``status`` dict.

Failover reasons, from what the operator observes on the group's leader Lease:

``first``
    a holder appears and the operator knows of no earlier one;
``released``
    the holder gave the Lease up (``holderIdentity`` emptied) and later someone acquired it; the
    gap is measured from the observation of the release to the observation of the acquisition;
``expired``
    a different holder replaced the previous one directly, which a well-behaved elector only does
    after the Lease expired; the gap runs from the last observed renewal of the old holder to the
    observation of the new one;
``unobserved``
    the holder changed while the operator was not watching (it was restarted): the entry names
    both holders and the new holder's ``acquireTime``; how it happened and the gap are unknown,
    so no gap is given. A release that happened meanwhile is still recognised from the Lease
    itself (an empty ``holderIdentity``) and recorded as ``released``, without a gap.

Times in ``failovers[].time`` and gaps come from the operator's clock, so they are comparable with
each other even when the replicas' clocks disagree.

Expiry is judged the way an elector judges it: the leader's Lease counts as expired once the
operator has seen it unchanged for its ``leaseDurationSeconds`` (on the operator's clock, from
its own observation times). The Lease's ``renewTime`` is never compared with the operator's
clock, so after an operator restart an abandoned Lease is reported expired one lease duration
after the operator first saw it. An expired Lease shows no ``leader``; ``expiredLeader`` and
``leaderExpiredTime`` say whose Lease it was and when it expired.

Strings copied from Leases into status (identities, job names, errors) are bounded: identities
to :data:`MAX_IDENTITY` characters, any other string to :data:`MAX_STRING`, so that a hostile or
broken Lease cannot blow the status up (a 1 MB ``holderIdentity`` becomes 253 characters).
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from k8slease.kube.microtime import parse_microtime
from k8slease.lease.jobrecord import RunRecord, job_state_from_lease
from k8slease.lease.record import record_from_lease
from k8slease.names import LABEL_GROUP, LABEL_JOB, LABEL_ROLE, ROLE_JOB, ROLE_LEADER
from k8slease.operator.spec import DEFAULT_HISTORY_LIMIT, GroupSpec

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
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _format_precise(value: datetime) -> str:
    text = value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")
    return text.rstrip("0").rstrip(".") + "Z"


def _parse_time(value: Any) -> datetime | None:
    try:
        return parse_microtime(value)
    except ValueError:
        return None


def _short(text: str, limit: int = MAX_MESSAGE) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def bound_identity(text: str) -> str:
    """An identity from a Lease, cut to :data:`MAX_IDENTITY` characters."""
    return _short(text, MAX_IDENTITY)


def bound_strings(value: Any, limit: int = MAX_STRING) -> Any:
    """``value`` (a status or a part of it) with every string cut to ``limit`` characters."""
    if isinstance(value, str):
        return _short(value, limit)
    if isinstance(value, Mapping):
        return {bound_strings(k, limit): bound_strings(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [bound_strings(v, limit) for v in value]
    return value


@dataclass(frozen=True, slots=True)
class Failover:
    """One change of leadership as the operator saw it."""

    from_holder: str
    to_holder: str
    time: datetime
    reason: FailoverReason
    gap_seconds: float | None = None

    def to_status(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "from": self.from_holder,
            "to": self.to_holder,
            "time": _format_precise(self.time),
            "reason": self.reason,
        }
        if self.gap_seconds is not None:
            data["gapSeconds"] = round(self.gap_seconds, 3)
        return data

    @classmethod
    def from_status(cls, data: Any) -> Failover | None:
        if not isinstance(data, Mapping):
            return None
        when = _parse_time(data.get("time"))
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


def run_to_status(run: RunRecord) -> dict[str, Any]:
    data: dict[str, Any] = {
        "holder": bound_identity(run.holder),
        "tick": format_time(run.tick),
        "started": _format_precise(run.started),
        "finished": _format_precise(run.finished),
        "outcome": run.outcome,
        "durationSeconds": round(max(0.0, (run.finished - run.started).total_seconds()), 3),
        "fencingToken": run.fencing_token,
    }
    if run.error:
        data["error"] = _short(run.error, 200)
    return data


def run_from_status(data: Any) -> RunRecord | None:
    if not isinstance(data, Mapping):
        return None
    tick, started, finished = (_parse_time(data.get(k)) for k in ("tick", "started", "finished"))
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
        fencing_token=token if isinstance(token, int) and not isinstance(token, bool) else 0,
        error=error if isinstance(error, str) else None,
    )


def _run_key(run: RunRecord) -> tuple[datetime, datetime, str]:
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

    def covered_until(self) -> datetime | None:
        """The newest tick this job is known to have claimed or run."""
        ticks = [t for t in (self.claimed_tick, self.completed_tick) if t is not None]
        if self.last_run is not None:
            ticks.append(self.last_run.tick)
        return max(ticks) if ticks else None

    def add_run(self, run: RunRecord) -> bool:
        """Record ``run`` unless already known; returns True when it is new."""
        if any(_run_key(known) == _run_key(run) for known in self.recent):
            return False
        self.recent.append(run)
        return True


@dataclass
class _ConditionState:
    status: str
    reason: str
    message: str
    since: datetime


def _labels(lease: Mapping[str, Any]) -> Mapping[str, Any]:
    metadata = lease.get("metadata")
    if isinstance(metadata, Mapping):
        labels = metadata.get("labels")
        if isinstance(labels, Mapping):
            return labels
    return {}


def lease_name_of(lease: Mapping[str, Any]) -> str:
    metadata = lease.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    return name if isinstance(name, str) else ""


def group_of(lease: Mapping[str, Any]) -> str:
    """The ``k8slease.io/group`` label of a Lease, or an empty string."""
    value = _labels(lease).get(LABEL_GROUP)
    return value if isinstance(value, str) else ""


class GroupFold:
    """The folded history of one group (one namespace, one ``k8slease.io/group`` label value)."""

    def __init__(self, namespace: str, group: str, *, first_seen: datetime) -> None:
        self.namespace = namespace
        self.group = group
        self.first_seen = first_seen
        self.leader_lease_name = group
        self.history_limit = DEFAULT_HISTORY_LIMIT
        # Latest body and observation time of every Lease of the group, by name.
        self.leases: dict[str, tuple[dict[str, Any], datetime]] = {}
        self.lease_problems: dict[str, tuple[str, ...]] = {}
        self._reset_leadership()
        self.jobs: dict[str, JobFold] = {}
        self.candidates: dict[str, tuple[datetime, datetime]] = {}
        self.conditions: dict[str, _ConditionState] = {}
        self.notices: list[Notice] = []

    # -- leadership -----------------------------------------------------------------------------

    def _reset_leadership(self) -> None:
        self.leader_known = False
        self.leader_lease_present = False
        self.leader = ""
        self.leader_since: datetime | None = None
        self.last_renew: datetime | None = None
        self.duration_seconds = 0
        self.transitions = 0
        self.fencing_token = 0
        self.last_renew_observed: datetime | None = None
        self.leaderless_since: datetime | None = None
        self.released_by = ""
        #: The leadership state came from a status written earlier, not from our observation.
        self.seeded = False
        #: A release or a takeover happened while the operator was not watching: no gap known.
        self.gap_unknown = False
        #: "X became leader" waits until X is seen renewing (an abandoned Lease gets no Event).
        self.unannounced: Failover | None = None
        #: (leader, last observed renewal) whose expiry was already announced.
        self.expiry_announced: tuple[str, datetime | None] | None = None
        self.failovers: deque[Failover] = deque(maxlen=self.history_limit)

    def set_history_limit(self, limit: int) -> None:
        if limit != self.history_limit:
            self.history_limit = limit
            self.failovers = deque(self.failovers, maxlen=limit)
            runs = min(limit, MAX_RECENT_RUNS)
            for job in self.jobs.values():
                job.recent = deque(job.recent, maxlen=runs)

    def set_leader_lease_name(self, name: str) -> None:
        """Follow another Lease as the group's leader Lease (from ``spec.leaseName``)."""
        if name and name != self.leader_lease_name:
            self.leader_lease_name = name
            self._reset_leadership()
            stored = self.leases.get(name)
            if stored is not None:
                self._observe_leader(stored[0], stored[1])

    def _see(self, holder: str, when: datetime) -> None:
        if not holder or holder == "<malformed>":
            return
        holder = bound_identity(holder)
        first, _ = self.candidates.get(holder, (when, when))
        self.candidates[holder] = (first, when)
        if len(self.candidates) > MAX_CANDIDATES:
            oldest = min(self.candidates, key=lambda h: self.candidates[h][1])
            del self.candidates[oldest]

    def _failover(self, entry: Failover, *, announce: bool = True) -> None:
        self.failovers.append(entry)
        self.unannounced = None if announce else entry
        if announce:
            self._announce(entry)

    def _announce(self, entry: Failover) -> None:
        if entry.reason == "first":
            text = f"{entry.to_holder} became leader"
        elif entry.reason == "released":
            text = (
                f"{entry.to_holder} became leader after {entry.from_holder or 'a holder'} released"
            )
        elif entry.reason == "unobserved":
            text = (
                f"{entry.to_holder} leads; it took over from {entry.from_holder or 'a holder'} "
                "while the operator was not watching"
            )
        else:
            text = f"{entry.to_holder} took over from {entry.from_holder} (Lease expired)"
        if entry.gap_seconds is not None:
            text += f"; {entry.gap_seconds:.1f}s without a leader"
        self.notices.append(Notice("Normal", "LeaderElected", text))

    def _unobserved_change(self, new: str, record: Any, observed_at: datetime) -> None:
        """The first look after a restart shows another state than the seeded status."""
        previous = self.leader
        if previous and not new:
            # A release writes an empty holder: the Lease itself says what happened.
            self.leader = ""
            self.leader_since = None
            self.leaderless_since = observed_at
            self.released_by = previous
            self.gap_unknown = True
            self.notices.append(
                Notice(
                    "Normal",
                    "LeaderReleased",
                    f"{previous} released the leadership while the operator was not watching",
                )
            )
            return
        when = min(record.acquire_time or observed_at, observed_at)
        if previous:
            entry = Failover(previous, new, when, "unobserved")
        elif self.released_by:
            entry = Failover(self.released_by, new, when, "released")
        else:
            entry = Failover("", new, when, "unobserved" if self.failovers else "first")
        self.leader = new
        self.leader_since = record.acquire_time or observed_at
        self.last_renew_observed = observed_at
        self.leaderless_since = None
        self.released_by = ""
        self.gap_unknown = False
        self._failover(entry)

    def _observe_leader(self, lease: Mapping[str, Any], observed_at: datetime) -> None:
        record = record_from_lease(lease)
        self.leader_lease_present = True
        if record.holder == "<malformed>" or any(p.startswith("spec ") for p in record.problems):
            return  # the holder cannot be read: keep what we knew; the problem shows in status
        self.duration_seconds = record.duration_seconds or self.duration_seconds
        self.transitions = record.transitions
        self.fencing_token = record.fencing_token
        new, previous = bound_identity(record.holder), self.leader
        renew_moved = record.renew_time != self.last_renew
        self.last_renew = record.renew_time
        first_observation = not self.leader_known
        self.leader_known = True
        seeded, self.seeded = self.seeded, False
        if new:
            self._see(new, observed_at)
        if first_observation:
            # Whatever the Lease says now happened before we looked. Expiry counts from now
            # (seen unchanged since now), and the Event waits until the holder is seen renewing.
            self.leader = new
            self.leader_since = record.acquire_time if new else None
            if new:
                self.last_renew_observed = observed_at
                when = min(record.acquire_time or observed_at, observed_at)
                self._failover(Failover("", new, when, "first"), announce=False)
            else:
                self.leaderless_since = observed_at
            return
        if seeded and new != previous:
            self._unobserved_change(new, record, observed_at)
            return
        if new == previous:
            if new and (renew_moved or self.last_renew_observed is None):
                self.last_renew_observed = observed_at
            if new and renew_moved and self.unannounced is not None:
                self._announce(self.unannounced)
                self.unannounced = None
            if new and record.acquire_time and record.acquire_time != self.leader_since:
                self.leader_since = record.acquire_time
            return
        self.unannounced = None
        if previous and not new:
            self.leader = ""
            self.leader_since = None
            self.leaderless_since = observed_at
            self.released_by = previous
            self.notices.append(
                Notice("Normal", "LeaderReleased", f"{previous} released the leadership")
            )
            return
        self.leader = new
        self.leader_since = record.acquire_time or observed_at
        if not previous:
            if self.released_by:
                gap = None
                if self.leaderless_since is not None and not self.gap_unknown:
                    gap = max(0.0, (observed_at - self.leaderless_since).total_seconds())
                self._failover(Failover(self.released_by, new, observed_at, "released", gap))
            elif record.transitions > 0 or self.failovers:
                self._failover(Failover("", new, observed_at, "released"))
            else:
                self._failover(Failover("", new, observed_at, "first"))
        else:
            gap = None
            if self.last_renew_observed is not None:
                gap = max(0.0, (observed_at - self.last_renew_observed).total_seconds())
            self._failover(Failover(previous, new, observed_at, "expired", gap))
        self.last_renew_observed = observed_at
        self.leaderless_since = None
        self.released_by = ""
        self.gap_unknown = False

    def _leader_lease_deleted(self, observed_at: datetime) -> None:
        self.leader_lease_present = False
        if self.leader:
            self.notices.append(
                Notice(
                    "Warning",
                    "LeaderLeaseDeleted",
                    f"Lease {self.leader_lease_name} held by {self.leader} was deleted",
                )
            )
            self.released_by = self.leader
            self.leaderless_since = observed_at
        self.leader = ""
        self.leader_since = None

    # -- jobs -----------------------------------------------------------------------------------

    def _job_name(self, lease: Mapping[str, Any], name: str) -> str:
        label = _labels(lease).get(LABEL_JOB)
        if isinstance(label, str) and label:
            return label
        prefix = f"{self.group}."
        return name[len(prefix) :] if name.startswith(prefix) else name

    def _job(self, name: str) -> JobFold:
        job = self.jobs.get(name)
        if job is None:
            job = JobFold(name, recent=deque(maxlen=min(self.history_limit, MAX_RECENT_RUNS)))
            self.jobs[name] = job
        return job

    def _observe_job(self, lease: Mapping[str, Any], observed_at: datetime) -> tuple[str, ...]:
        name = lease_name_of(lease)
        job = self._job(self._job_name(lease, name))
        seen_before, job.observed = job.observed, True
        job.lease_name = name
        job.lease_present = True
        record = record_from_lease(lease)
        state = job_state_from_lease(lease)
        if record.holder != "<malformed>":
            job.holder = bound_identity(record.holder)
            self._see(record.holder, observed_at)
        job.claimed_tick = state.claimed_tick or job.claimed_tick
        job.completed_tick = state.completed_tick or job.completed_tick
        job.counts = dict(state.counts)
        run = state.last_run
        if run is not None:
            self._see(run.holder, observed_at)
            newer = job.last_run is None or run.finished >= job.last_run.finished
            if job.add_run(run) and seen_before and newer and run.outcome != "succeeded":
                error = f": {_short(run.error, 160)}" if run.error else ""
                self.notices.append(
                    Notice(
                        "Warning",
                        "RunFailed" if run.outcome == "failed" else "RunLost",
                        f"job {job.name} tick {format_time(run.tick)} on {run.holder} "
                        f"{run.outcome}{error}",
                    )
                )
            if newer:
                job.last_run = run
        return state.problems

    # -- observations ---------------------------------------------------------------------------

    def observe(
        self, lease: Mapping[str, Any], observed_at: datetime, *, deleted: bool = False
    ) -> None:
        """Fold one watch event of one of the group's Leases into the state."""
        name = lease_name_of(lease)
        if not name:
            return
        if deleted:
            self.leases.pop(name, None)
            self.lease_problems.pop(name, None)
            if name == self.leader_lease_name:
                self._leader_lease_deleted(observed_at)
            else:
                for job in self.jobs.values():
                    if job.lease_name == name:
                        job.lease_present = False
                        job.holder = ""
            return
        self.leases[name] = (copy.deepcopy(dict(lease)), observed_at)
        problems = list(record_from_lease(lease).problems)
        role = _labels(lease).get(LABEL_ROLE)
        if name == self.leader_lease_name:
            self._observe_leader(lease, observed_at)
        elif role == ROLE_JOB or LABEL_JOB in _labels(lease):
            problems.extend(self._observe_job(lease, observed_at))
        elif role != ROLE_LEADER:
            problems.append(f"label {LABEL_ROLE} is {role!r}, not {ROLE_LEADER!r} or {ROLE_JOB!r}")
        previous = self.lease_problems.get(name, ())
        if problems:
            self.lease_problems[name] = tuple(problems)
            if tuple(problems) != previous:
                self.notices.append(
                    Notice("Warning", "MalformedLease", _short(f"Lease {name}: {problems[0]}", 300))
                )
        else:
            self.lease_problems.pop(name, None)

    def has_live_leases(self, now: datetime, max_age: timedelta) -> bool:
        """True when a Lease of the group is held, or was renewed within ``max_age``."""
        for body, _ in self.leases.values():
            record = record_from_lease(body)
            if record.holder:
                return True
            if record.renew_time is not None and now - record.renew_time <= max_age:
                return True
        return False

    # -- seeding from a status written earlier --------------------------------------------------

    def seed(self, status: Mapping[str, Any] | None) -> None:
        """Continue the history kept in ``status`` (from an earlier run of the operator).

        Called once, when the group's object is first seen. Notices made before are dropped, and
        the Leases seen so far are folded again on top of the seeded history, so that a restart
        of the operator neither repeats nor loses a failover.
        """
        status = status if isinstance(status, Mapping) else {}
        self._reset_leadership()
        self.notices.clear()
        leader = status.get("leader")
        history = status.get("failovers")
        if isinstance(history, list):
            for item in history:
                entry = Failover.from_status(item)
                if entry is not None:
                    self.failovers.append(entry)
        if isinstance(leader, str) and (leader or self.failovers):
            self.leader_known = True
            self.leader = leader
            self.leader_since = _parse_time(status.get("leaderSince"))
            self.last_renew = _parse_time(status.get("lastRenewTime"))
            # An expired leader was rendered as "" with its identity in expiredLeader.
            expired = status.get("expiredLeader")
            if not leader and isinstance(expired, str) and expired:
                self.leader = expired
            # Expiry is judged from our own observations only: none yet in this run.
            self.last_renew_observed = None
            self.seeded = True
            self.leaderless_since = _parse_time(status.get("leaderlessSince"))
            released = status.get("releasedBy")
            self.released_by = released if isinstance(released, str) else ""
        candidates = status.get("candidates")
        if isinstance(candidates, list):
            for item in candidates:
                if isinstance(item, Mapping) and isinstance(item.get("identity"), str):
                    first = _parse_time(item.get("firstSeen"))
                    last = _parse_time(item.get("lastSeen"))
                    if first and last:
                        self.candidates.setdefault(item["identity"], (first, last))
        self._seed_jobs(status.get("jobs"))
        conditions = status.get("conditions")
        if isinstance(conditions, list):
            for item in conditions:
                if not isinstance(item, Mapping) or not isinstance(item.get("type"), str):
                    continue
                since = _parse_time(item.get("lastTransitionTime"))
                if since is not None:
                    self.conditions[item["type"]] = _ConditionState(
                        str(item.get("status")),
                        str(item.get("reason") or ""),
                        str(item.get("message") or ""),
                        since,
                    )
        for name, (body, observed_at) in list(self.leases.items()):
            if name == self.leader_lease_name:
                self._observe_leader(body, observed_at)
        # Runs and job Leases were not reset, so seeding leaves only leadership notices to redo.

    def _seed_jobs(self, jobs: Any) -> None:
        if not isinstance(jobs, list):
            return
        for item in jobs:
            if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
                continue
            job = self._job(item["name"])
            runs = item.get("recentRuns")
            if isinstance(runs, list):
                known = list(job.recent)
                job.recent.clear()
                for raw in runs:
                    run = run_from_status(raw)
                    if run is not None:
                        job.add_run(run)
                for run in known:
                    job.add_run(run)
            missed = _parse_time(item.get("missedTick"))
            if missed is not None:
                job.alerted_tick = missed
            if job.last_run is None:
                job.last_run = run_from_status(item.get("lastRun"))

    # -- rendering ------------------------------------------------------------------------------

    def _condition(
        self, ctype: str, status: bool, reason: str, message: str, now: datetime
    ) -> None:
        text = "True" if status else "False"
        current = self.conditions.get(ctype)
        since = current.since if current is not None and current.status == text else now
        self.conditions[ctype] = _ConditionState(text, reason, _short(message, 300), since)

    def _leader_condition(self, now: datetime) -> None:
        name = f"{self.namespace}/{self.leader_lease_name}"
        if not self.leader_lease_present:
            self._condition(
                COND_LEADER_ELECTED, False, "LeaseNotFound", f"Lease {name} not found", now
            )
            return
        if not self.leader:
            since = self.leaderless_since
            text = f"nobody holds Lease {name}"
            if since is not None:
                text += f" since {format_time(since)}"
            self._condition(COND_LEADER_ELECTED, False, "NoLeader", text, now)
            return
        expiry = self.expired_at(now)
        if expiry is not None:
            # no growing number in the message: it would make every evaluation a write
            self._condition(
                COND_LEADER_ELECTED,
                False,
                "LeaseExpired",
                f"{self.leader} has not renewed Lease {name} since "
                f"{format_time(self.last_renew_observed or expiry)} (as the operator saw it)",
                now,
            )
            return
        self._condition(
            COND_LEADER_ELECTED, True, "Elected", f"{self.leader} holds Lease {name}", now
        )

    def expired_at(self, now: datetime) -> datetime | None:
        """When the leader's Lease expired, as judged at ``now``; None while it is live.

        Expired means seen unchanged for ``leaseDurationSeconds`` since the operator last saw it
        renewed (or first saw it), both on the operator's clock.
        """
        basis = self.last_renew_observed
        if not self.leader or basis is None or not self.duration_seconds:
            return None
        expiry = basis + timedelta(seconds=self.duration_seconds)
        return expiry if now > expiry else None

    def _announce_expiry(self, expiry: datetime) -> None:
        key = (self.leader, self.last_renew_observed)
        if self.expiry_announced == key:
            return
        self.expiry_announced = key
        self.unannounced = None  # an abandoned Lease never gets its "became leader"
        self.notices.append(
            Notice(
                "Warning",
                "LeaderExpired",
                f"{self.leader} has not renewed Lease {self.namespace}/{self.leader_lease_name} "
                f"for its lease duration ({self.duration_seconds}s) since "
                f"{format_time(self.last_renew_observed or expiry)}: no leader",
            )
        )

    def _job_expectations(
        self, spec: GroupSpec, now: datetime, created: datetime
    ) -> tuple[list[str], dict[str, dict[str, Any]]]:
        missing: list[str] = []
        extra: dict[str, dict[str, Any]] = {}
        for expectation in spec.jobs:
            job = self._job(expectation.name)
            covered = job.covered_until()
            reference = covered if covered is not None else created
            info: dict[str, Any] = {
                "expected": {
                    "schedule": expectation.schedule,
                    "timezone": expectation.timezone,
                    "graceSeconds": expectation.grace_seconds,
                }
            }
            upcoming = expectation.next_tick_after(now)
            if upcoming is not None:
                info["nextTick"] = format_time(upcoming)
            tick = expectation.next_tick_after(reference)
            limit = now - timedelta(seconds=expectation.grace_seconds)
            if tick is not None and tick <= limit:
                count = 0
                cursor_: datetime | None = tick
                while cursor_ is not None and cursor_ <= limit and count < MAX_COUNTED_TICKS:
                    count += 1
                    cursor_ = expectation.next_tick_after(cursor_)
                info["missedTick"] = format_time(tick)
                info["missedTicks"] = count
                text = f"job {expectation.name}: no run for tick {format_time(tick)}"
                if count > 1:
                    text += f" and {count - 1} later tick(s)"
                missing.append(text)
                if job.alerted_tick != tick:
                    job.alerted_tick = tick
                    self.notices.append(
                        Notice(
                            "Warning",
                            "RunMissing",
                            f"{text} ({expectation.schedule} {expectation.timezone}, "
                            f"grace {expectation.grace_seconds}s)",
                        )
                    )
            else:
                job.alerted_tick = None
            extra[expectation.name] = info
        return missing, extra

    def render(
        self, spec: GroupSpec, now: datetime, *, created: datetime | None = None
    ) -> dict[str, Any]:
        """The ``status`` for the group's object at ``now``; queues notices for new alerts."""
        self.set_history_limit(spec.history_limit)
        self.set_leader_lease_name(spec.lease_name)
        since = created or self.first_seen
        expiry = self.expired_at(now)
        status: dict[str, Any] = {
            "group": self.group,
            "leaseName": self.leader_lease_name,
            "leader": "" if expiry is not None else self.leader,
            "transitions": self.transitions,
            "fencingToken": self.fencing_token,
        }
        if expiry is not None:
            status["expiredLeader"] = self.leader
            status["leaderExpiredTime"] = _format_precise(expiry)
            self._announce_expiry(expiry)
        elif self.leader_since is not None and self.leader:
            status["leaderSince"] = format_time(self.leader_since)
        if self.last_renew is not None:
            status["lastRenewTime"] = _format_precise(self.last_renew)
            if self.duration_seconds:
                reported_expiry = self.last_renew + timedelta(seconds=self.duration_seconds)
                status["expiryTime"] = _format_precise(reported_expiry)
        if self.duration_seconds:
            status["leaseDurationSeconds"] = self.duration_seconds
        if not self.leader and self.leaderless_since is not None:
            status["leaderlessSince"] = _format_precise(self.leaderless_since)
            if self.released_by:
                status["releasedBy"] = self.released_by
        moves = [f for f in self.failovers if f.reason != "first"]
        if moves:
            status["lastFailoverTime"] = format_time(moves[-1].time)
        status["failovers"] = [f.to_status() for f in self.failovers]
        status["candidates"] = [
            {"identity": holder, "firstSeen": format_time(first), "lastSeen": format_time(last)}
            for holder, (first, last) in sorted(self.candidates.items())
        ]
        missing, expected = self._job_expectations(spec, now, since)
        status["jobs"] = self._render_jobs(expected)
        newest = max(
            (job for job in self.jobs.values() if job.last_run is not None),
            key=lambda job: job.last_run.finished if job.last_run else now,
            default=None,
        )
        if newest is not None and newest.last_run is not None:
            run = newest.last_run
            status["lastRunSummary"] = f"{newest.name}@{run.holder} {run.outcome}"

        problems = [f"{p}" for p in spec.problems]
        for name, lease_problems in sorted(self.lease_problems.items()):
            problems.extend(f"Lease {name}: {p}" for p in lease_problems)
        self._leader_condition(now)
        self._condition(
            COND_RUN_MISSING,
            bool(missing),
            "RunMissing" if missing else ("RunsOnTime" if spec.jobs else "NoExpectations"),
            "; ".join(missing) if missing else f"{len(spec.jobs)} expected job(s) on time",
            now,
        )
        reason = "Healthy"
        if spec.problems:
            reason = "MalformedSpec"
        elif self.lease_problems:
            reason = "MalformedLease"
        self._condition(
            COND_DEGRADED, bool(problems), reason, "; ".join(problems) or "spec and Leases ok", now
        )
        status["conditions"] = [
            {
                "type": ctype,
                "status": cond.status,
                "reason": cond.reason,
                "message": cond.message,
                "lastTransitionTime": format_time(cond.since),
            }
            for ctype, cond in sorted(self.conditions.items())
            if ctype in (COND_LEADER_ELECTED, COND_RUN_MISSING, COND_DEGRADED)
        ]
        messages = list(problems)
        if expiry is not None:
            messages.insert(
                0, f"no leader: the Lease of {self.leader} expired at {format_time(expiry)}"
            )
        if not self.leader_lease_present:
            messages.insert(0, f"Lease {self.namespace}/{self.leader_lease_name} not found")
        messages.extend(missing)
        status["message"] = _short("; ".join(messages)) if messages else "ok"
        bounded: dict[str, Any] = bound_strings(status)
        return bounded

    def _render_jobs(self, expected: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for name in sorted(self.jobs):
            job = self.jobs[name]
            if not job.lease_present and name not in expected and job.last_run is None:
                continue
            item: dict[str, Any] = {"name": name}
            if job.lease_name:
                item["lease"] = job.lease_name
            if job.holder:
                item["holder"] = job.holder
            if job.claimed_tick is not None:
                item["claimedTick"] = format_time(job.claimed_tick)
            if job.completed_tick is not None:
                item["completedTick"] = format_time(job.completed_tick)
            if job.last_run is not None:
                item["lastRun"] = run_to_status(job.last_run)
            item["counts"] = {k: int(job.counts.get(k, 0)) for k in ("succeeded", "failed", "lost")}
            item["recentRuns"] = [run_to_status(r) for r in job.recent]
            item.update(expected.get(name, {}))
            out.append(item)
        return out

    def take_notices(self) -> list[Notice]:
        notices, self.notices = self.notices, []
        return notices


def significant(status: Mapping[str, Any]) -> dict[str, Any]:
    """``status`` without the fields that move with every renewal or tick."""
    view = {k: v for k, v in status.items() if k not in MINOR_FIELDS}
    candidates = status.get("candidates")
    if isinstance(candidates, list):
        view["candidates"] = [
            {k: v for k, v in c.items() if k not in MINOR_CANDIDATE_FIELDS}
            for c in candidates
            if isinstance(c, Mapping)
        ]
    jobs = status.get("jobs")
    if isinstance(jobs, list):
        view["jobs"] = [
            {k: v for k, v in j.items() if k not in MINOR_JOB_FIELDS}
            for j in jobs
            if isinstance(j, Mapping)
        ]
    return view


def merge_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON merge patch (RFC 7386) of the top-level status fields that turn ``old`` into ``new``.

    Nested objects are sent whole, so lists and maps in ``status`` never keep stale entries.
    """
    patch: dict[str, Any] = {k: v for k, v in new.items() if old.get(k) != v}
    for key in old:
        if key not in new:
            patch[key] = None
    return patch


def group_names(leases: Sequence[Mapping[str, Any]]) -> set[str]:
    """The group labels found on ``leases``."""
    return {g for g in (group_of(lease) for lease in leases) if g}

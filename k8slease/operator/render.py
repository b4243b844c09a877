"""Render a group's folded history as the ``status`` of its ScheduledJobGroup.

:class:`GroupRendering` is a base of :class:`~k8slease.operator.fold.GroupFold`, which sets every
attribute declared here: the fold turns observations into state, this module turns that state
into the status dict, its conditions and the notices (Events) that new alerts queue. Pure, as the
fold: every call takes the operator's observation time.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from k8slease.kube.microtime import shift
from k8slease.operator.groupspec import GroupSpec
from k8slease.operator.history import (
    COND_DEGRADED,
    COND_LEADER_ELECTED,
    COND_RUN_MISSING,
    MAX_COUNTED_TICKS,
    MAX_RECENT_RUNS,
    ConditionState,
    Failover,
    JobFold,
    Notice,
    bound_strings,
    format_precise,
    format_time,
    short,
)
from k8slease.operator.statusbudget import (
    STATUS_BUDGET,
    FittedJobs,
    JobEntry,
    fit_jobs,
    json_size,
    trimmed_note,
)
from k8slease.shown import shown


class GroupRendering:
    """The status of one group, rendered from what :class:`GroupFold` keeps."""

    namespace: str
    group: str
    first_seen: datetime
    leader_lease_name: str
    leader_lease_present: bool
    leader: str
    leader_since: datetime | None
    last_renew: datetime | None
    last_renew_observed: datetime | None
    leaderless_since: datetime | None
    duration_seconds: int
    transitions: int
    fencing_token: int
    released_by: str
    unannounced: Failover | None
    expiry_announced: tuple[str, datetime | None] | None
    failovers: deque[Failover]
    candidates: dict[str, tuple[datetime, datetime]]
    conditions: dict[str, ConditionState]
    lease_problems: dict[str, tuple[str, ...]]
    jobs: dict[str, JobFold]
    notices: list[Notice]

    def set_history_limit(self, limit: int) -> None:
        raise NotImplementedError

    def set_leader_lease_name(self, name: str) -> None:
        raise NotImplementedError

    def _job(self, name: str) -> JobFold:
        raise NotImplementedError

    def _condition(
        self, ctype: str, status: bool, reason: str, message: str, now: datetime
    ) -> tuple[str, ConditionState]:
        """The condition as it would be rendered at ``now`` (kept by :meth:`render` once final)."""
        text = "True" if status else "False"
        current = self.conditions.get(ctype)
        since = current.since if current is not None and current.status == text else now
        return ctype, ConditionState(text, reason, shown(short(message, 300)), since)

    def _leader_condition(self, now: datetime) -> tuple[str, ConditionState]:
        name = f"{self.namespace}/{self.leader_lease_name}"
        if not self.leader_lease_present:
            return self._condition(
                COND_LEADER_ELECTED, False, "LeaseNotFound", f"Lease {name} not found", now
            )
        if not self.leader:
            since = self.leaderless_since
            text = f"nobody holds Lease {name}"
            if since is not None:
                text += f" since {format_time(since)}"
            return self._condition(COND_LEADER_ELECTED, False, "NoLeader", text, now)
        expiry = self.expired_at(now)
        if expiry is not None:
            # no growing number in the message: it would make every evaluation a write
            return self._condition(
                COND_LEADER_ELECTED,
                False,
                "LeaseExpired",
                f"{self.leader} was not seen renewing Lease {name} since "
                f"{format_time(self.last_renew_observed or expiry)}",
                now,
            )
        return self._condition(
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
        expiry = shift(basis, self.duration_seconds)
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
                f"{self.leader} was not seen renewing Lease "
                f"{self.namespace}/{self.leader_lease_name} for its lease duration "
                f"({self.duration_seconds}s) since "
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
            covered = job.covered_until(now)
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
            tick, count = expectation.missed_ticks(reference, now, cap=MAX_COUNTED_TICKS)
            if tick is not None:
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
        self,
        spec: GroupSpec,
        now: datetime,
        *,
        created: datetime | None = None,
        generation: int | None = None,
    ) -> dict[str, Any]:
        """The ``status`` for the group's object at ``now``, within
        :data:`~k8slease.operator.statusbudget.STATUS_BUDGET`; queues notices for new alerts."""
        self.set_history_limit(spec.history_limit)
        self.set_leader_lease_name(spec.lease_name)
        since = created or self.first_seen
        expiry = self.expired_at(now)
        head = self._leadership(expiry)
        missing, expected = self._job_expectations(spec, now, since)
        summary = self._last_run_summary()
        if summary:
            head["lastRunSummary"] = summary
        if generation is not None:
            head["observedGeneration"] = generation
        fixed = (
            self._leader_condition(now),
            self._condition(
                COND_RUN_MISSING,
                bool(missing),
                "RunMissing" if missing else ("RunsOnTime" if spec.jobs else "NoExpectations"),
                "; ".join(missing) if missing else f"{len(spec.jobs)} expected job(s) on time",
                now,
            ),
        )
        frame = _Frame(head, fixed, spec, expiry, missing, now)
        names = self._listed_jobs(expected)
        count = len(names)
        entries = _Entries(lambda name: {**self.jobs[name].to_status(), **expected.get(name, {})})
        status, degraded = self._framed(frame, None, count)
        fitted = fit_jobs(entries.of(names), count, STATUS_BUDGET - json_size(status))
        if fitted.trimmed:
            # the note and jobsOmitted take room too: reserve their longest form, then say
            # what was cut (never longer than that)
            worst, _ = self._framed(frame, FittedJobs([], MAX_RECENT_RUNS, count), count)
            fitted = fit_jobs(entries.of(names), count, STATUS_BUDGET - json_size(worst))
            status, degraded = self._framed(frame, fitted, count)
        status["jobs"] = sorted(fitted.jobs, key=lambda item: str(item.get("name")))
        self.conditions.update((*fixed, degraded))
        return status

    def _leadership(self, expiry: datetime | None) -> dict[str, Any]:
        """The status fields of the group's leadership: bounded, always rendered whole."""
        status: dict[str, Any] = {
            "group": self.group,
            "leaseName": self.leader_lease_name,
            "leader": "" if expiry is not None else self.leader,
            "transitions": self.transitions,
            "fencingToken": self.fencing_token,
        }
        if expiry is not None:
            status["expiredLeader"] = self.leader
            status["leaderExpiredTime"] = format_precise(expiry)
            self._announce_expiry(expiry)
        elif self.leader_since is not None and self.leader:
            status["leaderSince"] = format_time(self.leader_since)
        if self.last_renew is not None:
            status["lastRenewTime"] = format_precise(self.last_renew)
            if self.duration_seconds:
                reported_expiry = shift(self.last_renew, self.duration_seconds)
                status["expiryTime"] = format_precise(reported_expiry)
        if self.duration_seconds:
            status["leaseDurationSeconds"] = self.duration_seconds
        if not self.leader and self.leaderless_since is not None:
            status["leaderlessSince"] = format_precise(self.leaderless_since)
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
        return status

    def _last_run_summary(self) -> str | None:
        ran = [job for job in self.jobs.values() if job.last_run is not None]
        newest = max(ran, key=_finished, default=None)
        if newest is None or newest.last_run is None:
            return None
        run = newest.last_run
        return shown(f"{newest.name}@{run.holder} {run.outcome}")

    def _listed_jobs(self, expected: Mapping[str, Mapping[str, Any]]) -> list[str]:
        """The jobs ``status.jobs`` lists, the first to keep first: the expected ones (in spec
        order), the others by their newest run (newest first), then those without a run."""
        listed = [
            job
            for name, job in sorted(self.jobs.items())
            if name not in expected and (job.lease_present or job.last_run is not None)
        ]
        ran = sorted((job for job in listed if job.last_run is not None), key=_finished)
        ran.reverse()
        idle = [job.name for job in listed if job.last_run is None]
        return [*expected, *(job.name for job in ran), *idle]

    def _framed(
        self, frame: _Frame, fitted: FittedJobs | None, count: int
    ) -> tuple[dict[str, Any], tuple[str, ConditionState]]:
        """Everything but ``jobs`` (an empty list), and the Degraded condition, when the jobs
        were ``fitted`` (None: nothing trimmed); pure."""
        spec = frame.spec
        problems = [f"{p}" for p in spec.problems]
        if fitted is not None:
            problems.append(trimmed_note(fitted, count))
        for name, lease_problems in sorted(self.lease_problems.items()):
            problems.extend(f"Lease {name}: {p}" for p in lease_problems)
        reason = "Healthy"
        if spec.problems:
            reason = "MalformedSpec"
        elif fitted is not None:
            reason = "StatusTrimmed"
        elif self.lease_problems:
            reason = "MalformedLease"
        degraded = self._condition(
            COND_DEGRADED,
            bool(problems),
            reason,
            "; ".join(problems) or "spec and Leases ok",
            frame.now,
        )
        status = dict(frame.head)
        status["jobs"] = []
        if fitted is not None and fitted.omitted:
            status["jobsOmitted"] = fitted.omitted
        status["conditions"] = [
            {
                "type": ctype,
                "status": cond.status,
                "reason": cond.reason,
                "message": cond.message,
                "lastTransitionTime": format_time(cond.since),
            }
            for ctype, cond in sorted((*frame.fixed, degraded), key=lambda pair: pair[0])
        ]
        messages = list(problems)
        if frame.expiry is not None:
            messages.insert(
                0, f"no leader: the Lease of {self.leader} expired at {format_time(frame.expiry)}"
            )
        if not self.leader_lease_present:
            messages.insert(0, f"Lease {self.namespace}/{self.leader_lease_name} not found")
        messages.extend(frame.missing)
        status["message"] = short("; ".join(messages)) if messages else "ok"
        bounded: dict[str, Any] = bound_strings(status)
        return bounded, degraded


def _finished(job: JobFold) -> datetime:
    """When the job's last run finished (for jobs with a run only)."""
    run = job.last_run
    if run is None:
        raise ValueError(f"job {job.name} has no run")
    return run.finished


@dataclass(frozen=True, slots=True)
class _Frame:
    """What :meth:`GroupRendering.render` computed before fitting the jobs."""

    head: dict[str, Any]
    fixed: tuple[tuple[str, ConditionState], ...]
    spec: GroupSpec
    expiry: datetime | None
    missing: list[str]
    now: datetime


class _Entries:
    """The jobs' bounded entries, each rendered when first needed and kept for the next fit."""

    def __init__(self, item: Callable[[str], dict[str, Any]]) -> None:
        self._item = item
        self._made: list[JobEntry] = []

    def of(self, names: Sequence[str]) -> Iterator[JobEntry]:
        for i, name in enumerate(names):
            if i == len(self._made):
                self._made.append(JobEntry.of(bound_strings(self._item(name))))
            yield self._made[i]

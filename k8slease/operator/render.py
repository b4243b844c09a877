"""Render a group's folded history as the ``status`` of its ScheduledJobGroup.

:class:`GroupRendering` is a base of :class:`~k8slease.operator.fold.GroupFold`, which sets every
attribute declared here: the fold turns observations into state, this module turns that state
into the status dict, its conditions and the notices (Events) that new alerts queue. Pure, as the
fold: every call takes the operator's observation time.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from k8slease.kube.microtime import shift
from k8slease.operator.groupspec import GroupSpec
from k8slease.operator.history import (
    COND_DEGRADED,
    COND_LEADER_ELECTED,
    COND_RUN_MISSING,
    MAX_COUNTED_TICKS,
    ConditionState,
    Failover,
    JobFold,
    Notice,
    bound_strings,
    format_precise,
    format_time,
    short,
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
    ) -> None:
        text = "True" if status else "False"
        current = self.conditions.get(ctype)
        since = current.since if current is not None and current.status == text else now
        self.conditions[ctype] = ConditionState(text, reason, shown(short(message, 300)), since)

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
        missing, expected = self._job_expectations(spec, now, since)
        status["jobs"] = self._render_jobs(expected)
        newest = max(
            (job for job in self.jobs.values() if job.last_run is not None),
            key=lambda job: job.last_run.finished if job.last_run else now,
            default=None,
        )
        if newest is not None and newest.last_run is not None:
            run = newest.last_run
            status["lastRunSummary"] = shown(f"{newest.name}@{run.holder} {run.outcome}")

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
        status["message"] = short("; ".join(messages)) if messages else "ok"
        bounded: dict[str, Any] = bound_strings(status)
        return bounded

    def _render_jobs(self, expected: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
        return [
            {**job.to_status(), **expected.get(name, {})}
            for name, job in sorted(self.jobs.items())
            if job.lease_present or name in expected or job.last_run is not None
        ]

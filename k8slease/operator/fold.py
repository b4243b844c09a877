"""Fold observations of a group's Leases into the status of its ScheduledJobGroup.

Pure: no kopf, no I/O and no clock. Every call takes the operator's observation time; the Lease's
own ``acquireTime``/``renewTime`` are reported as the replicas wrote them. A :class:`GroupFold`
holds what one group's history needs (the leader it last saw, when the group lost its leader,
the failover history, the holders seen, each job's runs) and renders it as the ``status`` dict.

Failover reasons are explained at :class:`~k8slease.operator.history.Failover`; their times and
gaps come from the operator's clock, so they compare even when the replicas' clocks disagree.

Expiry is judged the way an elector judges it: the leader's Lease counts as expired once the
operator has seen it unchanged for its ``leaseDurationSeconds`` (on the operator's clock, from
its own observation times). The Lease's ``renewTime`` is never compared with the operator's
clock, so after an operator restart an abandoned Lease is reported expired one lease duration
after the operator first saw it. An expired Lease shows no ``leader``; ``expiredLeader`` and
``leaderExpiredTime`` say whose Lease it was and when it expired.

Strings copied from Leases into status (identities, job names, errors) are bounded: identities
to :data:`~k8slease.operator.history.MAX_IDENTITY` characters, any other string to
:data:`~k8slease.operator.history.MAX_STRING`, so that a hostile or broken Lease cannot blow the
status up (a 1 MB ``holderIdentity`` becomes 253 characters). The number of jobs is bounded by
the status's byte budget when it is rendered (:mod:`~k8slease.operator.statusbudget`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from k8slease.lease.record import LeaseRecord
from k8slease.lease.view import LeaseView, received_lease
from k8slease.names import LABEL_JOB, LABEL_ROLE, ROLE_JOB, ROLE_LEADER
from k8slease.operator.groupspec import DEFAULT_HISTORY_LIMIT
from k8slease.operator.history import (
    MAX_CANDIDATES,
    MAX_RECENT_RUNS,
    ConditionState,
    Failover,
    JobFold,
    Notice,
    bound_identity,
    candidates_from_status,
    conditions_from_status,
    failovers_from_status,
    format_time,
    parse_time,
    short,
)
from k8slease.operator.render import GroupRendering


class GroupFold(GroupRendering):
    """The folded history of one group (one namespace, one ``k8slease.io/group`` label value)."""

    def __init__(self, namespace: str, group: str, *, first_seen: datetime) -> None:
        self.namespace = namespace
        self.group = group
        self.first_seen = first_seen
        self.leader_lease_name = group
        self.history_limit = DEFAULT_HISTORY_LIMIT
        # Latest body and observation time of every Lease of the group, by name.
        self.leases: dict[str, tuple[LeaseView, datetime]] = {}
        self.lease_problems: dict[str, tuple[str, ...]] = {}
        self._reset_leadership()
        self.jobs: dict[str, JobFold] = {}
        self.candidates: dict[str, tuple[datetime, datetime]] = {}
        self.conditions: dict[str, ConditionState] = {}
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
                self._observe_leader(*stored)

    def _see(self, holder: str, when: datetime) -> None:
        if not holder:
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
        self.notices.append(Notice("Normal", "LeaderElected", entry.describe()))

    def _unobserved_change(self, new: str, record: LeaseRecord, observed_at: datetime) -> None:
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

    def _observe_leader(self, lease: LeaseView, observed_at: datetime) -> None:
        record = lease.record
        self.leader_lease_present = True
        if not record.holder_readable:
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

    def _job_name(self, lease: LeaseView, name: str) -> str:
        label = lease.labels.get(LABEL_JOB)
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

    def _observe_job(self, lease: LeaseView, observed_at: datetime) -> tuple[str, ...]:
        name = lease.name
        job = self._job(self._job_name(lease, name))
        seen_before, job.observed = job.observed, True
        job.lease_name = name
        job.lease_present = True
        record, state = lease.record, lease.job
        if record.holder_readable or not record.held:  # an unreadable holder tells nothing
            job.holder = bound_identity(record.holder)
            self._see(record.holder, observed_at)
        job.claimed_tick = state.claimed_tick or job.claimed_tick
        job.completed_tick = state.completed_tick or job.completed_tick
        job.counts = dict(state.counts)
        run = state.last_run
        if run is not None:
            self._see(run.holder, observed_at)
            newer = job.last_run is None or run.finished >= job.last_run.finished
            if job.correct_run(run) is not None:
                self.notices.append(
                    Notice(
                        "Normal",
                        "RunCorrected",
                        f"job {job.name} tick {format_time(run.tick)} on {run.holder} "
                        f"{run.outcome}: its record came after the lock was taken over, which "
                        "recorded it lost",
                    )
                )
            elif job.add_run(run) and seen_before and newer and run.outcome != "succeeded":
                error = f": {short(run.error, 160)}" if run.error else ""
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
        """Fold one watch event of one of the group's Leases into the state (decoded here, once)."""
        view = received_lease(lease)
        name = view.name
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
        self.leases[name] = (view, observed_at)
        problems = list(view.record.problems)
        role = view.labels.get(LABEL_ROLE)
        if name == self.leader_lease_name:
            self._observe_leader(view, observed_at)
        elif role == ROLE_JOB or LABEL_JOB in view.labels:
            problems.extend(self._observe_job(view, observed_at))
        elif role != ROLE_LEADER:
            problems.append(f"label {LABEL_ROLE} is {role!r}, not {ROLE_LEADER!r} or {ROLE_JOB!r}")
        previous = self.lease_problems.get(name, ())
        if problems:
            self.lease_problems[name] = tuple(problems)
            if tuple(problems) != previous:
                self.notices.append(
                    Notice("Warning", "MalformedLease", short(f"Lease {name}: {problems[0]}", 300))
                )
        else:
            self.lease_problems.pop(name, None)

    def has_live_leases(self, now: datetime, max_age: timedelta) -> bool:
        """True when a Lease of the group is held, or was renewed within ``max_age``."""
        for view, _ in self.leases.values():
            record = view.record
            if record.holder:
                return True
            if record.renew_time is not None and now - record.renew_time <= max_age:
                return True
        return False

    # -- seeding from a status written earlier --------------------------------------------------

    def fresh(self) -> GroupFold:
        """This group folded again from its Leases as they are now, without the history the
        operator kept (failovers, runs, candidates, conditions, alerts): for the next object of
        the group once the one whose status held that history was deleted."""
        fresh = GroupFold(self.namespace, self.group, first_seen=self.first_seen)
        fresh.set_history_limit(self.history_limit)
        fresh.set_leader_lease_name(self.leader_lease_name)
        for view, observed_at in sorted(self.leases.values(), key=lambda item: item[1]):
            fresh.observe(view.body, observed_at)
        fresh.notices.clear()  # what the Leases said before is not news to the next object
        return fresh

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
        self.failovers.extend(failovers_from_status(status.get("failovers")))
        if isinstance(leader, str) and (leader or self.failovers):
            self.leader_known = True
            self.leader = leader
            self.leader_since = parse_time(status.get("leaderSince"))
            self.last_renew = parse_time(status.get("lastRenewTime"))
            # An expired leader was rendered as "" with its identity in expiredLeader.
            expired = status.get("expiredLeader")
            if not leader and isinstance(expired, str) and expired:
                self.leader = expired
            # Expiry is judged from our own observations only: none yet in this run.
            self.last_renew_observed = None
            self.seeded = True
            self.leaderless_since = parse_time(status.get("leaderlessSince"))
            released = status.get("releasedBy")
            self.released_by = released if isinstance(released, str) else ""
        for identity, seen in candidates_from_status(status.get("candidates")).items():
            self.candidates.setdefault(identity, seen)
        jobs = status.get("jobs")
        for item in jobs if isinstance(jobs, list) else ():
            if isinstance(item, Mapping) and isinstance(item.get("name"), str):
                self._job(item["name"]).seed(item)
        self.conditions.update(conditions_from_status(status.get("conditions")))
        for name, (view, observed_at) in list(self.leases.items()):
            if name == self.leader_lease_name:
                self._observe_leader(view, observed_at)
        # Runs and job Leases were not reset, so seeding leaves only leadership notices to redo.

    def take_notices(self) -> list[Notice]:
        notices, self.notices = self.notices, []
        return notices

"""The status stays within its byte budget whatever the number of job Leases, so that the API
server can always store it (etcd refuses an object above 1.5 MiB, and every later status write
would fail): recent runs are trimmed first, then the least important jobs are left out and
counted; the leadership is always there, and a status that fits is left as it is."""

from __future__ import annotations

import json
from typing import Any

import pytest

from k8slease.operator import render
from k8slease.operator.fold import GroupFold
from k8slease.operator.groups import PatchStatus, Registry
from k8slease.operator.groupspec import parse_spec
from k8slease.operator.history import MAX_RECENT_RUNS
from k8slease.operator.settings import OperatorConfig
from k8slease.operator.statusbudget import STATUS_BUDGET, JobEntry, json_size
from tests.unit.operator.operator_helpers import (
    at,
    group_object,
    job_lease,
    leader_lease,
    run_record,
)
from tests.unit.operator.status_helpers import conditions, fold

EXPECTED = ("nightly", "hourly", "weekly")
SPEC_BODY = {
    "jobs": [
        {"name": "nightly", "schedule": "0 2 * * *"},
        {"name": "hourly", "schedule": "0 * * * *"},
        {"name": "weekly", "schedule": "0 3 * * 0"},
    ]
}
SPEC = parse_spec(group_object("billing", SPEC_BODY))
HOLDER = "replica-" + "x" * 300  # cut to 253 characters, as every identity
ERROR = "e" * 500  # cut to 200 characters in a run
HOUR = 3600.0


def flooded(jobs: int, runs: int, *, error: str | None = ERROR) -> GroupFold:
    """Group billing with a live leader and ``jobs`` held job Leases, each seen with ``runs`` failed
    runs (job-N's runs are N seconds newer than job-(N-1)'s); the expected jobs ran first of all
    (``weekly`` never: it has no Lease)."""
    f = fold()
    f.observe(leader_lease("billing", "leader-0", renew=0), at(0))
    for name in EXPECTED[:2]:
        f.observe(job_lease("billing", name, run=run_record(HOLDER, at(-HOUR), error="old")), at(1))
    for r in range(runs):
        for i in range(jobs):
            run = run_record(HOLDER, at(r * HOUR + i), "failed", error=error)
            lease = job_lease("billing", f"job-{i:04d}", HOLDER, run=run)  # the next run's
            f.observe(lease, at(r * HOUR + i + 5))
    f.observe(leader_lease("billing", "leader-0", renew=runs * HOUR), at(runs * HOUR))
    f.take_notices()
    return f


def rendered(f: GroupFold, runs: int) -> dict[str, Any]:
    return f.render(SPEC, at(runs * HOUR + 1))


def ample(monkeypatch: pytest.MonkeyPatch) -> None:
    """A budget nothing reaches: the status as it would be without one."""
    monkeypatch.setattr(render, "STATUS_BUDGET", 10**9)


def assert_leadership(status: dict[str, Any]) -> None:
    assert status["leader"] == "leader-0"
    assert status["failovers"][-1]["to"] == "leader-0"
    assert {c["identity"] for c in status["candidates"]} >= {"leader-0"}
    assert conditions(status)["LeaderElected"]["reason"] == "Elected"


def test_a_flood_of_job_leases_leaves_the_least_important_jobs_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The audit's case: 500 job Leases with 10 runs each and long errors rendered 2.35 MB, which
    no API server stores. Now: within the budget, the leader and the expected jobs there, the
    newest jobs kept, and what was left out counted and said."""
    f = flooded(500, MAX_RECENT_RUNS)
    status = rendered(f, MAX_RECENT_RUNS)
    assert json_size(status) <= STATUS_BUDGET
    assert len(json.dumps(status, separators=(",", ":")).encode()) <= STATUS_BUDGET
    assert_leadership(status)
    names = [job["name"] for job in status["jobs"]]
    assert names == sorted(names)
    assert set(EXPECTED) <= set(names)  # expected first, although their runs are the oldest
    assert "expected" in next(job for job in status["jobs"] if job["name"] == "weekly")
    omitted = status["jobsOmitted"]
    assert omitted > 0 and len(names) + omitted == 503
    # the others kept are those with the newest runs
    kept = sorted(n for n in names if n.startswith("job-"))
    assert kept == [f"job-{i:04d}" for i in range(500 - len(kept), 500)]
    assert all(job["recentRuns"] == [] for job in status["jobs"])
    flood = [job for job in status["jobs"] if job["name"].startswith("job-")]
    assert all(job["lastRun"]["error"] == ERROR[:197] + "..." for job in flood)
    note = f"{omitted} of 503 jobs left out (jobsOmitted), recentRuns left out (lastRun kept)"
    degraded = conditions(status)["Degraded"]
    assert (degraded["status"], degraded["reason"]) == ("True", "StatusTrimmed")
    assert degraded["message"] == f"status over its 512 KiB budget: {note}"
    assert note in status["message"]
    ample(monkeypatch)
    assert json_size(rendered(flooded(500, MAX_RECENT_RUNS), MAX_RECENT_RUNS)) > 2_000_000


def test_recent_runs_are_trimmed_oldest_first_before_any_job_is_left_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    status = rendered(flooded(200, MAX_RECENT_RUNS), MAX_RECENT_RUNS)
    assert json_size(status) <= STATUS_BUDGET
    assert "jobsOmitted" not in status and len(status["jobs"]) == 203
    assert_leadership(status)
    ample(monkeypatch)
    whole = rendered(flooded(200, MAX_RECENT_RUNS), MAX_RECENT_RUNS)
    assert json_size(whole) > STATUS_BUDGET
    kept = {len(job["recentRuns"]) for job in status["jobs"] if job["name"].startswith("job-")}
    (keep,) = kept
    assert 0 < keep < MAX_RECENT_RUNS
    for trimmed, full in zip(status["jobs"], whole["jobs"], strict=True):
        assert trimmed["recentRuns"] == full["recentRuns"][-keep:]  # the newest
        assert trimmed.get("lastRun") == full.get("lastRun")
    assert conditions(status)["Degraded"]["message"] == (
        f"status over its 512 KiB budget: recentRuns cut to the newest {keep} per job"
    )


def test_a_status_that_fits_is_left_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """95 jobs with 10 short runs each come close to the budget and stay whole; at the exact
    boundary nothing is trimmed, one byte less trims."""
    status = rendered(flooded(95, MAX_RECENT_RUNS, error=None), MAX_RECENT_RUNS)
    assert 0.85 * STATUS_BUDGET < json_size(status) <= STATUS_BUDGET
    ample(monkeypatch)
    whole = rendered(flooded(95, MAX_RECENT_RUNS, error=None), MAX_RECENT_RUNS)
    assert status == whole
    assert conditions(whole)["Degraded"]["reason"] == "Healthy"
    for budget, trimmed in ((json_size(whole), False), (json_size(whole) - 1, True)):
        monkeypatch.setattr(render, "STATUS_BUDGET", budget)
        again = rendered(flooded(95, MAX_RECENT_RUNS, error=None), MAX_RECENT_RUNS)
        assert (again != whole) is trimmed
        assert json_size(again) <= budget
        assert (conditions(again)["Degraded"]["reason"] == "StatusTrimmed") is trimmed


def test_a_trimmed_status_reads_back_and_renders_within_the_budget_again() -> None:
    """An operator restart seeds from the trimmed status: the history it lacks stays lacking,
    the status stays within the budget."""
    status = rendered(flooded(500, 3), 3)
    again = fold()
    again.seed(status)
    seeded = again.render(SPEC, at(3 * HOUR + 2))
    assert json_size(seeded) <= STATUS_BUDGET
    assert seeded["leader"] == "leader-0"


def test_an_oversized_status_found_at_start_is_replaced_by_a_patch_within_the_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Upgrading from an operator that wrote every job: its 1.4 MB status (stored before it grew
    too large) is replaced by one patch within the budget."""
    ample(monkeypatch)
    old = rendered(flooded(400, 4), 4)
    old["observedGeneration"] = 1
    assert json_size(old) > 1_400_000
    monkeypatch.setattr(render, "STATUS_BUDGET", STATUS_BUDGET)
    reg = Registry(OperatorConfig())
    reg.on_object("ADDED", group_object("billing", SPEC_BODY, status=old), at(0))
    reg.on_lease("ADDED", leader_lease("billing", "leader-1", renew=4 * HOUR), at(4 * HOUR))
    (patch,) = [a for a in reg.plan(at(4 * HOUR + 1), 0.0) if isinstance(a, PatchStatus)]
    assert json_size(patch.patch) <= STATUS_BUDGET
    merged = {k: v for k, v in {**old, **patch.patch}.items() if v is not None}
    assert merged == patch.status and json_size(merged) <= STATUS_BUDGET
    assert merged["leader"] == "leader-1" and len(merged["jobs"]) == 403
    assert conditions(merged)["Degraded"]["reason"] == "StatusTrimmed"


def test_no_number_of_jobs_passes_the_budget() -> None:
    """The room left for the jobs is computed with the longest note the status can carry, so
    the note written never pushes it over (around each edge: runs trimmed, jobs left out)."""
    for jobs in (150, 151, 152, 400, 401, 900):
        status = rendered(flooded(jobs, 2), 2)
        assert json_size(status) <= STATUS_BUDGET, jobs


def test_the_leadership_always_fits_even_with_every_bound_at_its_worst() -> None:
    """100 failovers and 50 candidates whose identities are 253 characters of ``<`` (which Go
    writes as 6 bytes each), conditions and message at their caps: the leadership is never cut
    and leaves room for jobs."""
    spec = parse_spec(group_object("billing", {**SPEC_BODY, "historyLimit": 100}))
    f = fold()
    f.set_history_limit(100)  # as from the spec, when the object is seen
    for n in range(120):
        holder = f"{n:03d}" + "<" * 300
        f.observe(leader_lease("billing", holder, renew=n, transitions=n), at(n))
    for i in range(600):
        run = run_record("&" * 300, at(i), "failed", error=">" * 500)
        f.observe(job_lease("billing", f"job-{i:04d}-" + "<" * 300, "&" * 300, run=run), at(200))
    f.observe(leader_lease("billing", holder, renew=200, transitions=119), at(200))
    status = f.render(spec, at(201))
    assert json_size(status) <= STATUS_BUDGET
    assert len(status["failovers"]) == 100 and len(status["candidates"]) == 50
    assert status["leader"] == "119" + "<" * 247 + "..."
    assert status["jobs"] and status["jobsOmitted"] > 0
    head = {k: v for k, v in status.items() if k != "jobs"}
    assert json_size(head) < 400 * 1024


def test_an_entry_keeps_its_newest_runs_and_is_measured_to_the_byte() -> None:
    runs = [{"tick": f"t{n}", "error": "<&>" * n} for n in range(3)]
    entry = JobEntry.of({"name": "nightly", "recentRuns": runs})
    for keep in range(6):
        shown = entry.render(keep)
        assert shown["recentRuns"] == runs[max(0, 3 - keep) :]
        assert entry.size(keep) == json_size(shown)


def test_sizes_count_what_go_writes() -> None:
    """The API server re-encodes the status with Go's encoding/json: ``<``, ``>``, ``&`` and
    U+2028/U+2029 escaped, other characters as UTF-8 (a lone surrogate as U+FFFD)."""
    go = '{"a":"\\u003cé😀\\u2028\\u0026","b":"\ufffd"}'
    assert json_size({"a": "<é😀\u2028&", "b": "\udc80"}) == len(go.encode())

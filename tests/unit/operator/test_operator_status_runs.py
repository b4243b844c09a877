"""The pure status fold, the runs of a group's jobs: counts, recent runs, the last-run summary, a
run recorded lost and corrected, and missing runs (grace, time zones, claimed ticks)."""

from __future__ import annotations

from datetime import timedelta

from k8slease.operator.groupspec import parse_spec
from tests.unit.operator.operator_helpers import at, group_object, job_lease, run_record
from tests.unit.operator.status_helpers import SPEC, conditions, fold, reasons


def test_job_runs_counts_and_recent_runs() -> None:
    f = fold()
    tick = at(0)
    f.observe(
        job_lease("billing", "nightly", run=run_record("a", tick), counts={"succeeded": 1}), at(5)
    )
    assert f.take_notices() == []  # a run that happened before we looked is not news
    later = tick + timedelta(days=1)
    f.observe(job_lease("billing", "nightly", "b", claimed=later), at(86400))
    failed = run_record("b", later, "failed", error="boom")
    body = job_lease("billing", "nightly", run=failed, counts={"succeeded": 1, "failed": 1})
    f.observe(body, at(86405))
    f.observe(body, at(86406))  # the same run again is not a new run
    status = f.render(SPEC, at(86410))
    (job,) = status["jobs"]
    assert job["name"] == "nightly" and job["lease"] == "billing.nightly"
    assert job["lastRun"]["holder"] == "b"
    assert job["lastRun"]["outcome"] == "failed" and job["lastRun"]["error"] == "boom"
    assert job["lastRun"]["durationSeconds"] == 2.0
    assert job["counts"] == {"succeeded": 1, "failed": 1, "lost": 0}
    assert [r["holder"] for r in job["recentRuns"]] == ["a", "b"]
    assert status["lastRunSummary"] == "nightly@b failed"
    notices = f.take_notices()
    assert reasons(notices) == ["RunFailed"] and "boom" in notices[0].message


def test_a_run_recorded_lost_by_a_takeover_is_corrected_when_its_record_comes() -> None:
    """Issue 26 (the chaos partition scenario): a holder cut off mid-run finished its run; the
    replica that took the lock over recorded it lost; the holder's record, written once it was
    back, turns the recent run (and the last run) into its real outcome, with a Normal Event."""
    f = fold()
    tick = at(0)
    f.observe(job_lease("billing", "nightly", "a", claimed=tick), at(1))
    lost = run_record("a", tick, "lost", error="its holder stopped renewing the lock")
    f.observe(job_lease("billing", "nightly", "b", run=lost, counts={"lost": 1}), at(20))
    assert reasons(f.take_notices()) == ["RunLost"]
    real = run_record("a", tick)
    f.observe(job_lease("billing", "nightly", run=real, counts={"succeeded": 1}), at(30))
    status = f.render(SPEC, at(31))
    (job,) = status["jobs"]
    assert [(r["holder"], r["outcome"]) for r in job["recentRuns"]] == [("a", "succeeded")]
    assert job["lastRun"]["outcome"] == "succeeded"
    assert job["counts"] == {"succeeded": 1, "failed": 0, "lost": 0}
    notices = f.take_notices()
    assert [(n.type, n.reason) for n in notices] == [("Normal", "RunCorrected")]
    assert "succeeded" in notices[0].message and "recorded it lost" in notices[0].message
    f.observe(job_lease("billing", "nightly", run=real, counts={"succeeded": 1}), at(32))
    assert f.take_notices() == []  # corrected once


def test_recent_runs_are_bounded() -> None:
    f = fold()
    for day in range(15):
        f.observe(
            job_lease("billing", "nightly", run=run_record("a", at(day * 86400))),
            at(day * 86400 + 9),
        )
    (job,) = f.render(parse_spec(group_object("billing", {"historyLimit": 4})), at(15 * 86400))[
        "jobs"
    ]
    assert len(job["recentRuns"]) == 4
    assert job["recentRuns"][-1]["tick"] == "2026-01-15T02:00:00Z"


def test_newest_run_across_jobs_is_the_summary() -> None:
    f = fold()
    f.observe(job_lease("billing", "a-job", run=run_record("x", at(0))), at(5))
    f.observe(job_lease("billing", "b-job", run=run_record("y", at(-100), "lost")), at(6))
    assert f.render(SPEC, at(7))["lastRunSummary"] == "a-job@x succeeded"


EVERY_NIGHT = {"name": "nightly", "schedule": "0 2 * * *", "graceSeconds": 600}


def test_run_missing_after_the_window_closes_and_alerts_once() -> None:
    spec = parse_spec(group_object("billing", {"jobs": [EVERY_NIGHT]}))
    f = fold()
    f.observe(job_lease("billing", "nightly", run=run_record("a", at(0))), at(10))
    day = 86400
    before = f.render(spec, at(day + 599))  # the next night's tick is still within its grace
    assert conditions(before)["RunMissing"]["status"] == "False"
    status = f.render(spec, at(day + 601))
    cond = conditions(status)["RunMissing"]
    assert cond["status"] == "True"
    assert "job nightly: no run for tick 2026-01-02T02:00:00Z" in cond["message"]
    assert status["jobs"][0]["missedTick"] == "2026-01-02T02:00:00Z"
    assert status["jobs"][0]["missedTicks"] == 1
    assert reasons(f.take_notices()) == ["RunMissing"]
    f.render(spec, at(day + 700))
    assert f.take_notices() == []  # once per missing tick
    later = f.render(spec, at(2 * day + 601))
    assert later["jobs"][0]["missedTicks"] == 2
    assert f.take_notices() == []  # still the same first missing tick
    f.observe(job_lease("billing", "nightly", "b", claimed=at(2 * day)), at(2 * day + 650))
    healed = f.render(spec, at(2 * day + 660))
    assert conditions(healed)["RunMissing"]["status"] == "False"
    assert "missedTick" not in healed["jobs"][0]


def test_run_missing_uses_the_job_time_zone() -> None:
    # 02:00 in Berlin is 01:00 UTC in winter.
    job = dict(EVERY_NIGHT, timezone="Europe/Berlin", graceSeconds=60)
    spec = parse_spec(group_object("billing", {"jobs": [job]}))
    f = fold()
    f.observe(job_lease("billing", "nightly", run=run_record("a", at(-3600))), at(0))  # 01:00Z
    status = f.render(spec, at(86400 - 3600 + 61))
    assert status["jobs"][0]["missedTick"] == "2026-01-02T01:00:00Z"
    assert status["jobs"][0]["expected"] == {
        "schedule": "0 2 * * *",
        "timezone": "Europe/Berlin",
        "graceSeconds": 60,
    }


def test_run_missing_for_a_job_never_seen_counts_from_the_object_creation() -> None:
    spec = parse_spec(group_object("billing", {"jobs": [EVERY_NIGHT]}))
    f = fold()
    created = at(3600)  # 03:00, after tonight's tick
    assert conditions(f.render(spec, at(7200), created=created))["RunMissing"]["status"] == "False"
    status = f.render(spec, at(86400 + 601), created=created)
    assert conditions(status)["RunMissing"]["status"] == "True"


def test_claimed_but_unfinished_tick_is_not_missing() -> None:
    spec = parse_spec(group_object("billing", {"jobs": [EVERY_NIGHT]}))
    f = fold()
    f.observe(job_lease("billing", "nightly", "a", claimed=at(0)), at(1))
    assert conditions(f.render(spec, at(3600)))["RunMissing"]["status"] == "False"


def test_a_claimed_tick_in_the_future_does_not_hide_missing_runs() -> None:
    """Hole 2 of issue 15: a fast wall clock or a hand edit claimed a tick days ahead; the job
    runs no more, and the operator must say so instead of 'runs on time'."""
    spec = parse_spec(group_object("billing", {"jobs": [EVERY_NIGHT]}))
    f = fold()
    day = 86400
    f.observe(job_lease("billing", "nightly", run=run_record("a", at(0))), at(10))
    f.observe(job_lease("billing", "nightly", "b", claimed=at(30 * day)), at(20))
    status = f.render(spec, at(day + 601))
    assert conditions(status)["RunMissing"]["status"] == "True"
    assert status["jobs"][0]["missedTick"] == "2026-01-02T02:00:00Z"

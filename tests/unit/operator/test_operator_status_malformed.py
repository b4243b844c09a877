"""The pure status fold on malformed and hostile input: bad Lease fields, unknown roles, a bad
spec, garbage to seed from, nameless bodies, huge strings; each reported or bounded, never
raised."""

from __future__ import annotations

from typing import Any

import pytest

from k8slease.names import ANN_FENCING_TOKEN, LABEL_GROUP, LABEL_ROLE
from k8slease.operator.groupspec import parse_spec
from tests.unit.operator.operator_helpers import (
    at,
    group_object,
    job_lease,
    leader_lease,
    run_record,
)
from tests.unit.operator.status_helpers import SPEC, conditions, fold, reasons


def test_malformed_holder_keeps_the_known_leader_and_says_why() -> None:
    f = fold()
    f.observe(leader_lease("billing", "a", renew=0), at(0))
    bad = leader_lease("billing", "a", renew=1)
    bad["spec"]["holderIdentity"] = 42
    bad["spec"]["renewTime"] = "yesterday"
    f.observe(bad, at(1))
    f.observe(bad, at(2))
    status = f.render(SPEC, at(3))
    assert status["leader"] == "a"
    assert "holderIdentity is not a string" in status["message"]
    assert "renewTime" in status["message"]
    cond = conditions(status)["Degraded"]
    assert (cond["status"], cond["reason"]) == ("True", "MalformedLease")
    assert reasons(f.take_notices()).count("MalformedLease") == 1  # once per distinct problem
    f.observe(leader_lease("billing", "a", renew=4), at(4))
    healed = f.render(SPEC, at(5))
    assert healed["message"] == "ok" and conditions(healed)["Degraded"]["status"] == "False"


def test_malformed_fencing_token_still_tracks_the_holder() -> None:
    f = fold()
    body = leader_lease("billing", "a", renew=0)
    body["metadata"]["annotations"][ANN_FENCING_TOKEN] = "minus-one"
    f.observe(body, at(0))
    f.observe({"metadata": {"name": "billing"}, "spec": "garbage"}, at(1))
    status = f.render(SPEC, at(2))
    assert status["leader"] == "a"
    assert "spec is not an object" in status["message"]


def test_lease_with_unknown_role_is_reported() -> None:
    f = fold()
    body = leader_lease("billing", "x", renew=0, name="billing-other")
    body["metadata"]["labels"][LABEL_ROLE] = "witness"
    f.observe(body, at(0))
    assert "label k8slease.io/role is 'witness'" in f.render(SPEC, at(1))["message"]


def test_malformed_spec_is_reported_not_raised() -> None:
    body = group_object(
        "billing",
        {
            "historyLimit": "many",
            "jobs": [
                {"name": "a", "schedule": "61 * * * *"},
                {"name": "b", "schedule": "0 2 * * *", "timezone": "Mars/Olympus"},
                {"name": "c", "schedule": "0 2 * * *"},
                {"name": "c", "schedule": "0 3 * * *"},
                "not-a-job",
            ],
        },
    )
    spec = parse_spec(body)
    assert [j.name for j in spec.jobs] == ["c"]
    assert len(spec.problems) == 5
    status = fold().render(spec, at(0))
    cond = conditions(status)["Degraded"]
    assert (cond["status"], cond["reason"]) == ("True", "MalformedSpec")
    assert "bad schedule '61 * * * *'" in status["message"]
    assert "unknown time zone 'Mars/Olympus'" in status["message"]
    assert parse_spec({"metadata": {"name": "x"}, "spec": [1]}).problems == (
        "spec is not an object",
    )


def test_seed_tolerates_garbage() -> None:
    f = fold()
    f.seed(
        {
            "failovers": "x",
            "jobs": [1, {"name": "j", "recentRuns": [{"tick": 1}]}],
            "conditions": [None],
            "candidates": [{"identity": 3}],
            "leader": 7,
        }
    )
    f.seed(None)
    f.render(SPEC, at(0))


@pytest.mark.parametrize("garbage", [{}, {"metadata": None}, {"metadata": {"name": 5}}])
def test_observe_ignores_nameless_bodies(garbage: dict[str, Any]) -> None:
    f = fold()
    f.observe(garbage, at(0))
    assert f.leases == {}
    assert LABEL_GROUP  # imported for readers: Leases are found by this label


def test_hostile_strings_in_leases_are_bounded_in_status() -> None:
    import json

    huge = "x" * 1_000_000
    f = fold()
    f.observe(leader_lease("billing", huge, renew=0), at(0))
    f.observe(leader_lease("billing", huge, renew=1), at(1))
    f.observe(job_lease("billing", "nightly", huge, run=run_record(huge, at(0), "failed")), at(2))
    status = f.render(SPEC, at(3))
    assert len(status["leader"]) == 253 and status["leader"].endswith("...")
    assert status["failovers"][0]["to"] == status["leader"]
    (job,) = status["jobs"]
    assert len(job["holder"]) == 253 and len(job["lastRun"]["holder"]) == 253
    assert len(json.dumps(status)) < 5_000
    assert all(len(n.message) <= 600 for n in f.take_notices())
    # the same (cut) identity keeps leading: no failover from comparing cut and uncut names
    f.observe(leader_lease("billing", huge, renew=4), at(4))
    assert len(f.render(SPEC, at(5))["failovers"]) == 1

"""Issues 23 and 26: whatever a Lease says, the operator's status fits the CRD's status schema.

The API server rejects a status patch (422) for a ``format: date-time`` string that is not RFC 3339
with a four-digit year, and for an integer beyond int64. The operator reads hostile Leases
(support/hostile.py), renders the status, and every rendered status must pass: the CRD's schema
(structure, enums), every date-time field, every integer (``lastRun`` and ``recentRuns`` too,
whose fields the schema leaves open). A status read back (``seed``, an operator restart) renders
valid again.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given
from hypothesis import strategies as st

from k8slease.kube.microtime import parse_microtime
from k8slease.lease.record import FENCING_TOKEN_MAX, lease_with_record, record_from_lease
from k8slease.lease.rules import grant_record
from k8slease.names import ANN_CLAIMED_TICK, ANN_FENCING_TOKEN
from k8slease.operator.fold import GroupFold
from k8slease.operator.groupspec import parse_spec
from k8slease.testing.validation import SchemaValidator
from tests.support.hostile import fuzz_settings, lease_json
from tests.unit.operator.operator_helpers import at, group_object, job_lease, leader_lease

CRD = Path(__file__).resolve().parents[3] / "charts/k8slease/crds/scheduledjobgroups.yaml"
STATUS_SCHEMA: dict[str, Any] = yaml.safe_load(CRD.read_text())["spec"]["versions"][0]["schema"][
    "openAPIV3Schema"
]["properties"]["status"]
VALIDATOR = SchemaValidator(STATUS_SCHEMA)
SPEC = parse_spec(group_object("billing", {"jobs": [{"name": "nightly", "schedule": "0 2 * * *"}]}))
DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})")
INT64 = range(-(2**63), 2**63)


def schema_problems(status: dict[str, Any]) -> list[str]:
    """Why the API server would refuse ``status`` (empty: it would store it)."""
    found = [str(cause) for cause in VALIDATOR.apply(dict(status))]
    _walk(status, STATUS_SCHEMA, "status", found)
    return found


def _walk(value: Any, schema: dict[str, Any] | None, path: str, found: list[str]) -> None:
    schema = schema or {}
    if isinstance(value, bool):
        return
    if isinstance(value, int) and value not in INT64:
        found.append(f"{path}: {value} does not fit int64")
    if isinstance(value, str) and schema.get("format") == "date-time":
        if not DATE_TIME.fullmatch(value):
            found.append(f"{path}: {value!r} is not an RFC 3339 date-time")
        else:
            try:
                parse_microtime(value)
            except ValueError as exc:
                found.append(f"{path}: {exc}")
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            sub = props.get(key, extra if isinstance(extra, dict) else None)
            _walk(item, sub, f"{path}.{key}", found)
    if isinstance(value, list):
        for i, item in enumerate(value):
            _walk(item, schema.get("items"), f"{path}[{i}]", found)


def _render_twice(fold: GroupFold, now_s: float) -> None:
    status = fold.render(SPEC, at(now_s))
    assert schema_problems(status) == []
    again = GroupFold("ns", "billing", first_seen=at(0))
    again.seed(status)
    assert schema_problems(again.render(SPEC, at(now_s + 1))) == []


@fuzz_settings(400)
@given(
    leases=st.lists(
        lease_json(name="billing", role="leader")
        | lease_json(name="billing.nightly", role="job", job="nightly"),
        min_size=1,
        max_size=4,
    )
)
def test_any_lease_content_renders_a_status_the_api_server_stores(
    leases: list[dict[str, Any]],
) -> None:
    fold = GroupFold("ns", "billing", first_seen=at(0))
    fold.observe(leader_lease("billing", "r0", renew=0), at(0))
    for i, lease in enumerate(leases):
        fold.observe(lease, at(i + 1))
    _render_twice(fold, 100)
    fold.take_notices()


def test_a_fencing_token_edited_to_int64_max_keeps_the_status_storable() -> None:
    """Issue 26's done-when: the next grant stays at 2^63-1 (the rules saturate), so the status
    that reports it is stored, and the grant reads back."""
    edited = leader_lease("billing", "ghost", renew=0, transitions=2**31 - 1)
    edited["metadata"]["annotations"][ANN_FENCING_TOKEN] = str(FENCING_TOKEN_MAX)
    before = record_from_lease(edited)
    assert before.problems == () and before.fencing_token == FENCING_TOKEN_MAX
    grant = grant_record(before, identity="r1", duration_seconds=15, now=at(60))
    assert grant.fencing_token == FENCING_TOKEN_MAX and grant.transitions == 0
    written = lease_with_record(edited, grant)
    assert record_from_lease(written) == grant
    fold = GroupFold("ns", "billing", first_seen=at(0))
    fold.observe(edited, at(0))
    fold.observe(written, at(61))
    status = fold.render(SPEC, at(62))
    assert status["fencingToken"] == FENCING_TOKEN_MAX and status["leader"] == "r1"
    assert schema_problems(status) == []


def test_a_tick_edited_to_year_one_is_written_zero_padded_or_refused() -> None:
    for text, shown in (
        ("0001-06-01T00:00:00Z", "0001-06-01T00:00:00Z"),  # accepted: zero-padded
        ("0001-01-01T00:00:00Z", None),  # at the boundary: refused, reported as malformed
    ):
        lease = job_lease("billing", "nightly")
        lease["metadata"]["annotations"][ANN_CLAIMED_TICK] = text
        fold = GroupFold("ns", "billing", first_seen=at(0))
        fold.observe(lease, at(1))
        status = fold.render(SPEC, at(2))
        assert schema_problems(status) == []
        (job,) = status["jobs"]
        assert job.get("claimedTick") == shown

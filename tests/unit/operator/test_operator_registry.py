"""The registry decides which API calls to make: coalesced status writes, creations, Events."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from k8slease.errors import ConfigError
from k8slease.names import LABEL_AUTO_CREATE, LABEL_GROUP
from k8slease.operator.groups import (
    LABEL_AUTO_CREATED,
    CreateObject,
    PatchStatus,
    PostEvent,
    Registry,
)
from k8slease.operator.settings import OperatorConfig
from tests.unit.operator.operator_helpers import (
    at,
    group_object,
    job_lease,
    leader_lease,
    run_record,
)

SETTINGS = OperatorConfig(
    min_write_interval=1.0, renew_write_interval=30.0, evaluate_interval=1000.0
)


def kinds(actions: list[Any]) -> list[str]:
    return [type(a).__name__ for a in actions]


def test_group_with_live_leases_and_no_object_is_created_once() -> None:
    reg = Registry(SETTINGS)
    reg.on_lease("ADDED", opted_in(leader_lease("billing", "a", renew=0)), at(0))
    (create,) = reg.plan(at(0), 0.0)
    assert isinstance(create, CreateObject)
    assert create.body["metadata"]["name"] == "billing"
    assert create.body["metadata"]["namespace"] == "ns"
    assert create.body["metadata"]["labels"][LABEL_AUTO_CREATED] == "true"
    assert create.body["spec"] == {}
    reg.on_lease("MODIFIED", opted_in(leader_lease("billing", "a", renew=2)), at(2))
    assert reg.plan(at(2), 2.0) == []  # creation in flight
    reg.create_failed(create, exists=False)
    assert reg.plan(at(3), 3.0) == []  # retried on the next evaluation pass, not in a loop
    assert kinds(reg.plan(at(3), 1001.0)) == ["CreateObject"]


def test_auto_create_can_be_turned_off_and_skips_dead_or_unnamable_groups() -> None:
    off = Registry(SETTINGS.with_changes(auto_create=False))
    off.on_lease("ADDED", opted_in(leader_lease("billing", "a", renew=0)), at(0))
    assert off.plan(at(0), 0.0) == []
    reg = Registry(SETTINGS.with_changes(auto_create_max_age=60.0, auto_create_groups=("*",)))
    reg.on_lease("ADDED", leader_lease("old", "", renew=-3600), at(0))
    reg.on_lease("ADDED", leader_lease("Bad_Name", "a", renew=0), at(0))
    assert reg.plan(at(0), 0.0) == []


def test_auto_created_object_names_a_custom_leader_lease() -> None:
    reg = Registry(SETTINGS)
    lease = leader_lease("billing", "a", renew=0, name="billing-election")
    reg.on_lease("ADDED", opted_in(lease), at(0))
    (create,) = reg.plan(at(0), 0.0)
    assert isinstance(create, CreateObject)
    assert create.body["spec"] == {"leaseName": "billing-election"}


def test_status_writes_are_coalesced_and_renewals_are_slow() -> None:
    reg = Registry(SETTINGS)
    reg.on_object("ADDED", group_object("billing"), at(0))
    reg.on_lease("ADDED", leader_lease("billing", "a", renew=0), at(0))
    actions = reg.plan(at(0), 0.0)
    patch = next(a for a in actions if isinstance(a, PatchStatus))
    assert patch.patch["leader"] == "a"
    # "a became leader" waits until a is seen renewing (an abandoned Lease gets no Event)
    assert [a for a in actions if isinstance(a, PostEvent)] == []
    reg.written(patch, 0.0)
    reg.on_lease("MODIFIED", opted_in(leader_lease("billing", "a", renew=2)), at(2))
    events = reg.plan(at(2), 2.0)
    assert [a.notice.reason for a in events if isinstance(a, PostEvent)] == ["LeaderElected"]
    assert kinds(events) == ["PostEvent"]
    # renewals only: nothing until renew_write_interval
    for t in (4, 6):
        reg.on_lease("MODIFIED", leader_lease("billing", "a", renew=t), at(t))
        assert reg.plan(at(t), float(t)) == []
    # a failover matters: written, but not within min_write_interval of the last write
    reg.on_lease("MODIFIED", leader_lease("billing", "b", renew=30, transitions=1), at(30))
    reg.on_lease("MODIFIED", leader_lease("billing", "c", renew=31, transitions=2), at(30.2))
    written = [a for a in reg.plan(at(30.2), 30.2) if isinstance(a, PatchStatus)]
    assert len(written) == 1 and written[0].status["leader"] == "c"
    reg.written(written[0], 30.2)
    reg.on_lease("MODIFIED", leader_lease("billing", "d", renew=32, transitions=3), at(30.5))
    assert reg.plan(at(30.5), 30.5) == []  # too soon; stays dirty
    later = [a for a in reg.plan(at(31.3), 31.3) if isinstance(a, PatchStatus)]
    assert later[0].status["leader"] == "d"
    reg.written(later[0], 31.3)
    # renewal-only changes go out once renew_write_interval passed
    reg.on_lease("MODIFIED", leader_lease("billing", "d", renew=70, transitions=3), at(70))
    (renewal,) = reg.plan(at(70), 70.0)
    assert isinstance(renewal, PatchStatus)
    assert set(renewal.patch) <= {"lastRenewTime", "expiryTime", "candidates"}


def test_events_name_the_group_object() -> None:
    reg = Registry(SETTINGS)
    reg.on_object("ADDED", group_object("billing", uid="u-9"), at(0))
    reg.on_lease("ADDED", job_lease("billing", "nightly", run=run_record("a", at(0))), at(1))
    reg.plan(at(1), 1.0)
    failed = run_record("a", at(86400), "failed")
    reg.on_lease("MODIFIED", job_lease("billing", "nightly", run=failed), at(86401))
    events = [a for a in reg.plan(at(86401), 86401.0) if isinstance(a, PostEvent)]
    assert [e.notice.reason for e in events] == ["RunFailed"]
    assert events[0].involved["uid"] == "u-9"
    assert events[0].involved["kind"] == "ScheduledJobGroup"


def test_periodic_evaluation_raises_a_missing_run_without_lease_changes() -> None:
    reg = Registry(SETTINGS.with_changes(evaluate_interval=10.0))
    spec = {"jobs": [{"name": "nightly", "schedule": "0 2 * * *", "graceSeconds": 60}]}
    reg.on_object("ADDED", group_object("billing", spec), at(0))
    reg.on_lease("ADDED", job_lease("billing", "nightly", run=run_record("a", at(0))), at(1))
    first = reg.plan(at(1), 1.0)
    for action in first:
        if isinstance(action, PatchStatus):
            reg.written(action, 1.0)
    assert reg.plan(at(5), 5.0) == []
    actions = reg.plan(at(86400 + 61), 20.0)
    patch = next(a for a in actions if isinstance(a, PatchStatus))
    cond = {c["type"]: c for c in patch.status["conditions"]}["RunMissing"]
    assert cond["status"] == "True"
    assert any(isinstance(a, PostEvent) and a.notice.type == "Warning" for a in actions)


def test_object_recreated_or_respecced() -> None:
    reg = Registry(SETTINGS)
    reg.on_lease("ADDED", opted_in(leader_lease("billing", "a", renew=0)), at(0))
    reg.on_object("ADDED", group_object("billing"), at(0))
    patch = next(a for a in reg.plan(at(0), 0.0) if isinstance(a, PatchStatus))
    reg.written(patch, 0.0)
    reg.on_object("MODIFIED", group_object("billing", {"historyLimit": 5}, generation=2), at(5))
    (again,) = [a for a in reg.plan(at(5), 5.0) if isinstance(a, PatchStatus)]
    assert again.patch == {"observedGeneration": 2}
    reg.on_object("DELETED", group_object("billing"), at(6))
    assert kinds(reg.plan(at(6), 6.0)) == ["CreateObject"]
    reg.on_object("ADDED", group_object("billing", uid="uid-2"), at(7))
    fresh = next(a for a in reg.plan(at(7), 7.0) if isinstance(a, PatchStatus))
    assert fresh.status["leader"] == "a" and fresh.patch["leader"] == "a"


def test_object_without_leases_says_so() -> None:
    reg = Registry(SETTINGS)
    reg.on_object("ADDED", group_object("ghost", {"leaseName": "nope"}), at(0))
    (patch,) = [a for a in reg.plan(at(0), 0.0) if isinstance(a, PatchStatus)]
    assert patch.status["message"].startswith("Lease ns/nope not found")


def test_write_failure_retries_later_and_gone_object_is_forgotten() -> None:
    reg = Registry(SETTINGS)
    reg.on_object("ADDED", group_object("billing"), at(0))
    (patch,) = [a for a in reg.plan(at(0), 0.0) if isinstance(a, PatchStatus)]
    reg.write_failed(patch, 0.0)
    assert reg.plan(at(0.5), 0.5) == []
    assert kinds(reg.plan(at(1.1), 1.1)) == ["PatchStatus"]
    reg.write_failed(patch, 1.1, gone=True)
    assert reg.plan(at(3), 3.0) == []


def test_failed_writes_back_off_exponentially_with_jitter_up_to_a_cap() -> None:
    import itertools
    import random

    settings = SETTINGS.with_changes(
        min_write_interval=0.1, write_backoff_initial=1.0, write_backoff_max=16.0
    )
    reg = Registry(settings, rng=random.Random(7))
    reg.on_object("ADDED", group_object("billing"), at(0))
    mono = 0.0
    attempts: list[float] = []
    while mono < 120.0:  # the API server refuses every write for two minutes
        for action in reg.plan(at(mono), mono):
            if isinstance(action, PatchStatus):
                attempts.append(mono)
                reg.write_failed(action, mono)
        mono = round(mono + 0.05, 2)
    delays = [b - a for a, b in itertools.pairwise(attempts)]
    # doubling from 1 s, each between half and all of its ceiling, then capped at 16 s
    for n, delay in enumerate(delays, start=1):
        ceiling = min(16.0, 2.0 ** (n - 1))
        assert ceiling / 2 - 0.05 <= delay <= ceiling + 0.05, (n, delay)
    assert 10 <= len(attempts) <= 20  # without backoff: one per min_write_interval, 1200
    assert len(set(delays[-4:])) > 1  # jitter: capped delays still differ
    # one success resets the backoff
    (patch,) = [a for a in reg.plan(at(mono + 20), mono + 20) if isinstance(a, PatchStatus)]
    reg.written(patch, mono + 20)
    assert reg.backoff(1) <= 1.0


def test_backoff_settings_are_validated() -> None:
    with pytest.raises(ConfigError, match="write_backoff_max"):
        OperatorConfig(write_backoff_initial=5.0, write_backoff_max=1.0)
    with pytest.raises(ConfigError, match="write_backoff_initial"):
        OperatorConfig(write_backoff_initial=0)


def test_unlabelled_leases_are_ignored() -> None:
    reg = Registry(SETTINGS)
    body = leader_lease("billing", "a", renew=0)
    del body["metadata"]["labels"]
    assert reg.on_lease("ADDED", body, at(0)) is None
    assert reg.on_object("ADDED", {"metadata": {}}, at(0)) is None


def test_settings_validation_and_environment() -> None:
    with pytest.raises(ConfigError):
        OperatorConfig(flush_interval=0)
    with pytest.raises(ConfigError):
        OperatorConfig(namespaces=("a",), all_namespaces=True)
    env = {
        "K8SLEASE_OPERATOR_AUTO_CREATE": "false",
        "K8SLEASE_OPERATOR_NAMESPACES": "a, b",
        "K8SLEASE_OPERATOR_EVALUATE_INTERVAL": "2.5",
        "K8SLEASE_OPERATOR_MAX_CONCURRENCY": "3",
    }
    parsed = OperatorConfig.from_env(env)
    assert parsed.auto_create is False
    assert parsed.namespaces == ("a", "b")
    assert parsed.evaluate_interval == 2.5 and parsed.max_concurrency == 3
    with pytest.raises(ConfigError):
        OperatorConfig.from_env({"K8SLEASE_OPERATOR_FLUSH_INTERVAL": "-1"})


def opted_in(lease: dict[str, Any]) -> dict[str, Any]:
    lease["metadata"]["labels"][LABEL_AUTO_CREATE] = "true"
    return lease


def test_only_groups_that_opted_in_or_are_declared_are_created(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Any app that may write Leases could make the operator create objects at will (issue 27):
    a group label alone is not enough."""
    reg = Registry(SETTINGS.with_changes(auto_create_groups=("declared", "other/x", "ns2/*")))
    with caplog.at_level(logging.WARNING, logger="k8slease.operator"):
        reg.on_lease("ADDED", leader_lease("plain", "a", renew=0), at(0))
        reg.on_lease("ADDED", opted_in(leader_lease("labelled", "a", renew=0)), at(0))
        reg.on_lease("ADDED", leader_lease("declared", "a", renew=0), at(0))
        reg.on_lease("ADDED", leader_lease("x", "a", renew=0), at(0))  # declared for "other" only
        reg.on_lease("ADDED", leader_lease("y", "a", renew=0, namespace="ns2"), at(0))
        created = sorted(a.key for a in reg.plan(at(0), 0.0) if isinstance(a, CreateObject))
        assert created == [("ns", "declared"), ("ns", "labelled"), ("ns2", "y")]
        reg.plan(at(1), 2000.0)  # evaluated again: declined again, but said only once
    declined = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(declined) == 2, declined
    assert all("not creating a ScheduledJobGroup" in m and "did not opt in" in m for m in declined)
    assert {"group=plain" in m or "group=x" in m for m in declined} == {True}


def test_auto_creation_is_capped_per_namespace(caplog: pytest.LogCaptureFixture) -> None:
    reg = Registry(SETTINGS.with_changes(auto_create_groups=("*",), auto_create_limit=3))
    for i in range(5):
        reg.on_lease("ADDED", leader_lease(f"g{i}", "a", renew=0), at(0))
    reg.on_lease("ADDED", leader_lease("elsewhere", "a", renew=0, namespace="other"), at(0))
    with caplog.at_level(logging.WARNING, logger="k8slease.operator"):
        actions = reg.plan(at(0), 0.0)
    created = sorted(a.key for a in actions if isinstance(a, CreateObject))
    assert created == [("ns", "g0"), ("ns", "g1"), ("ns", "g2"), ("other", "elsewhere")]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2 and all("--auto-create-limit 3" in m for m in warnings)
    # objects that exist count as well (after a restart nothing is "creating")
    fresh = Registry(SETTINGS.with_changes(auto_create_groups=("*",), auto_create_limit=1))
    made = group_object("g0")
    made["metadata"]["labels"] = {LABEL_AUTO_CREATED: "true"}
    fresh.on_object("ADDED", made, at(0))
    fresh.on_lease("ADDED", leader_lease("g1", "a", renew=0), at(0))
    assert not [a for a in fresh.plan(at(0), 0.0) if isinstance(a, CreateObject)]


@pytest.mark.parametrize("deletion_seen", [True, False])
def test_a_recreated_object_starts_from_its_own_empty_status(deletion_seen: bool) -> None:
    """A ScheduledJobGroup deleted and created again carries none of the deleted object's history
    (failovers, candidates, recent runs, conditions): its status is what the Leases show now, its
    conditions start when it was created, as for an object the operator has just found."""
    reg = Registry(SETTINGS)
    reg.on_object("ADDED", group_object("billing"), at(0))
    reg.on_lease("ADDED", leader_lease("billing", "a", renew=0), at(0))
    reg.on_lease("MODIFIED", leader_lease("billing", "b", renew=20, transitions=1), at(20))
    day = 86400
    for n, holder in enumerate(("a", "a", "b")):
        run = run_record(holder, at(n * day), "failed" if n == 1 else "succeeded")
        reg.on_lease("MODIFIED", job_lease("billing", "nightly", run=run), at(n * day + 5))
    b = leader_lease("billing", "b", acquire=20, renew=2 * day + 6, transitions=1)
    reg.on_lease("MODIFIED", b, at(2 * day + 6))
    old = next(a for a in reg.plan(at(2 * day + 6), 1.0) if isinstance(a, PatchStatus)).status
    assert len(old["candidates"]) == 2 and len(old["jobs"][0]["recentRuns"]) == 3
    if deletion_seen:
        reg.on_object("DELETED", group_object("billing"), at(2 * day + 7))
    recreated = at(2 * day + 8)
    reg.on_object("ADDED", group_object("billing", uid="uid-2", created=recreated), recreated)
    actions = reg.plan(recreated, 100.0)
    (patch,) = [a for a in actions if isinstance(a, PatchStatus)]
    status = patch.status
    assert status["leader"] == "b"
    assert [c["identity"] for c in status["candidates"]] == ["b"]
    assert [(f["to"], f["reason"]) for f in status["failovers"]] == [("b", "first")]
    (job,) = status["jobs"]
    assert [r["holder"] for r in job["recentRuns"]] == ["b"]
    assert job["counts"] == {"succeeded": 0, "failed": 0, "lost": 0}  # as its Lease says
    times = {c["type"]: c["lastTransitionTime"] for c in status["conditions"]}
    since = "2026-01-03T02:00:08Z"  # its creation
    assert times == dict.fromkeys(("Degraded", "LeaderElected", "RunMissing"), since)
    assert not [a for a in actions if isinstance(a, PostEvent)]  # nothing new happened


def test_a_lease_relabelled_into_another_group_leaves_the_first() -> None:
    """A label-selector watch reports a Lease whose group label was edited as modified, not
    deleted: the group it left must not keep showing it (or its holder)."""
    reg = Registry(SETTINGS)
    reg.on_object("ADDED", group_object("billing"), at(0))
    lease = job_lease("billing", "nightly", "a")
    reg.on_lease("ADDED", lease, at(0))
    billing = reg.folds[("ns", "billing")]
    assert "billing.nightly" in billing.leases and billing.jobs["nightly"].holder == "a"
    moved = {
        **lease,
        "metadata": {
            **lease["metadata"],
            "labels": {**lease["metadata"]["labels"], LABEL_GROUP: "reports"},
        },
    }
    reg.dirty.clear()
    assert reg.on_lease("MODIFIED", moved, at(1)) == ("ns", "reports")
    assert "billing.nightly" not in billing.leases
    assert billing.jobs["nightly"].holder == "" and not billing.jobs["nightly"].lease_present
    assert "billing.nightly" in reg.folds[("ns", "reports")].leases
    assert reg.dirty == {("ns", "billing"), ("ns", "reports")}
    # deleted later: gone from the group it was in, nothing more for the first
    reg.dirty.clear()
    reg.on_lease("DELETED", moved, at(2))
    assert "billing.nightly" not in reg.folds[("ns", "reports")].leases
    assert reg.dirty == {("ns", "reports")}

"""Example ScheduledJobGroups are valid against the CRD's schema; broken ones are rejected."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from charts import render_manifests as rm

EXAMPLES_FILE = rm.MANIFESTS_DIR / "examples" / "scheduledjobgroups.yaml"


def _examples() -> list[dict[str, Any]]:
    examples: list[dict[str, Any]] = rm.load_documents(EXAMPLES_FILE.read_text())
    return examples


def _base() -> dict[str, Any]:
    return copy.deepcopy(next(e for e in _examples() if e["spec"].get("jobs")))


def _errors(obj: dict[str, Any]) -> list[str]:
    return [error.message for error in rm.crd_validator().iter_errors(obj)]


def test_examples_file_has_examples() -> None:
    kinds = {(e["apiVersion"], e["kind"]) for e in _examples()}
    assert kinds == {("k8slease.io/v1alpha1", "ScheduledJobGroup")}
    assert len(_examples()) >= 2


@pytest.mark.parametrize("index", range(2))
def test_examples_are_valid(index: int) -> None:
    assert _errors(_examples()[index]) == []


def test_crd_is_the_one_the_package_reads() -> None:
    """The chart's crds/ file is the single definition; the package symlinks it."""
    package_crd = rm.REPO_ROOT / "k8slease" / "operator" / "crd.yaml"
    chart_crd = rm.CHART_DIR / "crds" / "scheduledjobgroups.yaml"
    assert package_crd.resolve() == chart_crd.resolve()
    (crd,) = rm.crd_objects()
    assert crd["metadata"]["name"] == "scheduledjobgroups.k8slease.io"
    assert crd["spec"]["scope"] == "Namespaced"


def _set(path: str, value: Any) -> dict[str, Any]:
    obj = _base()
    *parents, last = path.split(".")
    target: Any = obj
    for part in parents:
        target = target[int(part)] if part.isdigit() else target[part]
    target[last] = value
    return obj


BAD_EXAMPLES: dict[str, tuple[dict[str, Any], str]] = {
    "no spec": ({"apiVersion": "k8slease.io/v1alpha1", "kind": "ScheduledJobGroup"}, "spec"),
    "historyLimit too big": (_set("spec.historyLimit", 1000), "1000"),
    "historyLimit zero": (_set("spec.historyLimit", 0), "0"),
    "historyLimit a string": (_set("spec.historyLimit", "20"), "'20'"),
    "job without schedule": (_set("spec.jobs", [{"name": "x"}]), "schedule"),
    "job without name": (_set("spec.jobs", [{"schedule": "* * * * *"}]), "name"),
    "cron with four fields": (_set("spec.jobs.0.schedule", "*/5 * * *"), "*/5 * * *"),
    "upper-case job name": (_set("spec.jobs.0.name", "Invoice"), "Invoice"),
    "negative grace": (_set("spec.jobs.0.graceSeconds", -1), "-1"),
    "lease name with a slash": (_set("spec.leaseName", "a/b"), "a/b"),
    "unknown spec field": (_set("spec.leaderName", "x"), "leaderName"),
    "unknown job field": (_set("spec.jobs.0.command", "run"), "command"),
}


@pytest.mark.parametrize("case", sorted(BAD_EXAMPLES))
def test_bad_scheduledjobgroups_are_rejected(case: str) -> None:
    obj, mention = BAD_EXAMPLES[case]
    errors = _errors(obj)
    assert errors, f"{case}: accepted"
    assert any(mention in error for error in errors), errors


def test_status_accepts_what_the_operator_writes() -> None:
    obj = _base()
    obj["status"] = {
        "leader": "billing-app-7d9c-abcde",
        "leaderSince": "2025-01-01T00:00:00Z",
        "transitions": 3,
        "lastFailoverTime": "2025-01-01T00:00:05Z",
        "lastRunSummary": "invoice-run@billing-app-7d9c-abcde succeeded",
        "observedGeneration": 2,
        "failovers": [{"from": "a", "to": "b"}],  # preserved unknown field
    }
    assert _errors(obj) == []
    obj["status"]["transitions"] = "three"
    assert _errors(obj)

"""The CRD the operator reads is the chart's file, and matches what the operator writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest

from k8slease.names import CRD_GROUP, CRD_KIND, CRD_PLURAL, CRD_VERSION
from k8slease.operator.command import settings_from_args
from k8slease.operator.crd import CRD_NAME, crd_manifest
from k8slease.operator.fold import GroupFold
from k8slease.operator.groupspec import parse_spec
from tests.unit.operator.operator_helpers import (
    at,
    group_object,
    job_lease,
    leader_lease,
    run_record,
)

REPO = Path(__file__).resolve().parents[3]


def version() -> dict[str, Any]:
    (served,) = crd_manifest()["spec"]["versions"]
    return dict(served)


def test_package_reads_the_chart_file() -> None:
    package = REPO / "k8slease" / "operator" / "crd.yaml"
    assert package.is_symlink()
    assert package.resolve() == (REPO / "charts/k8slease/crds/scheduledjobgroups.yaml").resolve()


def test_names_match_the_constants() -> None:
    crd = crd_manifest()
    assert crd["metadata"]["name"] == CRD_NAME == f"{CRD_PLURAL}.{CRD_GROUP}"
    assert crd["spec"]["group"] == CRD_GROUP and crd["spec"]["scope"] == "Namespaced"
    names = crd["spec"]["names"]
    assert (names["kind"], names["plural"], names["shortNames"]) == (CRD_KIND, CRD_PLURAL, ["sjg"])
    assert version()["name"] == CRD_VERSION and version()["subresources"] == {"status": {}}


def test_printer_columns() -> None:
    columns = {c["name"]: c for c in version()["additionalPrinterColumns"]}
    assert columns["Leader"]["jsonPath"] == ".status.leader"
    assert columns["Transitions"]["jsonPath"] == ".status.transitions"
    assert columns["Last Failover"]["type"] == "date"
    assert columns["Last Failover"]["jsonPath"] == ".status.lastFailoverTime"
    assert columns["Age"]["jsonPath"] == ".metadata.creationTimestamp"


def test_rendered_status_validates_against_the_status_schema() -> None:
    schema = version()["schema"]["openAPIV3Schema"]["properties"]["status"]
    spec_body = {"jobs": [{"name": "nightly", "schedule": "0 2 * * *", "graceSeconds": 60}]}
    spec = parse_spec(group_object("billing", spec_body))
    fold = GroupFold("ns", "billing", first_seen=at(0))
    fold.observe(leader_lease("billing", "a", renew=0), at(0))
    fold.observe(leader_lease("billing", "", renew=0), at(1))
    fold.observe(leader_lease("billing", "b", renew=2, transitions=1), at(2))
    fold.observe(
        job_lease("billing", "nightly", run=run_record("b", at(0), "failed", error="x")), at(3)
    )
    status = fold.render(spec, at(86400 * 2))
    status["observedGeneration"] = 1
    jsonschema.validate(status, schema, format_checker=jsonschema.FormatChecker())
    assert set(status) <= set(schema["properties"])


def test_cli_arguments() -> None:
    s = settings_from_args(["--namespace", "a", "-n", "b", "--no-auto-create", "--kubeconfig", "k"])
    assert s.namespaces == ("a", "b") and not s.auto_create and s.kubeconfig == "k"
    s = settings_from_args(["--all-namespaces", "--evaluate-interval", "2"])
    assert s.all_namespaces and s.evaluate_interval == 2
    with pytest.raises(SystemExit):
        settings_from_args(["--namespace", "a", "--all-namespaces"])


def test_cli_accepts_the_chart_arguments() -> None:
    s = settings_from_args(
        ["--standalone", "--namespace=apps", "--liveness=http://0.0.0.0:8080/healthz", "--quiet"]
    )
    assert s.namespaces == ("apps",) and s.log_level == "WARNING"
    assert s.liveness_endpoint == "http://0.0.0.0:8080/healthz"

"""The ``k8slease`` command: dispatch, and ``status`` reading what replicas wrote."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from kubernetes import client

from k8slease import Jobs
from k8slease.cli.main import main
from k8slease.testing.pytest_plugin import ExternalCluster
from k8slease.testing.server import APIServer
from tests.support.processes import run_module


def test_dispatch_help_and_unknown_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "status" in capsys.readouterr().out
    assert main([]) == 2
    assert main(["bogus"]) == 2
    assert "unknown command 'bogus'" in capsys.readouterr().err


def test_status_shows_leases_and_last_runs_without_the_operator(
    k8s_apiserver: APIServer | ExternalCluster,
    k8s_api_client: client.ApiClient,
    k8s_namespace: str,
) -> None:
    jobs = Jobs("ledger", namespace=k8s_namespace, identity="ledger-0", api_client=k8s_api_client)

    @jobs.cron("0 3 * * *", lock_at_most_for=60)
    def close_books(ctx: object) -> None:
        raise RuntimeError("bank feed late")

    with jobs:
        assert jobs.fire("close-books", datetime(2026, 11, 30, 3, tzinfo=UTC)) == "failed"
    result = run_module(
        "k8slease", "status", "ledger", "-n", k8s_namespace,
        "--kubeconfig", str(k8s_apiserver.kubeconfig),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert f"GROUP ledger (namespace {k8s_namespace})" in out
    row = next(line for line in out.splitlines() if line.startswith("close-books"))
    assert "2026-11-30 03:00:00" in row and "ledger-0" in row and "failed" in row
    assert row.rstrip().endswith("0/1/0")
    assert "is the operator running?" in out


def test_status_says_so_when_there_is_nothing_to_show(
    k8s_apiserver: APIServer | ExternalCluster, k8s_namespace: str
) -> None:
    result = run_module(
        "k8slease", "status", "-n", k8s_namespace, "--kubeconfig", str(k8s_apiserver.kubeconfig)
    )
    assert result.returncode == 0
    assert f"no k8slease Leases in namespace {k8s_namespace}" in result.stdout

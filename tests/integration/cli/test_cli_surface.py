"""What a user meets at the command line: --version, a help text for every option (no raw
reStructuredText), clean one-line errors instead of tracebacks, and who leads once a Lease
expired."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from importlib import metadata
from pathlib import Path

import pytest
from kubernetes import client

from k8slease.cli import demo, status
from k8slease.cli.main import main, missing_extra_hint
from k8slease.lease.record import LeaseRecord, new_lease
from k8slease.lease.transport import LeaseTransport
from k8slease.names import LABEL_GROUP, LABEL_ROLE, ROLE_LEADER
from k8slease.operator import command as operator_run
from k8slease.testing import serve
from k8slease.testing.pytest_plugin import ExternalCluster
from k8slease.testing.server import APIServer
from tests.support.processes import run_module

PARSERS = {
    "operator": operator_run._parser,
    "status": status.build_parser,
    "demo": demo.build_parser,
    "apiserver": serve.build_parser,
}


def k8slease(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_module("k8slease", *args, env=env)


def test_version_is_the_installed_distributions(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"k8slease {metadata.version('k8slease')}\n"
    assert main(["-V"]) == 0
    assert "--version" in k8slease("--help").stdout


@pytest.mark.parametrize("command", sorted(PARSERS))
def test_every_option_has_help_and_no_rst(command: str) -> None:
    parser = PARSERS[command]()
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        assert action.help and action.help.strip(), f"{command} {action.option_strings}"
    text = parser.format_help()
    assert "``" not in text and ":class:" not in text and ":func:" not in text, text


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["status", "--kubeconfig", "BAD"], {}, "cannot load a Kubernetes configuration from"),
        (["status", "--kubeconfig", "/nonexistent"], {}, "cannot load a Kubernetes configuration"),
        (
            ["status", "--kubeconfig", "/nonexistent"],
            {"POD_NAMESPACE": "Bad_NS!"},
            "POD_NAMESPACE='Bad_NS!' is not a namespace name",
        ),
        (["status", "-n", "No/Such"], {}, "--namespace='No/Such' is not a namespace name"),
        (["demo", "--kubeconfig", "BAD"], {}, "cannot load a Kubernetes configuration from"),
        (["demo", "-n", "Bad_NS"], {}, "--namespace='Bad_NS' is not a namespace name"),
    ],
)
def test_bad_input_gives_one_line_not_a_traceback(
    tmp_path: Path, args: list[str], env: dict[str, str], message: str
) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("garbage: [\n")
    result = k8slease(*[str(bad) if a == "BAD" else a for a in args], env=env)
    assert result.returncode in (1, 2)
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_status_names_a_missing_namespace(k8s_apiserver: APIServer | ExternalCluster) -> None:
    result = k8slease("status", "-n", "no-such-ns", "--kubeconfig", str(k8s_apiserver.kubeconfig))
    assert result.returncode == 1
    assert "namespace 'no-such-ns' does not exist" in result.stderr
    assert "Traceback" not in result.stderr


def test_status_shows_no_leader_once_the_lease_expired(
    k8s_apiserver: APIServer | ExternalCluster,
    k8s_api_client: client.ApiClient,
    k8s_namespace: str,
) -> None:
    renewed = datetime.now(UTC) - timedelta(seconds=75)
    record = LeaseRecord("replica-0-gone", 15, renewed, renewed, 0, 1)
    labels = {LABEL_GROUP: "stale", LABEL_ROLE: ROLE_LEADER}
    LeaseTransport(k8s_api_client, k8s_namespace).create(
        new_lease("stale", k8s_namespace, record, labels=labels)
    )
    result = k8slease(
        "status", "stale", "-n", k8s_namespace, "--kubeconfig", str(k8s_apiserver.kubeconfig)
    )
    # expired 60 s before the command started, plus however long the command took to get there
    longest = 60 + (datetime.now(UTC) - renewed - timedelta(seconds=75)).total_seconds()
    assert result.returncode == 0, result.stderr
    row = next(line for line in result.stdout.splitlines() if line.startswith("stale "))
    assert "(none)" in row and "replica-0-gone" not in row
    found = re.search(r"no leader: the Lease of replica-0-gone expired (\d+)s ago", result.stdout)
    assert found, result.stdout
    assert 60 <= int(found.group(1)) <= longest + 1
    assert "this machine's clock" in result.stdout


def test_status_prefers_the_operators_judgment_of_expiry() -> None:
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    judged = {"leader": "", "expiredLeader": "a", "leaderExpiredTime": "2026-11-30T11:58:30Z"}
    note = status.expiry_note("a", now, 15, judged, now)  # renewTime looks fresh: clocks differ
    assert note == (
        "no leader: the Lease of a expired 90s ago "
        "(judged by the operator: seen unchanged for its lease duration)"
    )
    live = {"leader": "a"}  # believed while the Lease is at most STALE_STATUS_AFTER past
    renewed = now - timedelta(seconds=15 + status.STALE_STATUS_AFTER)
    assert status.expiry_note("a", renewed, 15, live, now) is None
    stale = status.expiry_note("a", now - timedelta(hours=1), 15, live, now)
    assert stale is not None and stale.startswith("no leader: the Lease of a expired 59m45s ago")
    assert "the operator's status still names it leader: stale" in stale
    assert status.expiry_note("", now - timedelta(hours=1), 15, {}, now) is None


def test_a_missing_extra_is_named_with_its_install_line() -> None:
    hint = missing_extra_hint(
        "operator", ModuleNotFoundError("No module named 'kopf'", name="kopf")
    )
    assert hint == (
        "k8slease operator: the Python package 'kopf' is not installed; "
        "install it with: pip install 'k8slease[operator]'"
    )
    other = ModuleNotFoundError("No module named 'nope'", name="nope")
    assert missing_extra_hint("operator", other) is None


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"POD_NAMESPACE": "Bad_NS"}, "POD_NAMESPACE='Bad_NS' is not a namespace name"),
        ({"HEALTH_PORT": "eighty"}, "--health-port: invalid int value: 'eighty'"),
        ({"LOG_LEVEL": "loud"}, "LOG_LEVEL: 'loud' is not a log level"),
    ],
)
def test_demo_app_rejects_bad_environment_without_a_traceback(
    k8s_apiserver: APIServer | ExternalCluster, env: dict[str, str], message: str
) -> None:
    result = run_module(
        "k8slease.cli.demoapp.billing_app", "--kubeconfig", str(k8s_apiserver.kubeconfig), env=env
    )
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.admission_refuses("lease-bounds: a holder identity with control characters")
def test_status_prints_no_control_character_from_a_lease(
    k8s_apiserver: APIServer | ExternalCluster,
    k8s_api_client: client.ApiClient,
    k8s_namespace: str,
) -> None:
    """A holder identity is foreign input: escape codes, NUL and injected lines are shown
    escaped, and a 100 kB identity is cut (issue 27)."""
    now = datetime.now(UTC)
    hostile = "\x1b[2J\x1b]0;owned\x07x\nGROUP forged (namespace x)\x00" + "h" * 100_000
    record = LeaseRecord(hostile, 3600, now, now, 0, 1)
    labels = {LABEL_GROUP: "hostile", LABEL_ROLE: ROLE_LEADER}
    LeaseTransport(k8s_api_client, k8s_namespace).create(
        new_lease("hostile", k8s_namespace, record, labels=labels)
    )
    result = k8slease(
        "status", "hostile", "-n", k8s_namespace, "--kubeconfig", str(k8s_apiserver.kubeconfig)
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert all(line.isprintable() for line in lines), result.stdout[:500]
    assert not any(line.startswith("GROUP forged") for line in lines)
    row = next(line for line in lines if line.startswith("hostile "))
    assert "\\x1b[2J\\x1b]0;owned\\x07x\\nGROUP forged" in row
    assert len(row) < 400 and "chars)" in row


def test_the_demo_names_a_replica_that_ended_on_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A replica that dies (a traceback at start) fails the story at once, naming it and where
    its log (with the traceback: stderr goes there too) is, instead of a later time-out."""
    story = demo.Demo(demo.build_parser().parse_args(["--quick"]))
    story.workdir = tmp_path
    crashed = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"], text=True)
    stopped = subprocess.Popen([sys.executable, "-c", "raise SystemExit(0)"], text=True)
    crashed.wait(timeout=30)
    stopped.wait(timeout=30)
    story.replicas = [demo.Replica("replica-0", crashed), demo.Replica("replica-1", stopped)]
    story.replicas[1].alive = False  # told to stop: its exit is expected
    assert not story.wait_for("a leader", lambda: False, timeout=0.2)
    assert story.failures[0] == f"replica-0 exited with status 3 (see {tmp_path}/replica-0.log)"
    assert not any("replica-1" in failure for failure in story.failures)
    assert "!! replica-0 exited with status 3" in capsys.readouterr().out

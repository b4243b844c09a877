"""Errors that came late or differed (issue 21): a broken kubeconfig is reported where the
elector or ``Jobs`` is made (not at ``start()``), ``status`` and ``operator`` exit 2 alike for
it, ``k8slease apiserver --help`` prints help (with the extra to install) in a core install, and
the operator takes the ``--log-level`` docs/operations.md names."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest

from k8slease import Jobs, LeaderElector
from k8slease.cli import main as cli_main
from k8slease.errors import ConfigError

BROKEN = "apiVersion: v1\nkind: Config\ncurrent-context: nowhere\ncontexts: []\n"


@pytest.fixture
def broken_kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(BROKEN)
    monkeypatch.setenv("KUBECONFIG", str(path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    return path


def test_a_broken_kubeconfig_is_reported_where_the_elector_is_made(
    broken_kubeconfig: Path,
) -> None:
    with pytest.raises(ConfigError, match="cannot load a Kubernetes configuration"):
        LeaderElector("billing", namespace="default", identity="a")
    with pytest.raises(ConfigError, match="cannot load a Kubernetes configuration"):
        Jobs("billing", namespace="default", identity="a")


def test_no_configuration_at_all_still_lets_objects_be_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    LeaderElector("billing", namespace="default", identity="a")  # the error comes at start()
    Jobs("billing", namespace="default", identity="a")


def test_status_and_operator_exit_2_alike_for_a_broken_kubeconfig(
    broken_kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("kopf")
    from k8slease.cli import status
    from k8slease.operator import command as run

    assert status.main(["--kubeconfig", str(broken_kubeconfig)]) == 2
    assert run.main(["--kubeconfig", str(broken_kubeconfig), "-n", "default"]) == 2
    err = capsys.readouterr().err
    assert err.count("cannot load a Kubernetes configuration") == 2, err


def test_help_of_a_command_whose_extra_is_missing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = importlib.import_module

    def core_install(name: str, *args: Any) -> Any:
        if name == "k8slease.testing.serve":
            raise ModuleNotFoundError("No module named 'aiohttp'", name="aiohttp")
        return real(name, *args)

    monkeypatch.setattr(cli_main.importlib, "import_module", core_install)
    assert cli_main.main(["apiserver", "--help"]) == 0
    out = capsys.readouterr().out
    assert "usage: k8slease apiserver" in out
    assert "pip install 'k8slease[testing]'" in out
    assert cli_main.main(["apiserver"]) == 2  # running it still needs the extra


def test_the_operator_takes_log_level() -> None:
    pytest.importorskip("kopf")
    from k8slease.operator.command import settings_from_args

    assert settings_from_args(["--log-level", "debug"]).log_level == "DEBUG"
    assert settings_from_args(["-q"]).log_level == "WARNING"
    with pytest.raises(SystemExit):
        settings_from_args(["--log-level", "loud"])

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

    monkeypatch.setattr(importlib, "import_module", core_install)  # the module cli_main uses
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


def token_files(directory: Path) -> list[Path]:
    """Every file under ``directory`` (a kubeconfig and its temporary file hold the token)."""
    return sorted(p for p in directory.rglob("*") if p.is_file())


def test_apiserver_refuses_a_kubeconfig_that_is_a_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: the server started, the write crashed with IsADirectoryError and left a 0600
    temporary file holding the bearer token next to the directory."""
    directory = tmp_path / "kcdir"
    directory.mkdir()
    assert cli_main.main(["apiserver", "--kubeconfig", str(directory)]) == 2
    captured = capsys.readouterr()
    assert captured.err == (
        f"k8slease apiserver: --kubeconfig {str(directory)!r} is a directory;"
        " pass the path of a file\n"
    )
    assert captured.out == ""
    assert token_files(tmp_path) == []


#: what each tier command does first that is slow or needs the host: never reached on a
#: usage error (each stands in for the real one and fails the test if it is called)
HEAVY = {
    "controlplane": ("k8slease.testing.controlplane.serve", ["ControlPlane", "ensure_binaries"]),
    "cluster": (
        "k8slease.testing.cluster.serve",
        ["unavailable", "Cluster", "build_all", "build_binaries", "build_image"],
    ),
}


@pytest.mark.parametrize("command", HEAVY)
@pytest.mark.parametrize("build_only", [[], ["--build-only"]], ids=["serve", "build-only"])
def test_tiers_refuse_a_kubeconfig_that_is_a_directory_before_starting_anything(
    command: str,
    build_only: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Before: the control plane (or the cluster, after the host's checks) was built and
    started, minutes of work, and only then failed to write the kubeconfig."""
    module, names = HEAVY[command]
    served = importlib.import_module(module)
    for name in names:
        monkeypatch.setattr(served, name, _started(command, name))
    directory = tmp_path / "kcdir"
    directory.mkdir()
    assert cli_main.main([command, "--kubeconfig", str(directory), *build_only]) == 2
    captured = capsys.readouterr()
    assert captured.err == (
        f"k8slease {command}: --kubeconfig {str(directory)!r} is a directory;"
        " pass the path of a file\n"
    )
    assert captured.out == ""
    (tmp_path / "file").write_text("")
    assert cli_main.main([command, "--kubeconfig", str(tmp_path / "file" / "kc")]) == 2
    assert capsys.readouterr().err == (
        f"k8slease {command}: --kubeconfig {str(tmp_path / 'file' / 'kc')!r}: "
        f"{str(tmp_path / 'file')!r} is not a directory\n"
    )


def _started(command: str, name: str) -> Any:
    def heavy(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"k8slease {command} called {name} before refusing its kubeconfig")

    return heavy


def test_apiserver_kubeconfig_under_a_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file").write_text("")
    assert cli_main.main(["apiserver", "--kubeconfig", str(tmp_path / "file" / "kc")]) == 2
    assert "is not a directory" in capsys.readouterr().err


def test_a_failed_kubeconfig_write_stops_the_server_and_leaves_no_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Any failure of the write (here the rename) removes the temporary file; the server that
    was already answering is stopped, and the command says so in one line, exit status 2."""
    from k8slease.testing.server import APIServer

    def refuse(self: Path, target: Path) -> Path:
        raise PermissionError(13, "Permission denied", str(target))

    monkeypatch.setattr(Path, "replace", refuse)
    target = tmp_path / "kubeconfig"
    server = APIServer(kubeconfig=target)
    with pytest.raises(PermissionError):
        server.start()
    assert server._thread is None  # stopped, not left serving without its kubeconfig
    assert token_files(tmp_path) == []
    assert cli_main.main(["apiserver", "--kubeconfig", str(target)]) == 2
    [line] = capsys.readouterr().out.splitlines()
    assert line.startswith("k8slease apiserver: cannot write the kubeconfig: [Errno 13]")
    assert token_files(tmp_path) == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--history-size", "-5"], "argument --history-size: must be an integer >= 1, got -5"),
        (["--history-size", "0"], "argument --history-size: must be an integer >= 1, got 0"),
        (["--history-size", "x"], "argument --history-size: must be an integer >= 1, got 'x'"),
        (["--port", "70000"], "argument --port: must be an integer from 0 to 65535, got 70000"),
    ],
)
def test_apiserver_refuses_bad_numbers(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from k8slease.testing.serve import build_parser

    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(argv)
    assert exited.value.code == 2
    assert f"k8slease apiserver: error: {message}\n" in capsys.readouterr().err

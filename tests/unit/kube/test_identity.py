"""One namespace rule everywhere: the pod's, else the in-cluster file, else the kubeconfig's
current context, else ``default`` (issue 21: the elector, ``Jobs`` and ``status`` ignored the
kubeconfig while the operator used it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from k8slease.errors import ConfigError
from k8slease.kube.identity import default_namespace

KUBECONFIG = """
apiVersion: v1
kind: Config
current-context: dev
contexts:
- name: dev
  context: {cluster: c, user: u, namespace: team-a}
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: u
  user: {token: t}
"""


@pytest.fixture
def no_pod(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    return tmp_path / "absent-namespace-file"


def test_pod_namespace_wins(monkeypatch: pytest.MonkeyPatch, no_pod: Path) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "from-env")
    assert default_namespace(namespace_file=no_pod) == "from-env"


def test_in_cluster_file_next(tmp_path: Path, no_pod: Path) -> None:
    file = tmp_path / "namespace"
    file.write_text("from-file\n")
    assert default_namespace(namespace_file=file, kubeconfig="") == "from-file"


def test_kubeconfig_context_next(
    tmp_path: Path, no_pod: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config"
    config.write_text(KUBECONFIG)
    assert default_namespace(namespace_file=no_pod) == "default"
    assert default_namespace(namespace_file=no_pod, kubeconfig=str(config)) == "team-a"
    assert default_namespace(namespace_file=no_pod, kubeconfig=str(tmp_path / "none")) == "default"
    monkeypatch.setenv("KUBECONFIG", str(config))
    assert default_namespace(namespace_file=no_pod) == "team-a", "$KUBECONFIG is the default"
    assert default_namespace(namespace_file=no_pod, kubeconfig="") == "team-a"


def test_a_bad_namespace_in_the_kubeconfig_names_the_file(tmp_path: Path, no_pod: Path) -> None:
    config = tmp_path / "config"
    config.write_text(KUBECONFIG.replace("team-a", "Team_A"))
    with pytest.raises(ConfigError, match=r"namespace of the context in .*config='Team_A'"):
        default_namespace(namespace_file=no_pod, kubeconfig=str(config))


def test_every_form_follows_the_kubeconfig_context(
    tmp_path: Path, no_pod: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The elector, ``Jobs`` and ``k8slease status`` use the same rule as the operator."""
    from k8slease import Jobs, LeaderElector
    from k8slease.cli import status

    config = tmp_path / "config"
    config.write_text(KUBECONFIG)
    monkeypatch.setenv("KUBECONFIG", str(config))
    assert LeaderElector("billing", identity="a").namespace == "team-a"
    assert Jobs("billing", identity="a").namespace == "team-a"
    assert LeaderElector("billing", identity="a", namespace="explicit").namespace == "explicit"
    monkeypatch.setenv("POD_NAMESPACE", "from-env")
    assert Jobs("billing", identity="a").namespace == "from-env"
    monkeypatch.delenv("POD_NAMESPACE")
    used: list[str] = []
    monkeypatch.setattr(
        status, "render_status", lambda api, *, namespace, group: used.append(namespace) or ""
    )
    assert status.main(["--kubeconfig", str(config)]) == 0
    assert used == ["team-a"]

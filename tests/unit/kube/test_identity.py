"""One namespace default: the pod's, else the in-cluster file, else (if asked) the kubeconfig's."""

from __future__ import annotations

from pathlib import Path

import pytest

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
    return tmp_path / "absent-namespace-file"


def test_pod_namespace_wins(monkeypatch: pytest.MonkeyPatch, no_pod: Path) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "from-env")
    assert default_namespace(namespace_file=no_pod) == "from-env"


def test_in_cluster_file_next(tmp_path: Path, no_pod: Path) -> None:
    file = tmp_path / "namespace"
    file.write_text("from-file\n")
    assert default_namespace(namespace_file=file, kubeconfig="") == "from-file"


def test_kubeconfig_context_only_when_asked(tmp_path: Path, no_pod: Path) -> None:
    config = tmp_path / "config"
    config.write_text(KUBECONFIG)
    assert default_namespace(namespace_file=no_pod) == "default"
    assert default_namespace(namespace_file=no_pod, kubeconfig=str(config)) == "team-a"
    assert default_namespace(namespace_file=no_pod, kubeconfig=str(tmp_path / "none")) == "default"

"""The real control plane's pure parts: version pins, wrapper go.mod, tier choice, metrics."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from k8slease.testing import tiers
from k8slease.testing.controlplane import apimetrics, audit, build, cache, gomod, versions
from k8slease.testing.controlplane.certs import KeyPair
from k8slease.testing.controlplane.gotool import BuildError
from k8slease.testing.controlplane.kubeconfig import kubeconfig_document, write_document
from k8slease.testing.kubeconfig import write_kubeconfig

KUBERNETES_GOMOD = {
    "Module": {"Path": "k8s.io/kubernetes"},
    "Go": "1.26.0",
    "Replace": [
        {"Old": {"Path": "k8s.io/api"}, "New": {"Path": "./staging/src/k8s.io/api"}},
        {"Old": {"Path": "k8s.io/apiserver"}, "New": {"Path": "./staging/src/k8s.io/apiserver"}},
        {
            "Old": {"Path": "example.com/fork"},
            "New": {"Path": "example.com/other", "Version": "v1"},
        },
    ],
}


def test_staging_version_follows_the_kubernetes_release() -> None:
    assert versions.staging_version("v1.37.2") == "v0.37.2"
    with pytest.raises(ValueError, match=r"v1\.X\.Y"):
        versions.staging_version("1.37.2")


def test_only_staging_replacements_are_mapped_to_published_versions() -> None:
    pairs = gomod.staging_replacements(KUBERNETES_GOMOD, "v0.37.2")
    assert pairs == [("k8s.io/api", "v0.37.2"), ("k8s.io/apiserver", "v0.37.2")]


def test_a_gomod_without_staging_replacements_is_an_error() -> None:
    with pytest.raises(BuildError, match="staging"):
        gomod.staging_replacements({"Replace": None}, "v0.37.2")


def test_wrapper_gomod_requires_the_module_and_names_the_tool() -> None:
    text = gomod.wrapper_gomod(
        go_version="1.26.0",
        require=("k8s.io/kubernetes", "v1.37.2"),
        tool="k8s.io/kubernetes/cmd/kube-apiserver",
        replacements=[("k8s.io/api", "v0.37.2")],
    )
    assert "\ngo 1.26.0\n" in text
    assert "require k8s.io/kubernetes v1.37.2\n" in text
    assert "tool k8s.io/kubernetes/cmd/kube-apiserver\n" in text
    assert "\tk8s.io/api => k8s.io/api v0.37.2\n" in text


def test_tiers_default_to_both_where_the_real_plane_can_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CI", raising=False)
    chosen = tiers.choose(None, None, None)
    assert chosen.servers == ("embedded", "real") and not chosen.real_required
    monkeypatch.setenv("CI", "true")
    assert tiers.choose(None, None, None).real_required


def test_tiers_fall_back_to_embedded_with_the_reason() -> None:
    chosen = tiers.choose(None, None, "no Go here")
    assert chosen.servers == ("embedded",) and chosen.real_skipped == "no Go here"


def test_an_explicit_real_tier_is_required_even_off_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    assert tiers.choose("real", None, None) == tiers.Tiers(("real",), real_required=True)
    assert tiers.choose("both", None, "no Go here").real_required


def test_a_real_cluster_replaces_both_tiers_and_refuses_a_real_tier() -> None:
    assert tiers.choose(None, "/k", None).servers == ("external",)
    with pytest.raises(ValueError, match="--k8s-server=real cannot be combined"):
        tiers.choose("real", "/k", None)


def test_ci_variable_values(monkeypatch: pytest.MonkeyPatch) -> None:
    for value, expected in (("true", True), ("1", True), ("false", False), ("", False)):
        monkeypatch.setenv("CI", value)
        assert tiers.on_ci() is expected


TEXT = """\
# HELP apiserver_request_total Counter of apiserver requests
apiserver_request_total{code="200",resource="leases",verb="GET"} 3
apiserver_request_total{code="200",resource="leases",verb="UPDATE"} 5
apiserver_request_total{code="409",resource="leases",verb="UPDATE"} 2
apiserver_request_total_extra{resource="leases"} 100
apiserver_request_total{code="201",resource="namespaces",verb="POST"} 1
"""


def test_metrics_total_sums_the_matching_samples_only() -> None:
    assert apimetrics.total(TEXT, "apiserver_request_total", resource="leases", verb="UPDATE") == 7
    assert apimetrics.total(TEXT, "apiserver_request_total", resource="leases") == 10
    assert apimetrics.total(TEXT, "apiserver_request_total", resource="pods") == 0


def test_kubeconfig_for_a_token_carries_the_ca_and_no_client_certificate(tmp_path: Path) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_bytes(b"CA")
    document = kubeconfig_document("https://127.0.0.1:1", ca, token="tok")
    text = json.dumps(document)
    assert '"token": "tok"' in text and "certificate-authority-data" in text
    assert "client-certificate-data" not in text and "insecure" not in text
    with pytest.raises(ValueError, match="either a token or a client key pair"):
        kubeconfig_document("https://127.0.0.1:1", ca)


def test_kubeconfig_for_a_key_pair_inlines_its_certificate_and_key(tmp_path: Path) -> None:
    ca, client = tmp_path / "ca.crt", KeyPair(tmp_path / "kubelet.key")
    for path, data in ((ca, b"CA"), (client.cert, b"CERT"), (client.key, b"KEY")):
        path.write_bytes(data)
    document = kubeconfig_document("https://127.0.0.1:1", ca, client=client)
    [user] = document["users"]  # type: ignore[misc]
    assert user["user"] == {"client-certificate-data": "Q0VSVA==", "client-key-data": "S0VZ"}
    with pytest.raises(ValueError, match="either a token or a client key pair"):
        kubeconfig_document("https://127.0.0.1:1", ca, client=client, token="tok")


@pytest.mark.parametrize("writer", ["control plane", "embedded"])
def test_a_kubeconfig_whose_rename_fails_leaves_no_copy_of_its_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str
) -> None:
    target = tmp_path / "kubeconfig"

    def refuse(self: Path, other: object) -> Path:
        raise PermissionError(f"rename to {other} refused")

    monkeypatch.setattr(Path, "replace", refuse)
    with pytest.raises(PermissionError):
        if writer == "control plane":
            write_document({"users": [{"user": {"client-key-data": "SECRET"}}]}, target)
        else:
            write_kubeconfig("https://127.0.0.1:1", target, token="SECRET")
    assert list(tmp_path.iterdir()) == []


def test_a_kubeconfig_is_written_for_its_owner_only(tmp_path: Path) -> None:
    target = write_document({"kind": "Config"}, tmp_path / "sub" / "kubeconfig")
    assert json.loads(target.read_text()) == {"kind": "Config"}
    assert target.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in target.parent.iterdir()) == ["kubeconfig"]


def test_audit_events_after_an_offset_and_counts_by_namespace(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"

    def event(verb: str, resource: str, namespace: str, sub: str | None = None) -> str:
        ref = {"resource": resource, "namespace": namespace, "name": "x"}
        if sub:
            ref["subresource"] = sub
        return json.dumps({"verb": verb, "objectRef": ref}) + "\n"

    log.write_text(event("update", "leases", "a"))
    since = audit.size(log)
    log.write_text(
        log.read_text()
        + event("update", "leases", "a")
        + event("update", "leases", "b")
        + event("patch", "groups", "a", "status")
        + '{"verb": "upd'  # a line still being written is not read
    )
    found = audit.events(log, since)
    assert len(found) == 3
    assert audit.count(found, "update", "leases", namespace="a") == 1
    assert audit.count(found, "update", "leases") == 2
    assert audit.count(found, "patch", "groups/status") == 1
    assert audit.count(found, "patch", "groups", subresource="scale") == 0
    assert audit.events(tmp_path / "missing.log") == [] and audit.size(tmp_path / "x") == 0


def test_audit_events_skip_the_rest_of_a_line_the_offset_fell_inside(tmp_path: Path) -> None:
    """A size taken while kube-apiserver was writing an event points inside its line (the file
    grows page by page during one write): that event is not counted, and nothing fails to parse
    (a make test run failed with JSONDecodeError in the benchmark's load count)."""
    log = tmp_path / "audit.log"
    first = json.dumps({"verb": "update", "objectRef": {"resource": "leases", "name": "a"}})
    second = json.dumps({"verb": "get", "objectRef": {"resource": "leases", "name": "b"}})
    log.write_text(f"{first}\n{second}\n")
    line_end = len(first) + 1
    for since in range(1, line_end):
        assert [e["verb"] for e in audit.events(log, since)] == ["get"], since
    assert [e["verb"] for e in audit.events(log, line_end)] == ["get"]
    assert [e["verb"] for e in audit.events(log, 0)] == ["update", "get"]
    assert audit.events(log, audit.size(log)) == []


def test_cached_binaries_are_used_without_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no go
    with pytest.raises(BuildError, match="Go is not installed"):
        build.ensure_binaries(progress=lambda line: None)
    directory = tmp_path / "k8slease" / "controlplane" / versions.cache_key()
    directory.mkdir(parents=True)
    for name in ("kube-apiserver", "etcd"):
        (directory / name).write_text("#!/bin/sh\n")
        (directory / name).chmod(0o755)
    assert build.ensure_binaries(progress=lambda line: None).directory == directory


def test_a_second_builder_waits_for_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    waited, entered = threading.Event(), threading.Event()

    def second() -> None:
        with cache.build_lock("k", waited.set):
            entered.set()

    with cache.build_lock("k", lambda: pytest.fail("the first builder must not wait")):
        thread = threading.Thread(target=second)
        thread.start()
        assert waited.wait(10)
        assert not entered.is_set()
    thread.join(10)
    assert entered.is_set()

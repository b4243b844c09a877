"""The single-node cluster's pure parts: build recipes, images, configuration, cleanup helpers."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
from pathlib import Path

import pytest

from k8slease.testing.cluster import config as c
from k8slease.testing.cluster import images, netns
from k8slease.testing.cluster import versions as v
from k8slease.testing.cluster.build import ALL, NodeBinaries
from k8slease.testing.controlplane import gomod
from k8slease.testing.controlplane.certs import client_certificate, make_pki


def test_one_wrapper_module_names_every_node_command() -> None:
    packages = [f"k8s.io/kubernetes/cmd/{name}" for name in v.KUBE_COMMANDS]
    text = gomod.wrapper_gomod(
        go_version="1.26.0",
        require=("k8s.io/kubernetes", "v1.37.2"),
        tool=packages[0],
        more_tools=packages[1:],
    )
    assert [line for line in text.splitlines() if line.startswith("tool ")] == [
        f"tool {package}" for package in packages
    ]


def test_the_cache_key_changes_with_every_pinned_version(monkeypatch: pytest.MonkeyPatch) -> None:
    before = v.cache_key()
    for name in ("CONTAINERD_VERSION", "COREDNS_VERSION", "HELM_VERSION"):
        with monkeypatch.context() as patch:
            patch.setattr(v, name, "v9.9.9")
            assert v.cache_key() != before, name


def test_node_binaries_are_complete_only_with_every_executable(tmp_path: Path) -> None:
    binaries = NodeBinaries(tmp_path)
    for name in ALL:
        assert not binaries.complete()
        (tmp_path / name).write_text("#!/bin/sh\n")
        (tmp_path / name).chmod(0o755)
    assert binaries.complete()
    with pytest.raises(KeyError, match="no node binary named 'docker'"):
        binaries["docker"]


def test_the_pause_archive_is_an_oci_layout_naming_the_sandbox_image() -> None:
    data = images.pause_archive_bytes(b"\x7fELF pause")
    assert data == images.pause_archive_bytes(b"\x7fELF pause")  # deterministic
    with tarfile.open(fileobj=io.BytesIO(data)) as layout:
        names = layout.getnames()
        index = json.loads(layout.extractfile("index.json").read())  # type: ignore[union-attr]
        blobs = {name: layout.extractfile(name).read() for name in names if "blobs/" in name}  # type: ignore[union-attr]
    assert "oci-layout" in names
    for name, blob in blobs.items():  # every blob is stored under its own digest
        assert name.endswith(hashlib.sha256(blob).hexdigest())
    entry = index["manifests"][0]
    assert entry["annotations"]["io.containerd.image.name"] == v.PAUSE_IMAGE
    manifest = json.loads(blobs[f"blobs/sha256/{entry['digest'].split(':')[1]}"])
    config = json.loads(blobs[f"blobs/sha256/{manifest['config']['digest'].split(':')[1]}"])
    assert config["config"]["Entrypoint"] == ["/pause"]
    layer = blobs[f"blobs/sha256/{manifest['layers'][0]['digest'].split(':')[1]}"]
    import gzip

    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(layer))) as files:
        assert files.extractfile("pause").read() == b"\x7fELF pause"  # type: ignore[union-attr]


def test_the_image_digest_follows_what_the_dockerfile_copies(tmp_path: Path) -> None:
    for name in ("Dockerfile", "pyproject.toml", "README.md", "constraints.txt"):
        (tmp_path / name).write_text(name)
    (tmp_path / "k8slease").mkdir()
    (tmp_path / "k8slease" / "a.py").write_text("x = 1\n")
    first = images.context_digest(tmp_path)
    (tmp_path / "k8slease" / "__pycache__").mkdir()
    (tmp_path / "k8slease" / "__pycache__" / "a.pyc").write_bytes(b"\0")
    (tmp_path / "tests.txt").write_text("not copied by the Dockerfile")
    assert images.context_digest(tmp_path) == first
    (tmp_path / "k8slease" / "a.py").write_text("x = 2\n")
    assert images.context_digest(tmp_path) != first


def test_kubelet_config_allows_cgroup_v1_under_the_cluster_root(tmp_path: Path) -> None:
    document = json.loads(
        c.kubelet_config(
            ca_file=tmp_path / "ca.crt", cgroup_root="/k8s-x", resolv_conf=tmp_path / "resolv.conf"
        )
    )
    assert document["failCgroupV1"] is False and document["failSwapOn"] is False
    assert document["cgroupRoot"] == "/k8s-x" and document["cgroupDriver"] == "cgroupfs"
    assert document["clusterDNS"] == [c.NODE_IP]
    assert document["authentication"]["anonymous"]["enabled"] is False


def test_containerd_restricts_oom_score_adj_and_uses_the_pinned_pause(tmp_path: Path) -> None:
    import tomllib

    document = tomllib.loads(c.containerd_toml(pause_image=v.PAUSE_IMAGE, cni_conf_dir=tmp_path))
    runtime = document["plugins"]["io.containerd.cri.v1.runtime"]
    assert runtime["restrict_oom_score_adj"] is True
    assert runtime["cni"]["conf_dir"] == str(tmp_path)
    pinned = document["plugins"]["io.containerd.cri.v1.images"]["pinned_images"]
    assert pinned["sandbox"] == v.PAUSE_IMAGE


def test_the_serving_certificate_covers_the_service_names(tmp_path: Path) -> None:
    pki = make_pki(tmp_path, serving_names=c.SERVING_NAMES)
    text = subprocess.run(
        ["openssl", "x509", "-in", str(pki.server.cert), "-noout", "-ext", "subjectAltName"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for name in ("kubernetes.default.svc", c.KUBERNETES_SERVICE_IP, c.NODE_IP):
        assert name in text
    kubelet = client_certificate(pki, "kubelet", user="system:node:n", group="system:nodes")
    assert (kubelet.key.name, kubelet.cert.name) == ("kubelet.key", "kubelet.crt")
    subject = subprocess.run(
        ["openssl", "x509", "-in", str(kubelet.cert), "-noout", "-subject"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "O = system:nodes" in subject and "CN = system:node:n" in subject


def openssl(*args: str) -> str:
    return subprocess.run(["openssl", *args], capture_output=True, text=True, check=True).stdout


def test_every_key_pair_of_the_pki_is_its_key_and_the_certificate_the_ca_signed_for_it(
    tmp_path: Path,
) -> None:
    pki = make_pki(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix != ".srl") == [
        "admin.crt", "admin.key", "ca.crt", "ca.key", "server.crt", "server.key",
        "service-account.key", "service-account.pub",
    ]  # fmt: skip
    for pair in (pki.server, pki.admin):
        assert openssl("verify", "-CAfile", str(pki.ca.cert), str(pair.cert)).endswith(": OK\n")
    for pair in (pki.ca, pki.server, pki.admin):
        public = openssl("x509", "-in", str(pair.cert), "-noout", "-pubkey")
        assert public == openssl("pkey", "-in", str(pair.key), "-pubout")
    signing = pki.service_account
    assert signing.public_key.read_text() == openssl("pkey", "-in", str(signing.key), "-pubout")


def test_cgroup_dirs_are_listed_deepest_first_in_every_hierarchy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(netns, "CGROUP_FS", tmp_path)
    for controller in ("cpu", "memory"):
        (tmp_path / controller / "k8s-x" / "kubepods" / "pod1").mkdir(parents=True)
    (tmp_path / "cpu" / "other").mkdir()
    found = netns.cgroup_dirs("/k8s-x")
    assert len(found) == 6 and all("k8s-x" in str(path) for path in found)
    depths = [len(path.parts) for path in found]
    assert depths == sorted(depths, reverse=True)
    netns.remove_cgroups("/k8s-x")
    assert netns.cgroup_dirs("/k8s-x") == []
    assert (tmp_path / "cpu" / "other").is_dir()


def test_not_root_is_one_line_saying_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from k8slease.testing.cluster import host

    monkeypatch.setattr(host.os, "geteuid", lambda: 1000)
    reason = host.unavailable()
    assert reason is not None and "needs root" in reason and "\n" not in reason


def test_no_go_and_nothing_cached_is_one_line_saying_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from k8slease.testing.cluster import host

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(host, "go_available", lambda: False)
    monkeypatch.setattr(host.os, "geteuid", lambda: 0)
    monkeypatch.setattr(host.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(host, "run_tool", lambda *a, **k: subprocess.CompletedProcess(a, 0, "", ""))
    assert host.unavailable() == (
        "Go is not installed and the cluster's binaries are not cached (no 'go' on PATH)"
    )


def test_the_command_says_in_one_line_why_it_cannot_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from k8slease.testing.cluster import serve

    monkeypatch.setattr(serve, "unavailable", lambda: "the single-node cluster needs root")
    for argv in ([], ["--build-only"]):
        assert serve.main(argv) == 2
        out = capsys.readouterr().out
        assert out == "k8slease cluster: cannot run here: the single-node cluster needs root\n"


def test_build_only_builds_the_part_asked_for_and_nothing_else(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """CI builds the image (network, disk) and the binaries (CPU) beside different work."""
    from k8slease.testing.cluster import serve

    built: list[str] = []
    monkeypatch.setattr(serve, "unavailable", lambda: None)
    monkeypatch.setattr(serve, "ensure_packages", lambda: built.append("packages"))
    monkeypatch.setattr(serve, "ensure_app_image", lambda: built.append("image") or "/i.tar")
    monkeypatch.setattr(
        serve, "build_binaries", lambda: built.append("binaries") or ["/plane", "/node"]
    )
    for argv, expected, printed in (
        (["--build-only", "image"], ["packages", "image"], "/i.tar\n"),
        (["--build-only", "binaries"], ["binaries"], "/plane\n/node\n"),
        (["--build-only"], ["packages", "binaries", "image"], "/plane\n/node\n/i.tar\n"),
    ):
        built.clear()
        assert serve.main(argv) == 0
        assert sorted(built) == sorted(expected)
        assert capsys.readouterr().out == printed
    with pytest.raises(SystemExit):
        serve.main(["--build-only", "kubelet"])
    assert "invalid choice: 'kubelet'" in capsys.readouterr().err

"""The kind end-to-end suite (``make e2e``, marker ``kind``).

Where ``kind``, ``kubectl`` or a working Docker daemon is missing, every test here is skipped at
collection with the reason, and no cluster is created. Nothing is ever downloaded: pytest-kind
fetches kind and kubectl when it is not given paths, so ``kind_cluster`` below replaces its
fixture and always passes the binaries found on PATH.

Options (pytest-kind's): ``--cluster-name`` (default here: k8slease-e2e), ``--keep-cluster``,
``--kind-image`` (node image, e.g. kindest/node:v1.30.0), ``--kubeconfig`` (where the cluster's
kubeconfig is written; k8slease's pytest plugin then targets that cluster in real-cluster mode).
Environment: ``K8SLEASE_E2E_IMAGE`` names a prebuilt image to load instead of building one.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
CHART_DIR = REPO_ROOT / "charts" / "k8slease"
E2E_DIR = Path(__file__).resolve().parent
#: Namespace and release of the chart on the kind cluster.
NAMESPACE = "k8slease-e2e"
RELEASE = "k8slease"
DEFAULT_CLUSTER_NAME = "k8slease-e2e"
IMAGE = os.environ.get("K8SLEASE_E2E_IMAGE", "k8slease:e2e")


@functools.cache
def kind_unavailable() -> str | None:
    """Why the kind suite cannot run here, or None when it can."""
    for tool in ("kind", "kubectl", "docker"):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH (the kind suite needs kind, kubectl and Docker)"
    try:
        subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            check=True,
            timeout=30,
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as error:
        detail = getattr(error, "stderr", b"") or b""
        first = detail.decode(errors="replace").strip().splitlines()[:1]
        return "docker info failed: no Docker daemon is reachable" + (
            f" ({first[0]})" if first else ""
        )
    return None


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> Iterator[None]:
    # After every other implementation ran, so `-m 'not kind'` has already deselected these
    # tests and `make test` never even runs `docker info`.
    result = yield
    e2e_items = [item for item in items if E2E_DIR in Path(str(item.path)).parents]
    if e2e_items:
        reason = kind_unavailable()
        if reason is not None:
            skip = pytest.mark.skip(reason=reason)
            for item in e2e_items:
                item.add_marker(skip)
    return result


@pytest.fixture(scope="session")
def kind_cluster(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A kind cluster (replaces pytest-kind's fixture so that it never downloads anything)."""
    reason = kind_unavailable()
    if reason is not None:
        pytest.skip(reason)
    from pytest_kind import KindCluster

    name = request.config.getoption("cluster_name")
    if name == "pytest-kind":  # pytest-kind's default: give ours a recognisable name
        name = DEFAULT_CLUSTER_NAME
    kubeconfig = request.config.getoption("kubeconfig")
    kind, kubectl = shutil.which("kind"), shutil.which("kubectl")
    assert kind is not None and kubectl is not None
    cluster = KindCluster(
        name,
        Path(kubeconfig) if kubeconfig else None,
        image=request.config.getoption("kind_image"),
        kind_path=Path(kind),
        kubectl_path=Path(kubectl),
    )
    cluster.create()
    try:
        yield cluster
    finally:
        if not request.config.getoption("keep_cluster"):
            cluster.delete()


@pytest.fixture(scope="session")
def k8slease_image(kind_cluster: Any) -> str:
    """The k8slease image, built from the Dockerfile (unless K8SLEASE_E2E_IMAGE exists) and
    loaded into the kind nodes."""
    prebuilt = "K8SLEASE_E2E_IMAGE" in os.environ and (
        subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True).returncode == 0
    )
    if not prebuilt:
        subprocess.run(["docker", "build", "-t", IMAGE, str(REPO_ROOT)], check=True, timeout=1200)
    kind_cluster.load_docker_image(IMAGE)
    return IMAGE


def chart_values(image: str) -> dict[str, Any]:
    repository, _, tag = image.rpartition(":")
    return {
        "image": {"repository": repository, "tag": tag, "pullPolicy": "Never"},
        "operator": {"logLevel": "debug"},
        "exampleApp": {
            "enabled": True,
            # Short periods: a 3-second leader Lease, so a failover shows within seconds.
            "args": ["--fast", "--health-port", "8080"],
            "scheduledJobGroup": {"create": True, "jobs": []},
        },
    }


@pytest.fixture(scope="session")
def helm_release(kind_cluster: Any, k8slease_image: str) -> Iterator[dict[str, Any]]:
    """`helm install` of the chart (through helm-python-sdk: no helm binary needed) into a
    namespace that enforces the "restricted" Pod Security Standard."""
    import helm_python

    kind_cluster.kubectl("create", "namespace", NAMESPACE)
    kind_cluster.kubectl(
        "label",
        "namespace",
        NAMESPACE,
        "pod-security.kubernetes.io/enforce=restricted",
        "pod-security.kubernetes.io/warn=restricted",
    )
    with helm_python.Config(
        kubeconfig_path=str(kind_cluster.kubeconfig_path), namespace=NAMESPACE
    ) as config:
        release = config.install(
            str(CHART_DIR),
            RELEASE,
            chart_values(k8slease_image),
            namespace=NAMESPACE,
            wait="watcher",
            timeout=300,
        )
        try:
            yield {"namespace": NAMESPACE, "name": RELEASE, "summary": release}
        finally:
            config.uninstall(RELEASE)
            kind_cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=false")

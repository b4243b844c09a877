"""The two clusters the end-to-end suite runs on, behind one small surface.

- ``node``: k8slease's own single-node cluster (:class:`k8slease.testing.cluster.Cluster`:
  containerd + kubelet + control plane built from upstream, in a private namespace; root).
- ``kind``: a kind cluster (kind, kubectl and a Docker daemon on PATH).

:func:`choose` picks one from ``K8SLEASE_E2E_CLUSTER`` (``node``, ``kind`` or ``auto``: kind
where it works, else the node cluster) and says in one line why neither can run.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol


class E2ECluster(Protocol):
    """What the tests use of a cluster."""

    kind: str
    kubeconfig_path: Path

    def kubectl(self, *args: str, **kwargs: Any) -> str: ...

    def helm(self, *args: str) -> str: ...

    def load_image(self, context: Path, image: str) -> None: ...


@functools.cache
def kind_unavailable() -> str | None:
    """Why a kind cluster cannot run here, or None when it can."""
    for tool in ("kind", "kubectl", "docker"):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH (kind needs kind, kubectl and Docker)"
    try:
        subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            check=True,
            timeout=30,
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError):
        return "docker info failed: no Docker daemon is reachable"
    return None


@functools.cache
def node_unavailable() -> str | None:
    from k8slease.testing.cluster import unavailable

    return unavailable()


def choose() -> tuple[str | None, str]:
    """``(kind of cluster or None, reason)``; the reason says why none can run."""
    wanted = os.environ.get("K8SLEASE_E2E_CLUSTER", "auto")
    if wanted not in ("auto", "kind", "node"):
        raise ValueError(f"K8SLEASE_E2E_CLUSTER must be auto, kind or node, got {wanted!r}")
    if wanted in ("auto", "kind") and kind_unavailable() is None:
        return "kind", ""
    if wanted in ("auto", "node") and node_unavailable() is None:
        return "node", ""
    reasons = []
    if wanted != "node":
        reasons.append(f"kind: {kind_unavailable()}")
    if wanted != "kind":
        reasons.append(f"node cluster: {node_unavailable()}")
    return None, "; ".join(reasons)


def required() -> bool:
    """Under CI, where Go and root exist, the node cluster must run: an error, not a skip."""
    return bool(os.environ.get("CI")) and shutil.which("go") is not None and os.geteuid() == 0


def _helm_binary() -> str:
    from k8slease.testing.cluster import ensure_node_binaries

    return str(ensure_node_binaries()["helm"])


#: ``kubectl -o``: each pod's containers, their state now and the one before (a restart's).
CONTAINER_STATES = (
    "jsonpath={range .items[*]}{.metadata.name}{': '}{.status.containerStatuses[*].state}"
    "{' last: '}{.status.containerStatuses[*].lastState}{'\\n'}{end}"
)


class NodeCluster:
    """The single-node cluster, as the tests use it."""

    kind = "node"

    def __init__(self) -> None:
        from k8slease.testing.cluster import Cluster

        self.cluster = Cluster()

    def start(self) -> None:
        self.cluster.start()
        self.kubeconfig_path = self.cluster.kubeconfig

    def stop(self) -> None:
        self.cluster.stop()

    def kubectl(self, *args: str, input: str | None = None, **kwargs: Any) -> str:
        result = self.cluster.kubectl(*args, check=False, input=input)
        if result.returncode != 0:
            raise subprocess.CalledProcessError(
                result.returncode, ["kubectl", *args], result.stdout, result.stderr
            )
        return result.stdout

    def helm(self, *args: str) -> str:
        result = self.cluster.helm(*args, check=False)
        if result.returncode != 0:
            raise subprocess.CalledProcessError(
                result.returncode, ["helm", *args], result.stdout, result.stderr
            )
        return result.stdout

    def load_image(self, context: Path, image: str) -> None:
        from k8slease.testing.cluster.images import APP_IMAGE, ensure_app_image

        if image != APP_IMAGE:
            raise ValueError(f"the node cluster builds {APP_IMAGE}, not {image}")
        self.cluster.import_image(ensure_app_image(context))

    def crictl_kill(self, container_id: str) -> None:
        """SIGKILL one container through the runtime (``ctr tasks kill``)."""
        result = self.cluster._ctr("tasks", "kill", "--signal", "SIGKILL", container_id)
        if result.returncode != 0:
            raise RuntimeError(f"ctr tasks kill {container_id}: {result.stderr.strip()}")

    def diagnostics(self, namespace: str) -> str:
        """What a failed test leaves for its reader: the pods' container states, the
        namespace's Events, the kubelet's last lines about its pods and containerd's last lines
        (the cluster's directory is removed when the suite ends)."""
        from k8slease.testing.controlplane.gotool import tail

        parts = []
        for title, args in (
            ("pods", ("get", "pods", "-n", namespace, "-o", "wide")),
            ("container states", ("get", "pods", "-n", namespace, "-o", CONTAINER_STATES)),
            ("events", ("get", "events", "-n", namespace, "--sort-by=.lastTimestamp")),
        ):
            result = self.cluster.kubectl(*args, check=False)
            parts.append(f"--- kubectl {title}:\n{result.stdout}{result.stderr}")
        logs = self.cluster.directory / "logs"
        kubelet = (logs / "kubelet.log").read_text(errors="replace").splitlines()
        about = [line for line in kubelet if f"{namespace}/" in line][-80:]
        parts.append(f"--- kubelet.log, its lines about {namespace}:\n" + "\n".join(about))
        parts.append(f"--- containerd.log:\n{tail(logs / 'containerd.log', 40)}")
        return "\n".join(parts)

    def container_pid(self, container_id: str) -> int:
        """The host PID of one container's main process (``ctr tasks ls``): the cluster
        shares the machine's PID namespace, so /proc/PID is the container's process."""
        result = self.cluster._ctr("tasks", "ls")
        for line in result.stdout.splitlines():
            fields = line.split()
            if len(fields) >= 2 and fields[0] == container_id and fields[1].isdigit():
                return int(fields[1])
        raise RuntimeError(f"ctr tasks ls shows no task {container_id}: {result.stderr.strip()}")


class KindCluster:
    """A kind cluster (pytest-kind), as the tests use it."""

    kind = "kind"

    def __init__(self, name: str, kubeconfig: str | None, image: str | None) -> None:
        from pytest_kind import KindCluster as PytestKind

        kind, kubectl = shutil.which("kind"), shutil.which("kubectl")
        assert kind is not None and kubectl is not None
        self._cluster = PytestKind(
            name,
            Path(kubeconfig) if kubeconfig else None,
            image=image,
            kind_path=Path(kind),
            kubectl_path=Path(kubectl),
        )

    def start(self) -> None:
        self._cluster.create()
        self.kubeconfig_path = Path(self._cluster.kubeconfig_path)

    def stop(self) -> None:
        self._cluster.delete()

    def kubectl(self, *args: str, **kwargs: Any) -> str:
        return str(self._cluster.kubectl(*args, **kwargs))

    def helm(self, *args: str) -> str:
        env = dict(os.environ, KUBECONFIG=str(self.kubeconfig_path))
        return subprocess.run(
            [_helm_binary(), *args],
            capture_output=True,
            text=True,
            env=env,
            check=True,
            timeout=900,
        ).stdout

    def load_image(self, context: Path, image: str) -> None:
        prebuilt = "K8SLEASE_E2E_IMAGE" in os.environ and (
            subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode
            == 0
        )
        if not prebuilt:
            subprocess.run(["docker", "build", "-t", image, str(context)], check=True, timeout=1200)
        self._cluster.load_docker_image(image)


def helm_values_args(values: dict[str, Any]) -> Sequence[str]:
    """``--set-json key=value`` arguments for helm (one per top-level key)."""
    import json

    return [
        arg for key, value in values.items() for arg in ("--set-json", f"{key}={json.dumps(value)}")
    ]

"""The one place that pins what the single-node cluster is built from.

Kubernetes' node binaries come from the same ``k8s.io/kubernetes`` release as the control plane
(:mod:`k8slease.testing.controlplane.versions`); the rest is pinned here. Change a version and
the next run builds (once) into a new cache directory named after the versions.
"""

from __future__ import annotations

import hashlib

from k8slease.testing.controlplane.versions import KUBERNETES_MODULE, KUBERNETES_VERSION

#: The node's Kubernetes binaries, all ``main`` packages of ``k8s.io/kubernetes``.
KUBE_COMMANDS = ("kubelet", "kube-controller-manager", "kube-scheduler", "kube-proxy", "kubectl")

#: containerd v2 (CRI built in), its runc shim and ``ctr`` (image import).
CONTAINERD_MODULE = "github.com/containerd/containerd/v2"
CONTAINERD_VERSION = "v2.4.2"
CONTAINERD_COMMANDS = ("containerd", "containerd-shim-runc-v2", "ctr")
CONTAINERD_TAGS = "no_btrfs no_devmapper no_zfs"

#: Cluster DNS (kopf and the client resolve ``kubernetes.default.svc``).
COREDNS_MODULE = "github.com/coredns/coredns"
COREDNS_VERSION = "v1.15.0"

#: The real ``helm`` command (install, upgrade, test, uninstall, template).
HELM_MODULE = "helm.sh/helm/v3"
HELM_VERSION = "v3.22.0"

#: The sandbox ("pause") image: ``build/pause/linux/pause.c`` of the Kubernetes module,
#: compiled statically and imported under this name (containerd is configured with it).
PAUSE_IMAGE = "registry.k8s.io/pause:3.10.2"

#: Debian packages (apt-get as root) the node needs, and the command each provides.
DEBIAN_PACKAGES = {
    "runc": "runc",
    "containernetworking-plugins": "/usr/lib/cni/bridge",
    "iptables": "iptables",
    "conntrack": "conntrack",
    "debootstrap": "debootstrap",
    "buildah": "buildah",
}

#: The local image base: Debian's release and the packages debootstrap adds to it.
BASE_SUITE = "bookworm"
BASE_PACKAGES = ("python3", "python3-venv", "python-is-python3", "ca-certificates")
BASE_IMAGE = f"localhost/k8slease-base:{BASE_SUITE}"


def cache_key() -> str:
    """The name of the binaries' cache directory for the pinned versions."""
    return (
        f"{KUBERNETES_VERSION}-containerd{CONTAINERD_VERSION}-coredns{COREDNS_VERSION}"
        f"-helm{HELM_VERSION}"
    )


def pins() -> dict[str, str]:
    """Every pinned version by name (written next to the binaries)."""
    return {
        KUBERNETES_MODULE: KUBERNETES_VERSION,
        CONTAINERD_MODULE: CONTAINERD_VERSION,
        COREDNS_MODULE: COREDNS_VERSION,
        HELM_MODULE: HELM_VERSION,
        "pause": PAUSE_IMAGE,
    }


def base_key() -> str:
    """The name of the cached base image archive (suite and packages)."""
    digest = hashlib.sha256(" ".join(BASE_PACKAGES).encode()).hexdigest()[:8]
    return f"base-{BASE_SUITE}-{digest}"

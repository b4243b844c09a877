"""The one place that pins what the real control plane is built from.

Change a version here and the next run builds (once) into a new cache directory named after it.
"""

from __future__ import annotations

#: ``k8s.io/kubernetes`` module version; ``cmd/kube-apiserver`` is built from it.
KUBERNETES_VERSION = "v1.37.2"
KUBERNETES_MODULE = "k8s.io/kubernetes"
KUBE_APISERVER_PACKAGE = "k8s.io/kubernetes/cmd/kube-apiserver"

#: ``go.etcd.io/etcd/server/v3`` module version (its root package is etcd's ``main``).
ETCD_VERSION = "v3.6.16"
ETCD_MODULE = "go.etcd.io/etcd/server/v3"
ETCD_PACKAGE = "go.etcd.io/etcd/server/v3"


def staging_version(kubernetes_version: str = KUBERNETES_VERSION) -> str:
    """The published version of the ``k8s.io/*`` staging modules for a Kubernetes release.

    Kubernetes ``v1.X.Y`` publishes its staging repositories (``k8s.io/api``, ...) as
    ``v0.X.Y``; ``k8s.io/kubernetes`` itself requires them at ``v0.0.0`` with local replaces.
    """
    if not kubernetes_version.startswith("v1."):
        raise ValueError(f"kubernetes_version must look like v1.X.Y, got {kubernetes_version!r}")
    return "v0." + kubernetes_version[len("v1.") :]


def cache_key(
    kubernetes_version: str = KUBERNETES_VERSION, etcd_version: str = ETCD_VERSION
) -> str:
    """The name of the cache directory for one pair of versions."""
    return f"{kubernetes_version}-{etcd_version}"

"""A single-node Kubernetes cluster for the end-to-end suite, built from upstream sources.

:class:`Cluster` runs the control plane, containerd, the kubelet, kube-proxy and CoreDNS in a
private network + mount namespace (root only); :func:`unavailable` says in one line why it
cannot run here. Binaries are built from Go modules (and Debian packages) once per machine and
cached under ``~/.cache/k8slease/cluster`` (versions: :mod:`.versions`).
"""

from .build import NodeBinaries, cached_node_binaries, ensure_node_binaries
from .host import unavailable
from .node import Cluster, ClusterError, ClusterUnavailable

__all__ = [
    "Cluster",
    "ClusterError",
    "ClusterUnavailable",
    "NodeBinaries",
    "cached_node_binaries",
    "ensure_node_binaries",
    "unavailable",
]

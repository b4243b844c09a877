"""A real Kubernetes control plane for tests: ``etcd`` + ``kube-apiserver`` built from upstream.

``ControlPlane`` has the surface of the embedded ``APIServer`` (context manager, ``url``,
``kubeconfig``, ``api_client()``), backed by the real thing: RBAC, admission, structural
schemas, server-side validation, a watch cache over etcd. The binaries are built from their Go
modules on first use (see :mod:`.build`) and cached per user; there is no controller-manager
and no scheduler (no namespace finalization, no pods, no garbage collection).
"""

from .build import ensure_binaries
from .cache import Binaries, cached
from .gotool import BuildError, go_available
from .plane import ControlPlane, ControlPlaneError

__all__ = [
    "Binaries",
    "BuildError",
    "ControlPlane",
    "ControlPlaneError",
    "cached",
    "ensure_binaries",
    "go_available",
]

"""Defaults for who this replica is and where its Lease lives.

The identity gets a short random suffix so that a restarted pod with the same name never mistakes
its predecessor's Lease for its own: two processes with one identity would both think they lead.
"""

from __future__ import annotations

import os
import secrets
import socket
import string
from pathlib import Path
from typing import Any

from k8slease.errors import ConfigError
from k8slease.kube.validate import is_dns_label

#: Where Kubernetes mounts the pod's namespace.
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")

_SUFFIX_ALPHABET = string.ascii_lowercase + string.digits


def random_suffix(length: int = 5) -> str:
    """A short random lowercase alphanumeric string."""
    return "".join(secrets.choice(_SUFFIX_ALPHABET) for _ in range(length))


def default_identity() -> str:
    """``POD_NAME`` (else the hostname) plus ``-`` and a 5-character random suffix."""
    base = os.environ.get("POD_NAME") or socket.gethostname() or "replica"
    return f"{base}-{random_suffix()}"


def identity_or_default(identity: str | None) -> str:
    """``identity`` checked (a non-empty string of at most 253 characters, what a Lease's
    ``holderIdentity`` may be here), or :func:`default_identity` when it is ``None``."""
    if identity is not None and (not isinstance(identity, str) or not identity.strip()):
        raise ConfigError(f"identity must be a non-empty string, got {identity!r}")
    resolved = identity or default_identity()
    if len(resolved) > 253:
        raise ConfigError("identity must be at most 253 characters")
    return resolved


def checked_namespace(name: str, *, source: str) -> str:
    """``name`` if it can be a namespace; else ``ConfigError`` naming where it came from."""
    if not is_dns_label(name):
        raise ConfigError(
            f"{source}={name!r} is not a namespace name "
            "(lowercase letters, digits and '-', at most 63 characters)"
        )
    return name


def default_namespace(
    *, namespace_file: Path = SERVICE_ACCOUNT_NAMESPACE, kubeconfig: str | None = None
) -> str:
    """The namespace when none was passed, by one rule everywhere (the elector, ``Jobs``,
    ``k8slease status``, the operator), the order kubectl and client-go follow too:
    ``POD_NAMESPACE``, else the in-cluster namespace file, else the namespace of the current
    context of the kubeconfig (``kubeconfig``, or ``$KUBECONFIG``, or ``~/.kube/config`` when it
    is ``None`` or ``""``), else ``default``.

    Raises ``ConfigError`` naming ``POD_NAMESPACE`` when it holds something that cannot be a
    namespace (a typo there would otherwise surface later as a 404 or 422 from the API server).
    """
    from_env = os.environ.get("POD_NAMESPACE", "").strip()
    if from_env:
        return checked_namespace(from_env, source="POD_NAMESPACE")
    try:
        from_file = namespace_file.read_text(encoding="utf-8").strip()
    except OSError:
        from_file = ""
    if from_file:
        return from_file
    path = kubeconfig or os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    from_kubeconfig = _kubeconfig_namespace(path)
    if from_kubeconfig:
        return checked_namespace(from_kubeconfig, source=f"the namespace of the context in {path}")
    return "default"


def _kubeconfig_namespace(kubeconfig: str) -> str:
    """The current context's namespace in ``kubeconfig`` ("" when none or unreadable)."""
    if not any(Path(part).is_file() for part in kubeconfig.split(os.pathsep) if part):
        return ""
    try:
        from kubernetes import config

        lister: Any = config.list_kube_config_contexts
        _, active = lister(config_file=kubeconfig)
        namespace = (active or {}).get("context", {}).get("namespace")
    except Exception:  # no kubeconfig, or not a readable one: not our business here
        return ""
    return str(namespace) if namespace else ""

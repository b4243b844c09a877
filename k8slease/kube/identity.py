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


def default_namespace(
    *, namespace_file: Path = SERVICE_ACCOUNT_NAMESPACE, kubeconfig: str | None = None
) -> str:
    """``POD_NAMESPACE``, else the in-cluster namespace file, else (when ``kubeconfig`` is given:
    the namespace of its current context, ``""`` meaning the default file) ``default``."""
    from_env = os.environ.get("POD_NAMESPACE", "").strip()
    if from_env:
        return from_env
    try:
        from_file = namespace_file.read_text(encoding="utf-8").strip()
    except OSError:
        from_file = ""
    if from_file:
        return from_file
    if kubeconfig is not None:
        return _kubeconfig_namespace(kubeconfig or None) or "default"
    return "default"


def _kubeconfig_namespace(kubeconfig: str | None) -> str:
    try:
        from kubernetes import config

        lister: Any = config.list_kube_config_contexts
        _, active = lister(config_file=kubeconfig)
        namespace = (active or {}).get("context", {}).get("namespace")
    except Exception:  # no kubeconfig, or not a readable one: not our business here
        return ""
    return str(namespace) if namespace else ""

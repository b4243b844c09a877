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


def default_namespace(*, namespace_file: Path = SERVICE_ACCOUNT_NAMESPACE) -> str:
    """``POD_NAMESPACE``, else the in-cluster namespace file, else ``default``."""
    from_env = os.environ.get("POD_NAMESPACE", "").strip()
    if from_env:
        return from_env
    try:
        from_file = namespace_file.read_text(encoding="utf-8").strip()
    except OSError:
        from_file = ""
    return from_file or "default"

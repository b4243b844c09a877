"""Defaults for who this replica is and where its Lease lives.

The identity gets a short random suffix so that a restarted pod with the same name never mistakes
its predecessor's Lease for its own: two processes with one identity would both think they lead.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
import string
from pathlib import Path

from k8slease.errors import ConfigError

#: Where Kubernetes mounts the pod's namespace.
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")

_SUFFIX_ALPHABET = string.ascii_lowercase + string.digits
#: A namespace name is an RFC 1123 label.
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def random_suffix(length: int = 5) -> str:
    """A short random lowercase alphanumeric string."""
    return "".join(secrets.choice(_SUFFIX_ALPHABET) for _ in range(length))


def default_identity() -> str:
    """``POD_NAME`` (else the hostname) plus ``-`` and a 5-character random suffix."""
    base = os.environ.get("POD_NAME") or socket.gethostname() or "replica"
    return f"{base}-{random_suffix()}"


def checked_namespace(name: str, *, source: str) -> str:
    """``name`` if it can be a namespace; else ``ConfigError`` naming where it came from."""
    if not _NAMESPACE.match(name):
        raise ConfigError(
            f"{source}={name!r} is not a namespace name "
            "(lowercase letters, digits and '-', at most 63 characters)"
        )
    return name


def default_namespace(*, namespace_file: Path = SERVICE_ACCOUNT_NAMESPACE) -> str:
    """``POD_NAMESPACE``, else the in-cluster namespace file, else ``default``.

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
    return from_file or "default"

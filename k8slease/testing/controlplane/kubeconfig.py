"""Kubeconfigs for the real control plane: its CA, and a client certificate or a token."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

CONTEXT = "k8slease-controlplane"


def _data(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def kubeconfig_document(
    url: str,
    ca_cert: Path,
    *,
    client_cert: Path | None = None,
    client_key: Path | None = None,
    token: str | None = None,
    namespace: str = "default",
) -> dict[str, object]:
    """A self-contained kubeconfig (certificates inlined) for one identity.

    The identity is a client certificate (``client_cert`` and ``client_key``) or a bearer
    ``token``, exactly one of them.
    """
    if (token is None) == (client_cert is None or client_key is None):
        raise ValueError("give either token or both client_cert and client_key")
    user: dict[str, str] = (
        {"token": token}
        if token is not None
        else {
            "client-certificate-data": _data(client_cert),  # type: ignore[arg-type]
            "client-key-data": _data(client_key),  # type: ignore[arg-type]
        }
    )
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": CONTEXT,
                "cluster": {"server": url, "certificate-authority-data": _data(ca_cert)},
            }
        ],
        "users": [{"name": CONTEXT, "user": user}],
        "contexts": [
            {
                "name": CONTEXT,
                "context": {"cluster": CONTEXT, "user": CONTEXT, "namespace": namespace},
            }
        ],
        "current-context": CONTEXT,
        "preferences": {},
    }


def write_document(document: dict[str, object], target: Path) -> Path:
    """Write a kubeconfig (JSON, valid YAML) atomically with mode 0600; returns ``target``."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(json.dumps(document, indent=2) + "\n")
    tmp.replace(target)
    return target

"""Kubeconfigs for the real control plane: its CA, and a client certificate or a token."""

from __future__ import annotations

import base64
from pathlib import Path

from k8slease.testing.kubeconfig import write_private_document

from .certs import KeyPair

CONTEXT = "k8slease-controlplane"


def _data(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def kubeconfig_document(
    url: str,
    ca_cert: Path,
    *,
    client: KeyPair | None = None,
    token: str | None = None,
    namespace: str = "default",
) -> dict[str, object]:
    """A self-contained kubeconfig (certificates inlined) for one identity.

    The identity is a ``client`` key pair (its certificate signed by the CA) or a bearer
    ``token``, exactly one of them.
    """
    if client is not None and token is None:
        user = {"client-certificate-data": _data(client.cert), "client-key-data": _data(client.key)}
    elif token is not None and client is None:
        user = {"token": token}
    else:
        raise ValueError("give either a token or a client key pair")
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
    """Write a kubeconfig atomically with mode 0600, its temporary file never left behind;
    returns ``target``."""
    return write_private_document(document, target)

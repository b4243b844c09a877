"""Writing a kubeconfig that points kubectl and client libraries at the embedded server."""

from __future__ import annotations

import errno
import json
import os
import tempfile
from pathlib import Path

CONTEXT = "k8slease-embedded"


def kubeconfig_document(
    url: str, namespace: str = "default", *, token: str, ca_data: str | None = None
) -> dict[str, object]:
    """A kubeconfig with one cluster (trusting the base64 PEM ``ca_data`` when given), user
    (bearer ``token``) and (current) context for ``url``."""
    cluster: dict[str, str] = {"server": url}
    if ca_data is not None:
        cluster["certificate-authority-data"] = ca_data
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT, "cluster": cluster}],
        "users": [{"name": CONTEXT, "user": {"token": token}}],
        "contexts": [
            {
                "name": CONTEXT,
                "context": {"cluster": CONTEXT, "user": CONTEXT, "namespace": namespace},
            }
        ],
        "current-context": CONTEXT,
        "preferences": {},
    }


def write_kubeconfig(
    url: str,
    path: str | os.PathLike[str] | None = None,
    *,
    token: str,
    ca_data: str | None = None,
) -> Path:
    """Write the kubeconfig (JSON, which is valid YAML) atomically, readable by its owner only
    (it holds the server's token); returns its path.

    Without ``path`` a file in a fresh temporary directory is used. The write goes through a
    temporary file and a rename, so a process waiting for the file never reads half of it.
    """
    target = (
        Path(path)
        if path is not None
        else Path(tempfile.mkdtemp(prefix="k8slease-")) / "kubeconfig"
    )
    return write_private_document(kubeconfig_document(url, token=token, ca_data=ca_data), target)


def write_private_document(document: dict[str, object], target: Path) -> Path:
    """Write ``document`` (JSON, which is valid YAML) to ``target`` atomically, readable by its
    owner only: a kubeconfig holds a token or a client key, so the file is created 0600 (never
    readable by others, not even between the write and a chmod) and its temporary file is never
    left behind; returns ``target``."""
    if target.is_dir():  # the rename below would fail only after the secret was written
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp{os.getpid()}")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(json.dumps(document, indent=2) + "\n")
        tmp.replace(target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target


def kubeconfig_target_problem(path: str | os.PathLike[str]) -> str | None:
    """Why a kubeconfig cannot be written at ``path`` (checked before a server starts, so that
    a usage error is reported as one), or ``None`` when nothing is known to stop it."""
    target = Path(path)
    if target.is_dir():
        return f"--kubeconfig {str(path)!r} is a directory; pass the path of a file"
    parent = next((p for p in (target.parent, *target.parent.parents) if p.exists()), None)
    if parent is not None and not parent.is_dir():
        return f"--kubeconfig {str(path)!r}: {str(parent)!r} is not a directory"
    if parent is not None and not os.access(parent, os.W_OK | os.X_OK):
        return f"--kubeconfig {str(path)!r}: {str(parent)!r} is not writable"
    return None

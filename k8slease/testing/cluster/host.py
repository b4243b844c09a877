"""What the single-node cluster needs from this machine, and why it cannot run when it cannot.

:func:`unavailable` returns one line saying why the cluster cannot run here (not root, no
namespaces, no Go and nothing cached), or None. :func:`ensure_packages` installs the Debian
packages of :data:`~.versions.DEBIAN_PACKAGES` that are missing (``apt-get``, as root).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from k8slease.testing.controlplane.cache import cached as cached_controlplane
from k8slease.testing.controlplane.gotool import BuildError, go_available
from k8slease.testing.tools import run_tool

from . import versions as v
from .build import cached_node_binaries

#: Binaries the namespace plumbing itself calls (util-linux and iproute2).
HOST_COMMANDS = ("unshare", "nsenter", "ip", "mount")


def unavailable() -> str | None:
    """Why the cluster cannot run on this machine (one line), or None when it can."""
    if os.geteuid() != 0:
        return "the single-node cluster needs root (it runs containerd and the kubelet)"
    for command in HOST_COMMANDS:
        if shutil.which(command) is None:
            return f"the single-node cluster needs the {command!r} command (util-linux/iproute2)"
    probe = run_tool(["unshare", "--net", "--mount", "true"], timeout=None)
    if probe.returncode != 0:
        detail = probe.stderr.strip().splitlines()[-1:] or ["no detail"]
        return f"cannot create network and mount namespaces here (unshare: {detail[0]})"
    if not go_available() and (cached_node_binaries() is None or cached_controlplane() is None):
        return "Go is not installed and the cluster's binaries are not cached (no 'go' on PATH)"
    if not Path("/sys/fs/cgroup").is_dir():
        return "no cgroup filesystem at /sys/fs/cgroup"
    return None


def missing_packages() -> list[str]:
    """The Debian packages of the node that are not installed."""
    missing = []
    for package, provides in v.DEBIAN_PACKAGES.items():
        found = Path(provides).exists() if provides.startswith("/") else shutil.which(provides)
        if not found:
            missing.append(package)
    return missing


def ensure_packages(progress: object = None) -> None:
    """Install the missing Debian packages with apt-get (``BuildError`` when impossible)."""
    missing = missing_packages()
    if not missing:
        return
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        raise BuildError(
            f"the cluster needs the Debian packages {' '.join(missing)}; install them "
            "(apt-get install, as root)"
        )
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for args in (
        ["apt-get", "update"],
        ["apt-get", "install", "-y", "--no-install-recommends", *missing],
    ):
        run_tool(args, timeout=None, failure=BuildError, what=" ".join(args[:2]), env=env)

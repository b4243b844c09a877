"""client-go's elector as a benchmark replica: the peer program of ``tests/peers/clientgo``.

``make peers`` builds it into ``build/peers/clientgo-elector`` (only when its sources changed);
:func:`build` runs that and says why when it cannot (no Go toolchain). Its JSON lines
(``started_leading``, ``new_leader``, ``time``) are mapped onto the harness's (``leading``,
``ready``, ``t``). It runs with the benchmark's lease settings and ``ReleaseOnCancel``, so SIGTERM
releases the Lease as client-go applications that set it do.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import IO, Any

from benchmarks.common import NAMESPACE, SETTINGS
from benchmarks.replicas import ROOT, Replica

SOURCES = ROOT / "tests" / "peers" / "clientgo"
BINARY = ROOT / "build" / "peers" / "clientgo-elector"
#: The peer's event names, as the harness calls them.
ALIASES = {"started_leading": "leading", "new_leader": "ready", "stopped_leading": "stopped"}


class Unavailable(RuntimeError):
    """client-go cannot be run here; the message says why."""


def build() -> Path:
    """Build the peer if needed (``make peers``); its path. Raises :class:`Unavailable`."""
    if shutil.which("go") is None:
        raise Unavailable("the Go toolchain (go) is not on PATH")
    done = subprocess.run(["make", "-s", "peers"], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0 or not BINARY.exists():
        raise Unavailable(f"make peers failed: {done.stderr.strip()[-500:]}")
    return BINARY


def versions() -> dict[str, str]:
    """The client-go version the peer is built with (from its go.mod) and ``go version``."""
    match = re.search(r"k8s\.io/client-go (v\S+)", (SOURCES / "go.mod").read_text())
    go = subprocess.run(["go", "version"], capture_output=True, text=True).stdout.strip()
    return {"client_go": match.group(1) if match else "unknown", "go": go}


def _ms(seconds: float) -> str:
    return f"{round(seconds * 1000)}ms"


def elector(kubeconfig: Path, name: str, identity: str, stderr: IO[Any] | None = None) -> Replica:
    """One client-go replica contending for Lease ``name`` with the benchmark's settings.

    client-go's ``RetryPeriod`` is both its renew period and its candidates' poll period, like
    the official Python client's ``retry_period``; it is set to the shared retry interval.
    """
    command = [
        str(BINARY),
        "--kubeconfig", str(kubeconfig),
        "--namespace", NAMESPACE,
        "--lease", name,
        "--identity", identity,
        "--lease-duration", _ms(SETTINGS.lease_duration),
        "--renew-deadline", _ms(SETTINGS.renew_deadline),
        "--retry-period", _ms(SETTINGS.retry_interval),
        "--release-on-cancel",
    ]  # fmt: skip
    return Replica.command(command, identity, stderr, aliases=ALIASES)


class Group:
    """1 leader + N candidates of client-go as N + 1 processes on one Lease (the API load run).

    Each process has its own connection, as separate replicas would.
    """

    def __init__(
        self, kubeconfig: Path, name: str, candidates: int, stderr: IO[Any] | None = None
    ) -> None:
        self.replicas = [
            elector(kubeconfig, name, f"{name}-{i}", stderr) for i in range(candidates + 1)
        ]

    def wait_for(self, event: str, timeout: float) -> float | None:
        """``ready``: the time the last replica saw a leader (client-go reports only non-empty
        holders, so some replica leads by then); ``None`` on timeout."""
        if event != "ready":
            raise ValueError(f"a client-go group only reports 'ready', not {event!r}")
        times = [replica.wait_for("ready", timeout) for replica in self.replicas]
        if any(t is None for t in times):
            return None
        return max(t for t in times if t is not None)

    def close(self, timeout: float = 10.0) -> None:
        for replica in self.replicas:
            replica.process.terminate()
        for replica in self.replicas:
            replica.close(timeout)

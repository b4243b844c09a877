"""The environment of a process a test spawns: the repository root first on ``PYTHONPATH``, so a
child script imports ``tests.support.…`` and this checkout's ``k8slease`` the same way the suite
does (the venv may be an editable install of another checkout); output unbuffered; no in-cluster
configuration leaking in from the environment."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

#: The repository root (the directory holding ``k8slease/`` and ``tests/``).
REPO = Path(__file__).resolve().parents[2]


def child_env(**extra: str) -> dict[str, str]:
    """``os.environ`` plus ``extra``, with :data:`REPO` first on ``PYTHONPATH`` and unbuffered
    output."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", **extra)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p
    )
    env.pop("KUBERNETES_SERVICE_HOST", None)
    return env


def stop_all(procs: Iterable[subprocess.Popen[Any]], *, timeout: float = 30) -> None:
    """SIGTERM every process still running, then wait for each (SIGKILL after ``timeout`` s)."""
    procs = list(procs)
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:  # pragma: no cover - a hung process
            proc.kill()
            proc.wait()

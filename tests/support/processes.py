"""The environment of a process a test spawns: the repository root first on ``PYTHONPATH``, so a
child script imports ``tests.support.…`` and this checkout's ``k8slease`` the same way the suite
does (the venv may be an editable install of another checkout); output unbuffered; no in-cluster
configuration leaking in from the environment."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
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


def run_module(
    module: str, *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``python -m MODULE ARGS`` to its end, its output captured as text; ``env`` on top of
    ``os.environ``, with no in-cluster configuration."""
    environ = dict(os.environ, **(env or {}))
    environ.pop("KUBERNETES_SERVICE_HOST", None)
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environ,
        check=False,
    )


@contextmanager
def serving(
    module: str, *args: str, stop_within: float, niceness: int | None = None
) -> Iterator[str]:
    """``python -m MODULE ARGS`` (a server: ``k8slease apiserver`` or ``controlplane``) running
    while the block runs, which gets the first line it prints; afterwards SIGTERMed, and it must
    exit with status 0 within ``stop_within`` s. ``niceness``: its scheduling priority, where
    this process may set it (a negative one needs root; otherwise left as it is)."""
    process = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    if niceness is not None:
        with contextlib.suppress(PermissionError):
            os.setpriority(os.PRIO_PROCESS, process.pid, niceness)
    try:
        assert process.stdout is not None
        yield process.stdout.readline()
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=stop_within) == 0

"""Running the ``go`` command: finding it, streaming its output, explaining its failures."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from k8slease.testing.tools import run_tool

#: Output lines that mean the module proxy (or the network behind it) could not be reached.
_NETWORK_SIGNS = (
    "dial tcp",
    "no such host",
    "i/o timeout",
    "connection refused",
    "TLS handshake timeout",
    "proxyconnect",
    "network is unreachable",
)
TAIL_LINES = 40


class BuildError(RuntimeError):
    """The control-plane binaries could not be built (the message says why and what to do)."""


def find_go() -> str:
    """The path of the ``go`` command; ``BuildError`` when it is not installed."""
    go = shutil.which("go")
    if go is None:
        raise BuildError(
            "Go is not installed (no 'go' on PATH): the real control plane is built from source "
            "with Go >= 1.26 (https://go.dev/dl/), or point XDG_CACHE_HOME at a cache that "
            "already holds the binaries"
        )
    return go


def go_available() -> bool:
    """Whether a ``go`` command is on PATH."""
    return shutil.which("go") is not None


def go_env(name: str) -> str:
    """One ``go env`` value (``GOPROXY``, ``GOVERSION``, ...)."""
    return run_tool([find_go(), "env", name], timeout=60).stdout.strip()


def tail(path: Path, lines: int = TAIL_LINES) -> str:
    """The last ``lines`` lines of a log file ('' when it does not exist)."""
    try:
        with path.open(errors="replace") as handle:
            return "".join(deque(handle, maxlen=lines))
    except FileNotFoundError:
        return ""


def explain_failure(what: str, log: Path, returncode: int) -> BuildError:
    """A ``BuildError`` for a failed go command: the likely cause and the log's tail."""
    text = tail(log)
    if any(sign in text for sign in _NETWORK_SIGNS):
        cause = (
            f"the Go module proxy is unreachable (GOPROXY={go_env('GOPROXY') or 'unset'}); "
            "the build needs it once per machine to download the Kubernetes and etcd modules"
        )
    else:
        cause = f"go exited with status {returncode}"
    return BuildError(f"{what} failed: {cause}. Full log: {log}\n--- last lines ---\n{text}")


def run_go(
    args: Sequence[str],
    *,
    cwd: Path,
    log: Path,
    what: str,
    progress: Callable[[str], None],
    started: float,
    timeout: float = 3600.0,
) -> None:
    """Run ``go ARGS`` in ``cwd``, output appended to ``log``; progress reported while it runs.

    ``progress`` gets a line when the command starts, then at most every 15 s a summary
    (modules downloaded, packages compiled, the latest one), with the time since ``started``.
    Raises :class:`BuildError` (with the log's tail) when go fails or runs out of time.
    """
    env = dict(os.environ, GO111MODULE="on", GOWORK="off")
    progress(f"[{time.monotonic() - started:6.0f}s] {what}: go {' '.join(args)}")
    with log.open("a") as sink:
        sink.write(f"$ go {' '.join(args)}\n")
        sink.flush()
        process = subprocess.Popen(
            [find_go(), *args],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        counter = _Counter(what, started, progress)
        reader = threading.Thread(
            target=counter.follow, args=(process, sink), name="go-output", daemon=True
        )
        reader.start()
        try:
            returncode = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            reader.join()
            raise BuildError(f"{what} did not finish within {timeout:.0f} s. Log: {log}") from None
        reader.join()
    if returncode != 0:
        raise explain_failure(what, log, returncode)


class _Counter:
    """Counts go's output lines into throttled progress reports."""

    INTERVAL = 15.0

    def __init__(self, what: str, started: float, progress: Callable[[str], None]) -> None:
        self.what, self.started, self.progress = what, started, progress
        self.downloads = 0
        self.packages = 0
        self.last = ""
        self._reported = time.monotonic()

    def follow(self, process: subprocess.Popen[str], sink: TextIO) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            sink.write(line)
            text = line.strip()
            if text.startswith("go: downloading "):
                self.downloads += 1
                self.last = text[len("go: downloading ") :]
            elif text and " " not in text and "/" in text:
                self.packages += 1  # `go build -v` prints each package it compiles
                self.last = text
            now = time.monotonic()
            if now - self._reported >= self.INTERVAL:
                self._reported = now
                self.progress(
                    f"[{now - self.started:6.0f}s] {self.what}: {self.downloads} modules "
                    f"downloaded, {self.packages} packages compiled (last: {self.last})"
                )

"""Replica processes the harness starts, signals and listens to (their JSON lines on stdout)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import psutil

ROOT = Path(__file__).resolve().parent.parent


def python_env() -> dict[str, str]:
    """The environment of child processes: unbuffered, with the repository importable."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": path}


class Replica:
    """``python -m benchmarks.<module> ARGS...`` in a child process that reports JSON lines.

    The first time of each event (``ready``, ``leading``, ``stopped``) is kept; :meth:`wait_for`
    blocks until one arrives (``benchmarks.failover.start_elector`` starts one replica of an
    implementation); :meth:`command` runs any program whose lines carry ``event`` and ``t``
    (or ``time``), with ``aliases`` renaming its events to the harness's.
    """

    def __init__(
        self,
        module: str,
        args: list[str],
        label: str,
        stderr: IO[Any] | None = None,
        *,
        argv: list[str] | None = None,
        aliases: dict[str, str] | None = None,
        stdin: bool = False,
    ) -> None:
        self.label = label
        self._aliases = aliases or {}
        self._events: dict[str, dict[str, Any]] = {}
        self._cond = threading.Condition()
        self.process = subprocess.Popen(
            argv or [sys.executable, "-m", f"benchmarks.{module}", *args],
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr if stderr is not None else subprocess.DEVNULL,
            text=True,
            env=python_env(),
            cwd=ROOT,
        )
        self._reader = threading.Thread(target=self._read, name=f"read-{label}", daemon=True)
        self._reader.start()

    @classmethod
    def command(
        cls,
        argv: list[str],
        label: str,
        stderr: IO[Any] | None = None,
        *,
        aliases: dict[str, str] | None = None,
    ) -> Replica:
        """Any program ``argv`` that prints the harness's JSON lines (events renamed by
        ``aliases``)."""
        return cls("", [], label, stderr, argv=argv, aliases=aliases)

    @property
    def pid(self) -> int:
        return self.process.pid

    def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        for line in stdout:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if not isinstance(record, dict):
                continue
            name = str(record.get("event"))
            record["event"] = self._aliases.get(name, name)
            record.setdefault("t", record.get("time"))
            with self._cond:
                self._events.setdefault(record["event"], record)
                self._cond.notify_all()
        with self._cond:
            self._events.setdefault("exited", {"event": "exited", "t": time.time()})
            self._cond.notify_all()

    def wait_for(self, event: str, timeout: float) -> float | None:
        """The wall-clock time the replica reported ``event`` at; ``None`` on timeout or exit."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while event not in self._events:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or (event != "exited" and "exited" in self._events):
                    return None
                self._cond.wait(remaining)
            return float(self._events[event]["t"])

    def result(self, event: str) -> dict[str, Any]:
        """The whole JSON record of ``event`` (which must have arrived), without its name."""
        with self._cond:
            record = dict(self._events[event])
        record.pop("event", None)
        return record

    def send(self, line: str) -> None:
        """Write ``line`` to the replica's stdin (started with ``stdin=True``)."""
        assert self.process.stdin is not None, "started without stdin=True"
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def signal(self, signum: signal.Signals) -> float:
        """Send ``signum``; returns the wall-clock time just before sending it."""
        sent = time.time()
        self.process.send_signal(signum)
        return sent

    def rss_mb(self) -> float:
        """Resident set size now, in MiB."""
        return float(psutil.Process(self.pid).memory_info().rss) / (1024 * 1024)

    def close(self, timeout: float = 10.0) -> None:
        """Make sure the process has ended (SIGKILL after ``timeout`` seconds)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.process.wait()
        self._reader.join(timeout=2)
        if self.process.stdout is not None:
            self.process.stdout.close()

    def __enter__(self) -> Replica:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

"""Electors of two implementations as processes that report JSON lines: build, run, listen.

Both the client-go peer (``tests/peers/clientgo``, built by ``make peers``) and the k8slease peer
(``k8slease_peer.py``) print ``{"event", "identity", "leader", "time", ...}`` lines;
:class:`PeerProcess` keeps them and lets a test wait for one, and turns them into leadership
intervals on this machine's wall clock.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CLIENTGO_BINARY = ROOT / "build" / "peers" / "clientgo-elector"
K8SLEASE_PEER = Path(__file__).resolve().with_name("k8slease_peer.py")

Event = dict[str, Any]


class PeerUnavailable(RuntimeError):
    """The client-go peer cannot be built here; the message says why (a test skip reason)."""


_build_lock = threading.Lock()


def build_clientgo() -> Path:
    """``make peers`` (rebuilds only when the Go sources changed); the binary's path."""
    with _build_lock:
        if shutil.which("go") is None:
            raise PeerUnavailable("the Go toolchain (go) is not on PATH: cannot build client-go")
        if shutil.which("make") is None:
            raise PeerUnavailable("make is not on PATH: cannot run 'make peers'")
        done = subprocess.run(
            ["make", "-s", "peers"], cwd=ROOT, capture_output=True, text=True, timeout=600
        )
        if done.returncode != 0 or not CLIENTGO_BINARY.exists():
            raise RuntimeError(f"make peers failed:\n{done.stdout}\n{done.stderr}")
        return CLIENTGO_BINARY


@dataclass(frozen=True)
class Timing:
    """Election timing for both implementations, in seconds."""

    lease_duration: float = 3.0
    renew_deadline: float = 2.0
    #: k8slease's renew period (client-go renews every retry period).
    renew_interval: float = 0.5
    #: client-go's retry period (its renew period and its candidates' poll period).
    retry_period: float = 0.25


@dataclass(frozen=True)
class Interval:
    """One leadership term of one process, on this machine's wall clock."""

    identity: str
    start: float
    end: float


def _go_duration(seconds: float) -> str:
    return f"{round(seconds * 1000)}ms"


class PeerProcess:
    """One elector process; ``kind`` is ``"clientgo"`` or ``"k8slease"``."""

    def __init__(
        self,
        kind: str,
        *,
        kubeconfig: Path,
        namespace: str,
        lease: str,
        identity: str,
        timing: Timing,
        stderr_dir: Path | None = None,
    ) -> None:
        common = ["--kubeconfig", str(kubeconfig), "--namespace", namespace, "--lease", lease,
                  "--identity", identity]  # fmt: skip
        if kind == "clientgo":
            command = [str(CLIENTGO_BINARY), *common,
                       "--lease-duration", _go_duration(timing.lease_duration),
                       "--renew-deadline", _go_duration(timing.renew_deadline),
                       "--retry-period", _go_duration(timing.retry_period),
                       "--release-on-cancel"]  # fmt: skip
        elif kind == "k8slease":
            command = [sys.executable, str(K8SLEASE_PEER), *common,
                       "--lease-duration", str(timing.lease_duration),
                       "--renew-interval", str(timing.renew_interval),
                       "--renew-deadline", str(timing.renew_deadline)]  # fmt: skip
        else:
            raise ValueError(f"kind must be 'clientgo' or 'k8slease', got {kind!r}")
        self.kind = kind
        self.identity = identity
        self.events: list[Event] = []
        self.ended_at: float | None = None
        self._cond = threading.Condition(threading.RLock())
        stderr: Any = subprocess.DEVNULL
        if stderr_dir is not None:
            stderr = (stderr_dir / f"{identity}.stderr").open("w")
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)},
        )
        if stderr is not subprocess.DEVNULL:
            stderr.close()
        self._reader = threading.Thread(target=self._read, name=f"peer-{identity}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self._cond:
                self.events.append(event)
                self._cond.notify_all()
        with self._cond:
            self.events.append({"event": "exited", "time": time.time()})
            self._cond.notify_all()

    def wait_for(
        self, event: str, timeout: float, where: Callable[[Event], bool] = lambda e: True
    ) -> Event:
        """The first ``event`` line matching ``where``; fails the test on timeout or exit."""

        def found() -> Event | None:
            return next((e for e in self.events if e["event"] == event and where(e)), None)

        deadline = time.monotonic() + timeout
        with self._cond:
            while (hit := found()) is None:
                remaining = deadline - time.monotonic()
                exited = any(e["event"] == "exited" for e in self.events)
                assert remaining > 0 and not exited, (
                    f"{self.identity} ({self.kind}): no {event!r} within {timeout}s; "
                    f"exited={exited}; events: {self.events}"
                )
                self._cond.wait(remaining)
            return hit

    def wait_count(self, event: str, n: int, timeout: float) -> None:
        """Wait until ``event`` has arrived ``n`` times; fails the test on timeout."""
        with self._cond:
            assert self._cond.wait_for(lambda: self.count(event) >= n, timeout), (
                f"{self.identity}: {event!r} not {n} times within {timeout}s: {self.events}"
            )

    def count(self, event: str) -> int:
        with self._cond:
            return sum(1 for e in self.events if e["event"] == event)

    def kill(self) -> float:
        """SIGKILL; returns the wall-clock time by which the process had surely ended."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)
        self.ended_at = time.time()
        self._reader.join(timeout=5)
        return self.ended_at

    def terminate(self) -> float:
        """SIGTERM; returns the wall-clock time just before sending it."""
        sent = time.time()
        self.process.send_signal(signal.SIGTERM)
        return sent

    def wait_exit(self, timeout: float = 10.0) -> int:
        code = self.process.wait(timeout=timeout)
        self.ended_at = self.ended_at or time.time()
        self._reader.join(timeout=5)
        return code

    def intervals(self) -> list[Interval]:
        """Leadership terms: started_leading to stopped_leading, or to the end of the process."""
        with self._cond:
            events = list(self.events)
        terms: list[Interval] = []
        start: float | None = None
        for event in events:
            if event["event"] == "started_leading":
                start = float(event["time"])
            elif event["event"] == "stopped_leading" and start is not None:
                terms.append(Interval(self.identity, start, float(event["time"])))
                start = None
        if start is not None:
            end = self.ended_at if self.ended_at is not None else float("inf")
            terms.append(Interval(self.identity, start, end))
        return terms

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.wait_exit()
        if self.process.stdout is not None:
            self.process.stdout.close()


def overlaps(intervals: list[Interval]) -> list[tuple[Interval, Interval]]:
    """Pairs of terms of different identities that overlap in time."""
    ordered = sorted(intervals, key=lambda i: i.start)
    found = []
    for i, a in enumerate(ordered):
        for b in ordered[i + 1 :]:
            if b.start >= a.end:
                break
            if b.identity != a.identity:
                found.append((a, b))
    return found

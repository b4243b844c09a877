"""What the chaos scenarios share: replica processes, their journals, and the checks on them.

Every replica appends what it did to a journal, timed on CLOCK_MONOTONIC (shared by the
processes of one machine): the suite reads the journals back to check that no two processes
acted at the same instant, and polls them (with a deadline) for what it waits on.
"""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.support.polling import poll as poll  # the suite's one poll, for the scenarios
from tests.support.processes import REPO as REPO
from tests.support.processes import child_env

HERE = Path(__file__).resolve().parent


def end_all(procs: Iterable[subprocess.Popen[Any]]) -> None:
    """SIGKILL every process still running (SIGCONT first: it may be stopped) and reap each."""
    for proc in procs:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGCONT)
            proc.kill()
        proc.wait(timeout=10)


class Procs:
    """Named processes of one scenario, each with a journal and a log in ``tmp``."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self._logs: list[Any] = []

    def spawn(self, name: str, argv: Sequence[str], **env: str) -> subprocess.Popen[bytes]:
        out = open(self.tmp / f"{name}.out", "wb")  # noqa: SIM115 (closed in close())
        self._logs.append(out)
        proc = subprocess.Popen(
            [sys.executable, *argv], stdout=out, stderr=subprocess.STDOUT, env=child_env(**env),
            cwd=REPO,
        )  # fmt: skip
        self.procs[name] = proc
        return proc

    def alive(self, name: str) -> bool:
        proc = self.procs.get(name)
        return proc is not None and proc.poll() is None

    def live(self) -> list[str]:
        return [n for n in self.procs if self.alive(n)]

    def signal(self, name: str, sig: int) -> None:
        self.procs[name].send_signal(sig)

    def close(self) -> None:
        end_all(self.procs.values())
        for out in self._logs:
            out.close()

    def output(self, name: str) -> str:
        path = self.tmp / f"{name}.out"
        return path.read_text(errors="replace") if path.exists() else ""


def proxied_kubeconfig(server: Any, port: int, out: Path) -> Path:
    """A copy of ``server``'s kubeconfig (a loopback server) at ``out``, naming ``port`` (a
    proxy's in front of it) instead of the server's own; TLS is unchanged."""
    text = Path(server.kubeconfig).read_text()
    url = re.compile(r"(server\"?:\s*\"?https?://127\.0\.0\.1:)(\d+)")
    assert url.search(text), "the kubeconfig names a loopback server"
    out.write_text(url.sub(lambda m: f"{m.group(1)}{port}", text))
    return out


def lines(path: Path) -> list[list[str]]:
    """A journal's complete lines, split (a line being written is left for the next read)."""
    if not path.exists():
        return []
    text = path.read_text(errors="replace")
    if not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
    return [line.split() for line in text.splitlines() if line.strip()]


Segment = tuple[float, float, str, str]  # first act, last act, key (token or tick/token), who


def overlaps(segments: Iterable[Segment]) -> list[tuple[Segment, Segment]]:
    """Pairs of segments of different processes that share an instant."""
    ordered = sorted(segments)
    found = []
    for i, x in enumerate(ordered):
        for y in ordered[i + 1 :]:
            if y[0] > x[1]:
                break
            if y[3] != x[3]:
                found.append((x, y))
    return found


def segments_by(
    rows: Iterable[tuple[str, str, float]], *, split_after: float | None = None
) -> list[Segment]:
    """(who, key, when) acts grouped into segments per (who, key); with ``split_after``, a
    pause between two acts longer than that starts a new segment.

    Leadership is keyed by fencing token, which identifies a term only below its ceiling: once a
    hand edit has put it at 2^63-1, every later grant keeps it (ceiling C2), and one process's two
    terms around another's would merge into one span that seems to overlap the other's term.
    The journal writes an act every 5 ms while leading, so a pause of ``split_after`` seconds
    means the process was not leading in it."""
    acts: dict[tuple[str, str], list[float]] = {}
    for who, key, when in rows:
        acts.setdefault((who, key), []).append(when)
    segments: list[Segment] = []
    for (who, key), times in acts.items():
        times.sort()
        start = last = times[0]
        for when in times[1:]:
            if split_after is not None and when - last > split_after:
                segments.append((start, last, key, who))
                start = when
            last = when
        segments.append((start, last, key, who))
    return segments


#: How faulthandler heads each thread's stack.
STACK = "(most recent call first)"


def graceful_stop(procs: Procs, name: str, within: float) -> None:
    """SIGTERM ``name`` and wait for it to end (a release needs one request on a busy machine);
    if it does not, its threads' stacks (SIGUSR1, faulthandler) go into the failure."""
    procs.signal(name, signal.SIGTERM)
    try:
        procs.procs[name].wait(timeout=within)
    except subprocess.TimeoutExpired:
        dumped = procs.output(name).count(STACK)
        procs.signal(name, signal.SIGUSR1)
        with contextlib.suppress(AssertionError):  # no stacks after all: fail with what it said
            poll("stacks", lambda: procs.output(name).count(STACK) > dumped, 10)
        raise AssertionError(
            f"{name} still runs {within} s after SIGTERM:\n{procs.output(name)[-6000:]}"
        ) from None


#: A tick as the replicas' log lines name it (``tick=...`` or a quoted ISO time).
TICK_FIELD = re.compile(r"tick='?([0-9T:.+\-]+)")
QUOTED_TIME = re.compile(r"'([0-9]{4}-[^']+)'")


def _second(iso: str) -> int:
    return round(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp())


def unnamed_skips(
    cluster: Any, *, since: float, until: float, before_tick: int
) -> tuple[list[int], dict[int, list[str]]]:
    """The ticks before ``before_tick`` that the replicas' logs name between ``since`` and
    ``until`` (CLOCK_MONOTONIC) and that nobody ran; and of those, the ones no replica named at
    WARNING or above (with the lines that named them), unless a replica reported dropped ticks
    in that span (``job.ticks_dropped``: once per outage, as documented)."""
    ran = {r.tick for r in cluster.runs()}
    named: dict[int, list[str]] = {}
    warned: set[int] = set()
    dropping = False
    for who in cluster.replicas():
        for line in cluster.log_lines(who):
            parts = line.split(" ", 3)
            if len(parts) < 4 or not since <= float(parts[0]) <= until:
                continue
            dropping = dropping or "job.ticks_dropped" in line
            for iso in TICK_FIELD.findall(line) + QUOTED_TIME.findall(line):
                try:
                    second = _second(iso)
                except ValueError:
                    continue
                named.setdefault(second, []).append(f"{who}: {line}")
                if parts[1] in ("WARNING", "ERROR"):
                    warned.add(second)
    skipped = sorted(t for t in named if t not in ran and t < before_tick)
    silent = {} if dropping else {t: named[t] for t in skipped if t not in warned}
    return skipped, silent

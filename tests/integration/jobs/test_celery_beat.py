"""Celery beat in every replica (issue 25), with real Celery and a real broker: Redis from
Debian's ``redis-server`` on a loopback port, three ``celery beat`` processes using
``TickLockScheduler`` and one worker. An entry due every 2 seconds is sent once per tick while any
beat is alive, also across a SIGTERM of the beat that sent the last tick (no gap) and the start
of a replacement with that beat's stale schedule file, and never twice after a SIGKILL of one
(its lock is waited out: ticks may be lost then, never doubled). Runs on both servers; beat
and the worker run on real clocks, so the test waits for ticks.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from k8slease.lease.jobrecord import job_state_from_lease
from k8slease.lease.transport import LeaseTransport
from k8slease.testing.pytest_plugin import Server
from tests.support.polling import poll
from tests.support.processes import stop_all

pytest.importorskip("celery", reason="the celery extra is not installed (pip install -e '.[dev]')")
redis = pytest.importorskip("redis", reason="the redis client is not installed (dev extra)")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

#: the entry's interval: two seconds leave room for a beat slowed down by a loaded machine
PERIOD = timedelta(seconds=2)
LEASE = "beat.record-every-2s"
SCHEDULER = "k8slease.jobs.celerybeat:TickLockScheduler"

APP = textwrap.dedent(
    """
    import os

    from celery import Celery

    app = Celery("beatapp", broker=os.environ["BROKER"])
    app.conf.update(
        timezone="UTC",
        enable_utc=True,
        broker_connection_retry_on_startup=True,
        beat_schedule={
            "record-every-2s": {"task": "beatapp.record", "schedule": 2.0},
        },
        k8slease_beat={
            "group": "beat",
            "namespace": os.environ["NAMESPACE"],
            "identity": os.environ["IDENTITY"],
            "lock_at_most_for": 3,
        },
    )


    @app.task(bind=True)
    def record(self):
        line = f"{self.request.k8slease_tick} {self.request.k8slease_fencing_token}\\n"
        fd = os.open(os.environ["RUNS"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
    """
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    """A Redis server of its own on a loopback port (Debian's redis-server)."""
    binary = shutil.which("redis-server")
    if binary is None:
        reason = "redis-server is not installed (apt-get install redis-server)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}: CI must install it")
        pytest.skip(reason)
    port = _free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(tmp_path), "--protected-mode", "yes"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"redis://127.0.0.1:{port}/0"
    try:
        client = redis.Redis.from_url(url)

        def answers() -> bool:
            assert proc.poll() is None, "redis-server exited"
            with contextlib.suppress(redis.exceptions.ConnectionError):
                return bool(client.ping())
            return False

        poll("an answer from redis-server", answers, 20, every=0.1)
        client.close()
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def _runs(path: Path) -> list[tuple[datetime, int]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        tick, token = line.split()
        out.append((datetime.fromisoformat(tick), int(token)))
    return out


def _wait_for_ticks(path: Path, count: int, *, after: datetime | None, timeout: float = 90) -> None:
    poll(
        f"{count} ticks sent",
        lambda: len({t for t, _ in _runs(path) if after is None or t > after}) >= count,
        timeout,
        every=0.2,
    )


def _sender(api: Server, namespace: str) -> str:
    """The identity of the beat that sent the newest tick, from the job's Lease."""
    state = job_state_from_lease(LeaseTransport(api.api_client(), namespace).get(LEASE))
    assert state.last_run is not None
    return state.last_run.holder


def test_three_beats_send_each_tick_once_across_sigterm_and_sigkill(
    redis_url: str, k8s_apiserver: Server, k8s_namespace: str, tmp_path: Path
) -> None:
    (tmp_path / "beatapp.py").write_text(APP)
    runs = tmp_path / "runs.txt"
    base = {
        **os.environ,
        "BROKER": redis_url,
        "NAMESPACE": k8s_namespace,
        "RUNS": str(runs),
        "KUBECONFIG": str(k8s_apiserver.kubeconfig),
        "PYTHONPATH": str(tmp_path),
    }
    celery = [sys.executable, "-m", "celery", "-A", "beatapp"]
    procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(name: str, args: list[str]) -> None:
        log = (tmp_path / f"{name}.log").open("wb")
        procs[name] = subprocess.Popen(
            [*celery, *args], cwd=tmp_path, env={**base, "IDENTITY": name},
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip

    try:
        start("worker", ["worker", "--pool=solo", "--loglevel=INFO", "--without-heartbeat",
                         "--without-mingle", "--without-gossip"])  # fmt: skip
        for i in range(3):
            schedule_file = str(tmp_path / f"beat-{i}.db")
            start(f"beat-{i}", ["beat", "-S", SCHEDULER, "-s", schedule_file, "--loglevel=INFO"])
        _wait_for_ticks(runs, 5, after=None)

        # a rolling update's graceful stop: the beat that sent the newest tick gets SIGTERM
        sender = _sender(k8s_apiserver, k8s_namespace)
        procs[sender].send_signal(signal.SIGTERM)
        procs[sender].wait(30)
        stopped_at = max(t for t, _ in _runs(runs))
        # ... and its replacement starts with the stopped beat's local schedule file, stale by
        # now: the Lease, not that file, decides which ticks were sent
        stale = str(tmp_path / f"{sender}.db")
        start("beat-3", ["beat", "-S", SCHEDULER, "-s", stale, "--loglevel=INFO"])
        _wait_for_ticks(runs, 4, after=stopped_at)
        graceful = sorted({t for t, _ in _runs(runs)})

        # a crash: SIGKILL the beat that sent the newest tick
        killed = _sender(k8s_apiserver, k8s_namespace)
        assert killed != sender
        procs[killed].kill()
        procs[killed].wait(30)
        killed_at = max(t for t, _ in _runs(runs))
        _wait_for_ticks(runs, 3, after=killed_at + timedelta(seconds=3))
    finally:
        stop_all(procs.values())

    sent = _runs(runs)
    per_tick = Counter(t for t, _ in sent)
    assert max(per_tick.values()) == 1, [t for t, n in per_tick.items() if n > 1]
    first, last = graceful[0], graceful[-1]
    expected = [first + PERIOD * i for i in range((last - first) // PERIOD + 1)]
    assert graceful == expected, sorted(set(expected) - set(graceful))
    tokens = [token for _, token in sorted(sent)]
    assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens)
    state = job_state_from_lease(
        LeaseTransport(k8s_apiserver.api_client(), k8s_namespace).get(LEASE)
    )
    assert state.claimed_tick is not None and state.claimed_tick >= max(per_tick)

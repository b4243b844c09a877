"""Electors in separate processes (examples/leader_app.py) against the embedded API server.

A SIGKILLed leader is replaced once its Lease has been seen unchanged for leaseDurationSeconds;
a SIGTERMed leader releases its Lease and is replaced well under a second later.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from k8slease.testing.server import APIServer
from tests.integration.election.elector_helpers import LeaseWatcher, server_for_lease

APP = Path(__file__).resolve().parents[3] / "examples" / "leader_app.py"
LEASE_DURATION = 2.0

pytestmark = pytest.mark.slow


@pytest.fixture
def processes() -> Iterator[dict[str, subprocess.Popen[bytes]]]:
    running: dict[str, subprocess.Popen[bytes]] = {}
    yield running
    for process in running.values():
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)


def spawn(server: APIServer, identity: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            str(APP),
            "--kubeconfig", str(server.kubeconfig),
            "--name", "demo",
            "--namespace", "default",
            "--identity", identity,
            "--lease-duration", str(int(LEASE_DURATION)),
            "--renew-interval", "0.5",
            "--renew-deadline", "1.5",
            "--retry-interval", "1",
            "--work-interval", "0.5",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip


def test_sigkill_and_sigterm_failover_across_processes(
    request: pytest.FixtureRequest,
    k8s_apiserver: APIServer,
    processes: dict[str, subprocess.Popen[bytes]],
) -> None:
    server = server_for_lease(request, "default", "demo")
    client = server.api_client()
    watch = LeaseWatcher(client, "default", "demo")
    try:
        for i in range(3):
            processes[f"p{i}"] = spawn(server, f"p{i}")
        _, record = watch.wait_for(lambda r: r.held, 30)
        # let every replica start up and watch before failing anything
        watch.wait_for(lambda r: r.holder == record.holder, 5, after=time.monotonic() + 2.0)

        # crash: SIGKILL the leader; nobody may take over before leaseDurationSeconds
        victim = record.holder
        token = record.fencing_token
        processes[victim].send_signal(signal.SIGKILL)
        killed = time.monotonic()
        processes[victim].wait(timeout=5)
        last_renew_seen = max(at for at, r, _ in watch.history if r.holder == victim)
        at, record = watch.wait_for(lambda r: r.held and r.holder != victim, 10, after=killed)
        crash_failover = at - killed
        print(
            f"crash failover after SIGKILL: {crash_failover:.3f}s "
            f"({at - last_renew_seen:.3f}s after the last renew)"
        )
        assert at - last_renew_seen >= LEASE_DURATION - 0.05
        assert crash_failover < LEASE_DURATION + 1.5
        assert record.fencing_token == token + 1

        # graceful: SIGTERM the new leader; it releases, a candidate takes over at once
        leader = record.holder
        token = record.fencing_token
        processes[leader].send_signal(signal.SIGTERM)
        terminated = time.monotonic()
        at, record = watch.wait_for(
            lambda r: r.held and r.holder not in (victim, leader), 5, after=terminated
        )
        graceful_failover = at - terminated
        print(f"graceful failover after SIGTERM: {graceful_failover:.3f}s")
        assert graceful_failover < 1.0
        assert record.fencing_token == token + 1
        # after the release the signal takes its usual course: the default action ends it
        assert processes[leader].wait(timeout=10) == -signal.SIGTERM
        released = [r for at2, r, _ in watch.history if terminated <= at2 <= at and not r.held]
        assert released and released[0].duration_seconds == 1, "released as client-go does"
    finally:
        watch.close()
        client.close()

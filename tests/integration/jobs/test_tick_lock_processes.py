"""The tick lock's recipes as real processes (issue 25): three replicas of
``examples/schedule_app.py`` (the ``schedule`` library) and of ``examples/loop_app.py`` (an
``asyncio`` loop) fire every tick of a 2 s period; each tick runs exactly once while a replica is
alive, also across a SIGTERM of the replica that ran the last tick, and never twice after a
SIGKILL of one (its lock is waited out for ``lock_at_most_for``, so ticks may be lost then, never
doubled). Runs on both servers; the processes' own clocks are real, so the test waits for ticks.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from k8slease.lease.jobrecord import job_state_from_lease
from k8slease.lease.transport import LeaseTransport
from k8slease.testing.pytest_plugin import Server
from tests.support.polling import poll
from tests.support.processes import stop_all

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
#: the tick period: two seconds leave room for a replica slowed down by a loaded machine
PERIOD = timedelta(seconds=2)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

APPS = {
    "schedule": (EXAMPLES / "schedule_app.py", ["--every", "0.5"], "reports.report"),
    "asyncio-loop": (EXAMPLES / "loop_app.py", [], "sweeps.sweep"),
}


def _runs(path: Path) -> list[tuple[str, datetime, int]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        identity, tick, token = line.split()
        out.append((identity, datetime.fromisoformat(tick), int(token)))
    return out


def _wait_for_ticks(path: Path, count: int, *, after: datetime | None, timeout: float = 60) -> None:
    """Wait (real time: the replicas fire on their own clocks) until ``count`` ticks later than
    ``after`` have started."""
    poll(
        f"{count} ticks run",
        lambda: len({tick for _, tick, _ in _runs(path) if after is None or tick > after}) >= count,
        timeout,
    )


def _last(path: Path) -> tuple[str, datetime, int]:
    return max(_runs(path), key=lambda run: run[1])


@pytest.mark.parametrize("app", sorted(APPS))
def test_three_replicas_run_every_tick_exactly_once_across_sigterm_and_sigkill(
    app: str, k8s_apiserver: Server, k8s_namespace: str, tmp_path: Path
) -> None:
    if app == "schedule":
        pytest.importorskip("schedule", reason="the dev extra installs the schedule library")
    script, extra, lease_name = APPS[app]
    runs = tmp_path / "runs.txt"
    period = str(PERIOD.total_seconds())
    procs: dict[str, subprocess.Popen[str]] = {}
    try:
        for i in range(3):
            identity = f"replica-{i}"
            procs[identity] = subprocess.Popen(
                [sys.executable, str(script), "--kubeconfig", str(k8s_apiserver.kubeconfig),
                 "--namespace", k8s_namespace, "--identity", identity, "--period", period,
                 "--lock-at-most-for", "3", "--work", "1",  "--runs", str(runs), *extra],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
        for identity, proc in procs.items():
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == f"{identity} ready", proc.stderr
        _wait_for_ticks(runs, 5, after=None)

        # graceful: the replica that ran the newest tick stops; the others go on, no gap
        sender, _, _ = _last(runs)
        procs[sender].send_signal(signal.SIGTERM)
        assert procs[sender].wait(30) == 0, procs[sender].communicate()[1]
        stopped_at = _last(runs)[1]
        _wait_for_ticks(runs, 4, after=stopped_at)
        graceful = sorted({tick for _, tick, _ in _runs(runs)})

        # a crash in the middle of a run: SIGKILL the replica as soon as it starts a tick (a
        # run takes 1 s); its lock is waited out (lock_at_most_for 3 s), then ticks go on
        _wait_for_ticks(runs, 1, after=_last(runs)[1])
        killed, killed_at, _ = _last(runs)
        procs[killed].kill()
        procs[killed].wait(30)
        _wait_for_ticks(runs, 3, after=killed_at + timedelta(seconds=3))
    finally:
        stop_all(procs.values())

    done = _runs(runs)
    per_tick = Counter(tick for _, tick, _ in done)
    assert max(per_tick.values()) == 1, [t for t, n in per_tick.items() if n > 1]  # never twice
    # while a replica was alive (graceful handover included) no tick was missed
    first, last = graceful[0], graceful[-1]
    expected = [first + PERIOD * i for i in range((last - first) // PERIOD + 1)]
    assert graceful == expected, sorted(set(expected) - set(graceful))
    tokens = [token for _, _, token in sorted(done, key=lambda run: run[1])]
    assert tokens == sorted(tokens)  # fencing tokens grow tick after tick
    lease = LeaseTransport(k8s_apiserver.api_client(), k8s_namespace).get(lease_name)
    state = job_state_from_lease(lease)
    # the run killed mid-way is recorded lost by the replica that took the lock over (or, if the
    # kill came after the run ended, as succeeded): every tick that started has a record
    assert state.count("succeeded") + state.count("lost") == len(per_tick)
    assert state.claimed_tick is not None and state.claimed_tick >= max(per_tick)

"""Chaos, issue 26: the API server paused across a tick, with the default ``lock_at_most_for``.

Three ``Jobs`` replicas (tests/chaos/chaos_jobs.py: a tick job every 2 s, ``lock_at_most_for``
600 s, the default) while the API server stops answering for 15 s (embedded: every request held
until it resumes, then applied; real: kube-apiserver SIGSTOPped, then SIGCONTed: it finishes
what it had started). Claims sent during the pause time out at the replicas and may be applied
after. Measured on main before issue 26: the Lease then named a holder that did not know it held
the lock and every replica skipped each tick at DEBUG until ``lock_at_most_for`` ran out (59
ticks, 607 s).

Checked: the job runs again at the first tick after the server is back (within two ticks, the
claim spread and 2 s); every tick from the pause to that run that nobody ran is named at WARNING
by some replica, or falls in an outage in which the scheduler dropped ticks (reported once per
outage by ``job.ticks_dropped``, as documented); no two runs overlap; no tick is started twice;
no run after the pause is recorded lost.
"""

from __future__ import annotations

import signal
import time
from typing import Any

import pytest

from k8slease.testing.server import APIServer
from tests.chaos.chaoslib import poll, unnamed_skips
from tests.chaos.jobcluster import START_WITHIN, JobCluster
from tests.chaos.test_chaos_election import _kube_apiserver

pytestmark = [pytest.mark.chaos, pytest.mark.slow]

EVERY, LOCK, RUN = 2.0, 600.0, 0.5
PAUSE = 15.0
CLAIM_SPREAD = 2 * 0.5
BACK_WITHIN = 2 * EVERY + CLAIM_SPREAD + 2.0


@pytest.fixture
def cluster(jobs_cluster: JobCluster) -> JobCluster:
    return jobs_cluster


def _spawn(c: JobCluster, name: str) -> None:
    c.spawn(name, every=EVERY, lock=LOCK, run=RUN)


def _pause(server: Any) -> Any:
    if isinstance(server, APIServer):
        server.faults.pause()
        return server.faults.resume
    apiserver = _kube_apiserver(server)
    apiserver.send_signal(signal.SIGSTOP)
    return lambda: apiserver.send_signal(signal.SIGCONT)


def test_a_tick_across_an_api_server_pause_runs_again_at_once_and_no_skip_is_silent(
    cluster: JobCluster,
) -> None:
    c = cluster
    for name in ("a", "b", "c"):
        _spawn(c, name)
    poll("a finished run", lambda: [r for r in c.runs() if r.outcome == "done"], START_WITHIN)
    # pause right after a claim write may have been sent: just before a tick fires
    last = c.runs()[-1]
    poll("the next run", lambda: [r for r in c.runs() if r.tick > last.tick], EVERY * 3)
    time.sleep(EVERY - 0.1)  # a real server's pause: real seconds, not a decision to wait for
    paused_at = time.monotonic()
    resume = _pause(c.server)
    try:
        time.sleep(PAUSE)  # the pause is the fault
    finally:
        resume()
    resumed_at = time.monotonic()

    first = c.run_after(resumed_at, "the pause", BACK_WITHIN + 10)
    back = first.start - resumed_at
    runs = c.stop_replicas()  # no overlap, no tick twice

    # every tick from the pause to the first run after it: run, or named at WARNING
    skipped, silent = unnamed_skips(
        c, since=paused_at - EVERY, until=first.start, before_tick=first.tick
    )
    print(
        f"back after {back:.2f} s (bound {BACK_WITHIN:g}); ticks skipped {len(skipped)}, "
        f"unnamed at WARNING {len(silent)}; runs {len(runs)}"
    )
    for who in c.replicas():
        for line in c.log_lines(who):
            if " WARNING " in line and float(line.split(" ", 1)[0]) >= paused_at - EVERY:
                print(f"{who}: {line[:240]}")
    assert back <= BACK_WITHIN, f"the job ran again {back:.2f} s after the server was back"
    assert not silent, f"ticks skipped without a WARNING: {silent}"
    assert not [r for r in runs if r.start > resumed_at and r.outcome == "lost"]

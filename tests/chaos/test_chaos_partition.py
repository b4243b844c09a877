"""Chaos, issue 26: a tick's holder cut off from the API server mid-run finishes its run.

Three ``Jobs`` replicas (tests/chaos/chaos_jobs.py: a tick job every 2 s, 1 s runs), each talking
to the server through a proxy of its own (:class:`~k8slease.testing.slowproxy.DelayProxy`); the
operator talks to the server directly. Mid-run, the holder's proxy is partitioned: nothing
reaches the server from it or comes back, and what it sent meanwhile arrives after the heal (TCP
retransmits). Its run goes on and ends well within its lock (it never reads ``ctx.lost``); its
release cannot be written. Measured on main before issue 26: the completed run was recorded
``lost`` (a RunLost Event, the operator's lost count +1) though it had succeeded.

Two spells, on both tiers:

* ``shorter`` than ``lock_at_most_for`` (10 s lock, 5 s partition): nobody may take the lock
  over; the holder keeps its run record and writes it once the partition heals. The run is
  never recorded ``lost``: no ``lost`` count on the Lease or in the operator's status at any
  time, no RunLost Event.
* ``longer`` (3 s lock, 8 s partition): another replica takes the lock over once it has seen it
  unchanged for ``lock_at_most_for`` and, not knowing how the run ended, records it ``lost`` (as
  documented: a takeover cannot tell a holder cut off from a dead one). Once healed, the
  holder's record corrects it: the Lease and the operator's status count the run as
  succeeded, none lost, and the operator's recent runs hold that tick once, ``succeeded``.

(The operator keeps the ten most recent runs: the record is looked for right after the heal.)
Both: no two runs overlap, no tick is started twice, the job runs again within a tick or two of
the heal, every tick from the partition to that run that nobody ran is named at WARNING, and in
the end the Lease's counts are the journals' (every done run succeeded, none lost).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from k8slease.operator.history import format_time
from k8slease.testing.slowproxy import DelayProxy
from tests.chaos.chaoslib import poll, proxied_kubeconfig, unnamed_skips
from tests.chaos.jobcluster import START_WITHIN, JobCluster

pytestmark = [pytest.mark.chaos, pytest.mark.slow]

EVERY, RUN = 2.0, 1.0
CLAIM_SPREAD = 2 * 0.5
REPLICAS = ("a", "b", "c")


@dataclass(frozen=True)
class Spell:
    name: str
    lock: float  # lock_at_most_for
    partition: float  # how long the holder is cut off

    @property
    def back_within(self) -> float:
        """The job runs again this soon after the heal: a tick, the claim order, the kept
        record's write (a request timeout and a retry) and 2 s for a busy machine."""
        return 2 * EVERY + CLAIM_SPREAD + 2.0


SPELLS = [Spell("shorter", lock=10.0, partition=5.0), Spell("longer", lock=3.0, partition=8.0)]


@pytest.fixture
def cluster(jobs_cluster: JobCluster) -> Iterator[tuple[JobCluster, dict[str, DelayProxy]]]:
    c = jobs_cluster
    proxies: dict[str, DelayProxy] = {}
    try:
        for name in REPLICAS:
            proxies[name] = DelayProxy(("127.0.0.1", c.server.port)).start()
        yield c, proxies
    finally:
        for proxy in proxies.values():
            proxy.stop()


def _job(status: dict[str, Any]) -> dict[str, Any]:
    return next((j for j in status.get("jobs", []) if j.get("name") == "tick"), {})


@pytest.mark.parametrize("spell", SPELLS, ids=[s.name for s in SPELLS])
def test_a_run_finished_while_its_holder_was_cut_off_is_recorded_as_it_ended(
    cluster: tuple[JobCluster, dict[str, DelayProxy]], spell: Spell
) -> None:
    c, proxies = cluster
    for name in REPLICAS:
        kubeconfig = proxied_kubeconfig(c.server, proxies[name].port, c.tmp / f"{name}.kubeconfig")
        c.spawn(name, every=EVERY, lock=spell.lock, run=RUN, kubeconfig=kubeconfig)
    c.spawn_operator()
    poll("a finished run", lambda: [r for r in c.runs() if r.outcome == "done"], START_WITHIN)
    poll(
        "the operator's status with a run",
        lambda: _job(c.status()).get("counts", {}).get("succeeded", 0) > 0,
        2 * START_WITHIN,
    )

    victim = c.wait_mid_run()
    cut_at = time.monotonic()
    proxies[victim.who].partition()
    lost_seen: list[dict[str, Any]] = []  # the Lease's and the status's lost counts meanwhile
    try:
        ended = c.wait_ended(victim, within=RUN + 5)
        assert ended.outcome == "done", f"the cut-off holder's run ended {ended.outcome!r}"
        while time.monotonic() < cut_at + spell.partition:  # the partition is the fault
            lease = c.job_lease()
            lost_seen.append(
                {
                    "lease": lease.job.counts.get("lost", 0) if lease else 0,
                    "status": _job(c.status()).get("counts", {}).get("lost", 0),
                }
            )
            time.sleep(0.5)
    finally:
        proxies[victim.who].heal()
    healed_at = time.monotonic()

    # the victim's record written: the Lease and the operator count it, none lost
    def recorded() -> dict[str, Any] | None:
        lease = c.job_lease()
        job = _job(c.status())
        counts = job.get("counts", {})
        runs = [r for r in job.get("recentRuns", []) if r.get("fencingToken") == victim.token]
        ok = (
            lease is not None
            and lease.job.counts.get("lost", 0) == 0
            and counts.get("lost", 0) == 0
            and [r.get("outcome") for r in runs] == ["succeeded"]
        )
        return job if ok else None

    try:
        poll("the cut-off run recorded succeeded", recorded, 15)
    except AssertionError:
        lease = c.job_lease()
        raise AssertionError(
            f"victim {victim}; lease counts {lease.job.counts if lease else None}; status "
            f"{_job(c.status())}; runs {[(r.who, r.tick, r.token, r.outcome) for r in c.runs()]}"
        ) from None

    first = c.run_after(healed_at, "the heal", spell.back_within + 10)
    back = first.start - healed_at
    runs = c.stop_replicas()  # no overlap, no tick twice
    lease = c.job_lease()
    assert lease is not None
    counts = dict(lease.job.counts)
    skipped, silent = unnamed_skips(c, since=cut_at, until=first.start, before_tick=first.tick)
    done = [r for r in runs if r.outcome == "done"]
    lost = [r for r in runs if r.outcome == "lost"]
    events = c.events()
    reasons = {e.reason for e in events}
    victim_tick = format_time(datetime.fromtimestamp(victim.tick, UTC))
    victim_lost = [
        e.message for e in events if e.reason == "RunLost" and victim_tick in (e.message or "")
    ]
    print(
        f"\npartition {spell.name}: holder {victim.who} tick {victim.tick} cut "
        f"{cut_at - victim.start:.2f} s into its run; back {back:.2f} s after the heal"
        f" (bound {spell.back_within:g}); ticks skipped {len(skipped)}, unnamed at WARNING "
        f"{len(silent)}; lost counts during the partition (lease, status) "
        f"{sorted({(s['lease'], s['status']) for s in lost_seen})}; final lease counts {counts};"
        f" runs {len(runs)} ({len(done)} done, {len(lost)} lost); Event reasons {sorted(reasons)}"
    )
    assert back <= spell.back_within, f"the job ran again {back:.2f} s after the heal"
    assert not silent, f"ticks skipped without a WARNING: {silent}"
    assert counts.get("succeeded", 0) == len(done), (counts, len(done))
    assert counts.get("lost", 0) == len(lost), (counts, lost)
    if spell.lock > spell.partition:  # nobody could take over: never recorded lost, anywhere
        assert not any(s["lease"] or s["status"] for s in lost_seen), lost_seen
        assert not victim_lost, victim_lost
    else:  # the takeover's lost record was corrected, and said so
        corrected = [
            e.message
            for e in events
            if e.reason == "RunCorrected" and victim_tick in (e.message or "")
        ]
        assert len(corrected) == (1 if victim_lost else 0), (victim_lost, corrected)

"""Failover time: from SIGTERM (graceful) or SIGKILL (crash) of the leader to the new leader's
``on_started_leading``, with replicas as separate processes on the embedded API server.

Trials are chained: the candidate that takes over leads the next trial, against a fresh
candidate. Before each signal the candidate has run for a random 1.2-2.2 s (more than one poll
period), so the signal lands at a random point of the renew cycle. Times are ``time.time()``
in the harness (signal) and in the new leader (start), on the same machine.
"""

from __future__ import annotations

import random
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from benchmarks import peer_clientgo
from benchmarks.common import SETTINGS, summary
from benchmarks.replicas import Replica

KINDS: dict[str, signal.Signals] = {"graceful": signal.SIGTERM, "crash": signal.SIGKILL}
START_TIMEOUT = 30.0


@dataclass
class FailoverRun:
    """Trials of one implementation and one kind of failover."""

    impl: str
    kind: str
    seconds: list[float] = field(default_factory=list)
    failures: int = 0
    rss_leader_mb: float | None = None
    rss_candidate_mb: float | None = None

    def to_json(self) -> dict[str, Any]:
        stats = summary(self.seconds)
        return {
            "impl": self.impl,
            "kind": self.kind,
            "seconds": [round(s, 4) for s in self.seconds],
            "failures": self.failures,
            **{k: round(v, 4) for k, v in stats.items()},
            "ratio_to_lease_median": round(
                stats.get("median", float("nan")) / SETTINGS.lease_duration, 3
            ),
            "rss_leader_mb": self.rss_leader_mb,
            "rss_candidate_mb": self.rss_candidate_mb,
        }


def start_elector(
    impl: str, kubeconfig: Path, name: str, identity: str, stderr: IO[Any] | None = None
) -> Replica:
    """A replica of ``impl`` contending for Lease ``name``: ``benchmarks.replica_<impl>``, or
    client-go's peer program. (It lives here, not on ``Replica``, so that ``replicas`` and
    ``peer_clientgo`` do not import each other.)"""
    if impl == "clientgo":
        return peer_clientgo.elector(kubeconfig, name, identity, stderr)
    args = ["--kubeconfig", str(kubeconfig), "--name", name, "--identity", identity]
    return Replica(f"replica_{impl}", args, identity, stderr)


def run_trials(
    impl: str,
    kind: str,
    trials: int,
    kubeconfig: Path,
    *,
    rng: random.Random | None = None,
    stderr: IO[Any] | None = None,
) -> FailoverRun:
    """``trials`` failovers of ``kind`` for ``impl``; a trial that never fails over counts as a
    failure (the chain restarts with a new leader)."""
    rng = rng or random.Random()
    result = FailoverRun(impl, kind)
    lease = f"failover-{impl}-{kind}"
    serial = 0

    def spawn() -> Replica:
        nonlocal serial
        serial += 1
        return start_elector(impl, kubeconfig, lease, f"{impl}-{kind}-{serial}", stderr)

    leader = spawn()
    try:
        if leader.wait_for("leading", START_TIMEOUT) is None:
            raise RuntimeError(f"{impl}: the first replica did not start leading")
        for _ in range(trials):
            candidate = spawn()
            if candidate.wait_for("ready", START_TIMEOUT) is None:
                candidate.close()
                raise RuntimeError(f"{impl}: a candidate did not start")
            time.sleep(rng.uniform(1.2, 2.2))
            if result.rss_leader_mb is None:
                result.rss_leader_mb = round(leader.rss_mb(), 1)
                result.rss_candidate_mb = round(candidate.rss_mb(), 1)
            sent = leader.signal(KINDS[kind])
            started = candidate.wait_for("leading", SETTINGS.lease_duration * 3 + 5)
            leader.close()
            if started is None:
                result.failures += 1
                candidate.close()
                candidate = spawn()
                candidate.wait_for("leading", START_TIMEOUT)
            else:
                result.seconds.append(started - sent)
            leader = candidate
    finally:
        leader.close()
    return result

"""Per-job lock claims: 3 ``Jobs`` replicas x 100 ONCE_PER_TICK jobs in one process, every
replica firing the same tick of every job at once through ``Jobs.fire`` (the lock path):
``python -m benchmarks.locks_worker --kubeconfig P``.

Prints one ``result`` JSON line. Unmeasured ticks first create the job Leases; the harness counts
the requests on the server: the worker prints ``measuring`` and ``measured`` around the measured
ticks and waits for a line on stdin after each (the harness has taken its count).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

from benchmarks.common import NAMESPACE, emit, quiet_logging, summary
from k8slease import JobContext, Jobs, Mode
from k8slease.jobs.claimorder import claim_order
from k8slease.kube.apiclient import default_api_client

NEVER = "0 0 1 1 *"  # the scheduler itself must not fire during the run


class Recorder:
    """When each replica entered each job's tick."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.entered: dict[tuple[str, datetime, str], float] = {}

    def __call__(self, ctx: JobContext) -> None:
        now = time.perf_counter()
        assert ctx.tick is not None
        with self._lock:
            self.entered[(ctx.job, ctx.tick, ctx.identity)] = now


def build_replicas(
    kubeconfig: str, replicas: int, jobs: int, recorder: Recorder, group_name: str = "bench"
) -> list[Jobs]:
    group: list[Jobs] = []
    for r in range(replicas):
        registry = Jobs(
            group_name,
            namespace=NAMESPACE,
            identity=f"replica-{r}",
            api_client=default_api_client(kubeconfig=kubeconfig),
        )
        for j in range(jobs):
            registry.cron(NEVER, name=f"job-{j:03d}", mode=Mode.ONCE_PER_TICK)(recorder)
        group.append(registry)
    return group


def settle(replicas: list[Jobs], names: list[str], tick: datetime, timeout: float = 20.0) -> bool:
    """Wait until every replica's informer shows ``tick`` claimed and released for every job."""
    deadline = time.monotonic() + timeout
    for registry in replicas:
        for name in names:
            lock = registry.runners[name].lock
            assert lock is not None
            while True:
                view = lock.seen()
                if view is not None and view.job.claimed_tick == tick and not view.record.held:
                    break
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.005)
    return True


def handshake(event: str) -> None:
    """Tell the harness ``event`` and wait until it has counted (a line on stdin)."""
    emit(event)
    if not sys.stdin.readline():
        raise SystemExit(f"the harness went away at {event}")


def fire_tick(
    replicas: list[Jobs],
    names: list[str],
    tick: datetime,
    workers: int,
    recorder: Recorder,
    firing: list[Jobs] | None = None,
) -> dict[str, Any]:
    """Fire ``tick`` of every job on every replica at once; latencies and outcome counts."""
    timings: list[tuple[str, str, float, float]] = []
    lock = threading.Lock()

    def fire(registry: Jobs, name: str) -> None:
        started = time.perf_counter()
        registry.fire(name, tick)
        ended = time.perf_counter()
        with lock:
            timings.append((name, registry.identity, started, ended))

    began = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for name in names:  # the replicas of one job side by side, so that they contend
            for registry in firing or replicas:
                pool.submit(fire, registry, name)
    wall = time.perf_counter() - began
    decision, winner_total = [], []
    winner_claim: dict[str, float] = {}
    winners: dict[str, int] = dict.fromkeys(names, 0)
    for name, identity, started, ended in timings:
        entered = recorder.entered.get((name, tick, identity))
        if entered is None:
            decision.append(ended - started)
        else:
            winners[name] += 1
            decision.append(entered - started)
            winner_claim[name] = entered - started
            winner_total.append(ended - started)
    settled = settle(replicas, names, tick)
    claims = sum(winners.values())
    return {
        "wall_s": wall,
        "fires": len(timings),
        "claims": claims,
        "duplicates": sum(1 for n in winners.values() if n > 1),
        "missed": sum(1 for n in winners.values() if n == 0),
        "decision_s": decision,
        "winner_claim_s": winner_claim,
        "winner_total_s": winner_total,
        "settled": settled,
    }


def crash_tick(
    replicas: list[Jobs], names: list[str], tick: datetime, args: Any, recorder: Recorder
) -> dict[str, Any]:
    """Fire ``tick`` on every replica but replica-0; the takeover time of the jobs whose first
    choice replica-0 was (in the order over all replicas) is the winner's claim latency there."""
    identities = [registry.identity for registry in replicas]
    orphaned = [n for n in names if claim_order(identities, n, tick)[0] == replicas[0].identity]
    result = fire_tick(replicas, names, tick, args.workers, recorder, firing=replicas[1:])
    takeover = [result["winner_claim_s"][n] for n in orphaned if n in result["winner_claim_s"]]
    others = [s for n, s in result["winner_claim_s"].items() if n not in orphaned]
    return {
        "jobs_first_choice_crashed": len(orphaned),
        "taken_over": len(takeover),
        "takeover_s": summary(takeover),
        "other_jobs_claim_s": summary(others),
        "duplicates": result["duplicates"],
        "missed": result["missed"],
        "claim_step_s": replicas[1].claim_step,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--ticks", type=int, default=3)
    parser.add_argument("--workers", type=int, default=30)
    parser.add_argument("--group", default="bench", help="the group (one per run on a server)")
    args = parser.parse_args(argv)
    quiet_logging()
    recorder = Recorder()
    replicas = build_replicas(args.kubeconfig, args.replicas, args.jobs, recorder, args.group)
    for registry in replicas:
        registry.start()
    names = [f"job-{j:03d}" for j in range(args.jobs)]
    base = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=args.ticks + 2)
    warmup = 3
    try:
        for registry in replicas:  # let the informers list and watch
            assert registry._informer is not None and registry._informer.synced.wait(30)
        # Warm-up ticks create the job Leases and name every replica as a winner somewhere.
        for k in range(warmup):
            fire_tick(replicas, names, base + timedelta(minutes=k), args.workers, recorder)
        crashed = crash_tick(replicas, names, base + timedelta(minutes=warmup), args, recorder)
        # One job at a time (all replicas firing it together): the claim without the queue a
        # burst of 100 simultaneous claims builds in the one-process API server.
        lone_tick = base + timedelta(minutes=warmup + 1)
        lone = [
            fire_tick(replicas, [name], lone_tick, len(replicas), recorder)
            for name in names[: min(len(names), 50)]
        ]
        warmup += 1
        handshake("measuring")
        ticks = [
            fire_tick(replicas, names, base + timedelta(minutes=k), args.workers, recorder)
            for k in range(warmup + 1, warmup + 1 + args.ticks)
        ]
        handshake("measured")
    finally:
        for registry in replicas:
            registry.stop()
    wall = sum(t["wall_s"] for t in ticks)
    claims = sum(t["claims"] for t in ticks)
    fires = sum(t["fires"] for t in ticks)
    decision = [s for t in ticks for s in t["decision_s"]]
    winner_total = [s for t in ticks for s in t["winner_total_s"]]
    winner_claim = [s for t in ticks for s in t["winner_claim_s"].values()]
    job_ticks = args.jobs * args.ticks
    emit(
        "result",
        jobs=args.jobs,
        replicas=args.replicas,
        ticks=args.ticks,
        workers=args.workers,
        job_ticks=job_ticks,
        claims=claims,
        duplicates=sum(t["duplicates"] for t in ticks),
        missed=sum(t["missed"] for t in ticks),
        claims_per_s=claims / wall,
        decisions_per_s=fires / wall,
        decision_latency_s=summary(decision),
        winner_claim_latency_s=summary(winner_claim),
        settled=all(t["settled"] for t in ticks),
        winner_claim_latency_one_job_at_a_time_s=summary(
            [s for t in lone for s in t["winner_claim_s"].values()]
        ),
        crashed_first_choice=crashed,
        claim_run_release_s=summary(winner_total),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``make soak``: run the simulation for at least a million simulated seconds and say what it
covered; ``--replay SEED`` runs one seed and prints its whole trace.

Every failing seed is named on stderr as soon as it fails (its first violations and the command
that replays it); what is covered so far is printed every 10 seeds, in case the run is cut short.
``--jobs 2`` runs seeds in two processes (the figures are the same, summed in seed order).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from multiprocessing import Pool

from tests.sim.sim_report import Coverage, replay_text
from tests.sim.sim_run import Outcome, simulate


def _run(job: tuple[int, float, int, bool, bool]) -> Outcome:
    seed, seconds, replicas, late, leader_jobs = job
    out = simulate(
        seed, seconds=seconds, replicas=replicas, late_applies=late, leader_jobs=leader_jobs
    )
    if not out.violations:
        out.trace = []  # only a failing seed's trace is worth sending back
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=1_000_000.0, help="simulated in total")
    parser.add_argument("--seconds-per-seed", type=float, default=3600.0)
    parser.add_argument("--first-seed", type=int, default=1000)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=1, help="processes (at most 2 is polite)")
    parser.add_argument(
        "--late-applies",
        action="store_true",
        help="job Lease writes may be applied after their caller timed out (issue 26)",
    )
    parser.add_argument(
        "--leader-jobs",
        action="store_true",
        help="also a LEADER-class job on every replica, gated on its leadership (issue 26)",
    )
    parser.add_argument("--replay", type=int, default=None, help="run this seed, print its trace")
    args = parser.parse_args()
    if args.replay is not None:
        out = simulate(
            args.replay,
            seconds=args.seconds_per_seed,
            replicas=args.replicas,
            late_applies=args.late_applies,
            leader_jobs=args.leader_jobs,
        )
        print("\n".join(out.trace))
        print(out.violations or "no violation")
        return 1 if out.violations else 0
    seeds = max(1, -int(-args.seconds // args.seconds_per_seed))
    jobs = [
        (seed, args.seconds_per_seed, args.replicas, args.late_applies, args.leader_jobs)
        for seed in range(args.first_seed, args.first_seed + seeds)
    ]
    flags = " --late-applies" * args.late_applies + " --leader-jobs" * args.leader_jobs
    coverage = Coverage()
    started = time.monotonic()
    pool = Pool(args.jobs) if args.jobs > 1 else None
    outcomes: Iterator[Outcome] = (
        pool.imap(_run, jobs) if pool is not None else (_run(job) for job in jobs)
    )
    for out in outcomes:
        coverage.add(out)
        if out.violations:
            print(
                f"seed {out.seed}: {len(out.violations)} violations, first {out.violations[:3]}; "
                f"replay: cd tests/sim && ../../.venv/bin/python soak.py --replay {out.seed} "
                f"--seconds-per-seed {args.seconds_per_seed:g}{flags}",
                file=sys.stderr,
                flush=True,
            )
        if coverage.seeds % 10 == 0:
            print(
                f"[{time.monotonic() - started:.0f} s wall, seeds {args.first_seed}.."
                f"{out.seed}]\n{coverage.render()}",
                file=sys.stderr,
                flush=True,
            )
    if pool is not None:
        pool.close()
    print(coverage.render())
    print(f"seeds {args.first_seed}..{args.first_seed + seeds - 1}")
    print(f"wall time {time.monotonic() - started:.0f} s")
    for failed in coverage.failures[:3]:
        print(replay_text(failed, args.seconds_per_seed, flags=flags))
    return 1 if coverage.failures else 0


if __name__ == "__main__":
    sys.exit(main())

"""``make soak``: run the simulation for at least a million simulated seconds and say what it
covered; ``--replay SEED`` runs one seed and prints its whole trace."""

from __future__ import annotations

import argparse
import sys
import time

from sim_report import Coverage, replay_text
from sim_run import simulate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=1_000_000.0, help="simulated in total")
    parser.add_argument("--seconds-per-seed", type=float, default=3600.0)
    parser.add_argument("--first-seed", type=int, default=1000)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--replay", type=int, default=None, help="run this seed, print its trace")
    args = parser.parse_args()
    if args.replay is not None:
        out = simulate(args.replay, seconds=args.seconds_per_seed, replicas=args.replicas)
        print("\n".join(out.trace))
        print(out.violations or "no violation")
        return 1 if out.violations else 0
    coverage = Coverage()
    started = time.monotonic()
    seed = args.first_seed
    while coverage.seconds < args.seconds:
        coverage.add(simulate(seed, seconds=args.seconds_per_seed, replicas=args.replicas))
        seed += 1
        if coverage.seeds % 10 == 0:  # what is covered so far, in case the run is cut short
            print(coverage.render(), file=sys.stderr, flush=True)
    print(coverage.render())
    print(f"wall time {time.monotonic() - started:.0f} s")
    for failed in coverage.failures[:3]:
        print(replay_text(failed, args.seconds_per_seed))
    return 1 if coverage.failures else 0


if __name__ == "__main__":
    sys.exit(main())

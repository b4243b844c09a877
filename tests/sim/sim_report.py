"""Summing simulation outcomes up and rendering a failing seed's trace for replay."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from sim_run import Outcome


@dataclass
class Coverage:
    seeds: int = 0
    seconds: float = 0.0
    events: int = 0
    terms: int = 0
    ticks: int = 0
    runs: int = 0
    lost_recorded: int = 0
    across_deletion: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    skips: Counter[str] = field(default_factory=Counter)
    worst_heal: float = 0.0
    failures: list[Outcome] = field(default_factory=list)

    def add(self, out: Outcome) -> None:
        self.seeds += 1
        self.seconds += out.seconds
        self.events += out.events
        self.terms += out.terms
        self.ticks += out.ticks
        self.runs += out.runs
        self.lost_recorded += out.lost_recorded
        self.across_deletion += len(out.across_deletion)
        self.faults.update(out.faults)
        self.skips.update(out.skips)
        self.worst_heal = max([self.worst_heal, *out.heal_times])
        if out.violations:
            self.failures.append(out)

    def render(self) -> str:
        faults = ", ".join(f"{k} {v}" for k, v in sorted(self.faults.items()))
        skips = ", ".join(f"{k} {v}" for k, v in sorted(self.skips.items()))
        return (
            f"simulated {self.seconds:,.0f} s over {self.seeds} seeds, {self.events:,} events\n"
            f"faults: {faults}\n"
            f"leadership terms {self.terms:,}; worst time to a leader after healing "
            f"{self.worst_heal:.2f} s\n"
            f"job ticks {self.ticks:,}: run once {self.runs:,}, lost and recorded "
            f"{self.lost_recorded:,}, skipped and reported: {skips}\n"
            f"ticks run twice because a hand deletion erased the first claim (outside the "
            f"safety model, counted apart): {self.across_deletion}\n"
            f"violations: {sum(len(f.violations) for f in self.failures)} "
            f"(two leaders, a tick run twice, no leader after healing, a tick lost unreported)"
        )


def replay_text(out: Outcome, seconds: float) -> str:
    tail = "\n".join(out.trace[-80:])
    return (
        f"seed {out.seed} failed: {out.violations[:5]}\n"
        f"replay: cd tests/sim && ../../.venv/bin/python soak.py --replay {out.seed} "
        f"--seconds-per-seed {seconds:g}\n"
        f"last trace lines:\n{tail}"
    )

"""Summing simulation outcomes up and rendering a failing seed's trace for replay."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from tests.sim.sim_run import Outcome


@dataclass
class Coverage:
    seeds: int = 0
    seconds: float = 0.0
    events: int = 0
    terms: int = 0
    ticks: int = 0
    runs: int = 0
    lost_recorded: int = 0
    succeeded_recorded_lost: Counter[str] = field(default_factory=Counter)
    across_deletion_ticks: int = 0
    across_deletion_leaders: int = 0
    across_deletion_seeds: list[int] = field(default_factory=list)
    faults: Counter[str] = field(default_factory=Counter)
    skips: Counter[str] = field(default_factory=Counter)
    claims: Counter[str] = field(default_factory=Counter)
    worst_heal: float = 0.0
    leader: Counter[str] = field(default_factory=Counter)
    failures: list[Outcome] = field(default_factory=list)

    def add(self, out: Outcome) -> None:
        self.seeds += 1
        self.seconds += out.seconds
        self.events += out.events
        self.terms += out.terms
        self.ticks += out.ticks
        self.runs += out.runs
        self.lost_recorded += out.lost_recorded
        self.succeeded_recorded_lost.update(out.succeeded_recorded_lost)
        ticks = sum(1 for a in out.across_deletion if a.startswith("tick"))
        self.across_deletion_ticks += ticks
        self.across_deletion_leaders += len(out.across_deletion) - ticks
        if out.across_deletion:
            self.across_deletion_seeds.append(out.seed)
        self.faults.update(out.faults)
        self.skips.update(out.skips)
        self.claims.update(out.claims)
        self.leader.update(out.leader)
        self.worst_heal = max([self.worst_heal, *out.heal_times])
        if out.violations:
            self.failures.append(out)

    def render(self) -> str:
        faults = ", ".join(f"{k} {v}" for k, v in sorted(self.faults.items()))
        skips = ", ".join(f"{k} {v}" for k, v in sorted(self.skips.items()))
        claims = ", ".join(f"{k} {v:,}" for k, v in sorted(self.claims.items()))
        leader = ""
        if self.leader:
            leader = (
                "LEADER job: "
                + ", ".join(f"{k} {v:,}" for k, v in sorted(self.leader.items()))
                + "\n"
            )
        return (
            f"simulated {self.seconds:,.0f} s over {self.seeds} seeds, {self.events:,} events\n"
            f"faults: {faults}\n"
            f"leadership terms {self.terms:,}; worst time to a leader after healing "
            f"{self.worst_heal:.2f} s\n"
            f"job ticks {self.ticks:,}: run once {self.runs:,}, lost and recorded "
            f"{self.lost_recorded:,}, skipped and reported: {skips}\n"
            f"claims: {claims}\n"
            f"runs that succeeded, recorded lost at the end: "
            f"{sum(self.succeeded_recorded_lost.values())} {dict(self.succeeded_recorded_lost)}\n"
            f"{leader}"
            f"outside the safety model, counted apart (a hand deletion between two creates, the "
            f"second judged before the first was seen): ticks run twice "
            f"{self.across_deletion_ticks}, two leaders {self.across_deletion_leaders} "
            f"(seeds {self.across_deletion_seeds})\n"
            f"violations: {sum(len(f.violations) for f in self.failures)} "
            f"(two leaders, a tick run twice, no leader after healing, a tick lost unreported, a "
            f"LEADER run outside leadership)"
        )


def replay_text(out: Outcome, seconds: float, *, flags: str = "") -> str:
    tail = "\n".join(out.trace[-80:])
    return (
        f"seed {out.seed} failed: {out.violations[:5]}\n"
        f"replay: cd tests/sim && ../../.venv/bin/python soak.py --replay {out.seed} "
        f"--seconds-per-seed {seconds:g}{flags}\n"
        f"last trace lines:\n{tail}"
    )

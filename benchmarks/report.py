"""The results: the target checks, the printed table, the JSON file and the plot."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from benchmarks.common import IMPLEMENTATIONS, SETTINGS

LABELS = {
    "k8slease": "k8slease",
    "clientgo": "client-go (LeaseLock)",
    "official": "official Python client (LeaseLock)",
}
#: A metric's label, then one cell per implementation shown.
Row = tuple[str, ...]


def shown(results: dict[str, Any]) -> tuple[str, ...]:
    """The implementations a run measured, in the order of :data:`IMPLEMENTATIONS`."""
    listed = results.get("meta", {}).get("implementations")
    if listed is None:  # runs from before client-go took part
        return tuple(i for i in IMPLEMENTATIONS if i != "clientgo")
    return tuple(i for i in IMPLEMENTATIONS if i in listed)


def _num(value: Any, fmt: str = "{:.3f}") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return fmt.format(value)


def _rates(counts: dict[str, float]) -> str:
    shown = {verb: n for verb, n in counts.items() if n}
    return ", ".join(f"{verb} {n:g}" for verb, n in shown.items()) or "0"


def _check(target: str, measured: Any, ok: bool) -> dict[str, Any]:
    return {"target": target, "measured": measured, "ok": bool(ok)}


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The spec's targets for k8slease, each with what was measured and whether it was met."""
    checks: list[dict[str, Any]] = []
    failover = results.get("failover", {})
    ours, theirs = failover.get("k8slease", {}), failover.get("official", {})
    graceful = ours.get("graceful", {}).get("median")
    official = theirs.get("graceful", {}).get("median")
    if graceful is not None:
        checks.append(_check("graceful failover median < 0.2 s", graceful, graceful < 0.2))
    if graceful and official is not None:
        speedup = official / graceful
        checks.append(
            _check(
                "graceful failover >= 10x faster than the official client (x)",
                round(speedup, 1),
                speedup >= 10,
            )
        )
    crash = ours.get("crash", {}).get("max")
    if crash is not None:
        limit = SETTINGS.lease_duration + 1.0
        checks.append(
            _check(f"crash failover (max) <= lease + 1 s = {limit:g} s", crash, crash <= limit)
        )
    locks = results.get("locks", {})
    if _ok(locks) and isinstance(locks.get("k8slease"), dict):
        checks += lock_targets(locks["k8slease"])
    load = results.get("api_load", {}).get("k8slease")
    if load:
        periodic = max(
            (
                abs(v)
                for group in load["groups"].values()
                for verb, v in group["per_candidate_per_min"].items()
                if verb != "watch"
            ),
            default=0.0,
        )
        checks.append(
            _check(
                "a candidate sends no periodic request beyond its watch (req/min per candidate)",
                periodic,
                periodic < 0.5,
            )
        )
        leader = load["leader_alone"]
        writes = leader.get("update", 0.0) + leader.get("patch", 0.0)
        reads = leader.get("get", 0.0) + leader.get("list", 0.0)
        expected = 60.0 / SETTINGS.renew_interval
        checks.append(
            _check(
                f"leader: one write per renew interval ({expected:g}/min) and no read",
                f"writes {writes:g}/min, reads {reads:g}/min",
                abs(writes - expected) <= 0.1 * expected and reads == 0,
            )
        )
    return checks


def _failover_rows(failover: dict[str, Any], impls: tuple[str, ...]) -> list[Row]:
    rows: list[Row] = []
    for kind, signal_name in (("graceful", "SIGTERM"), ("crash", "SIGKILL")):
        cells = []
        for impl in impls:
            run = failover.get(impl, {}).get(kind, {})
            failed = f", {run['failures']} failed" if run.get("failures") else ""
            n = int(run.get("n", 0))
            cells.append(f"{_num(run.get('median'))} / {_num(run.get('p95'))} (n={n}{failed})")
        rows.append((f"{kind} failover ({signal_name}), median / p95 s", *cells))
    ratios = [
        _num(failover.get(impl, {}).get("crash", {}).get("ratio_to_lease_median"), "{:.2f}x")
        for impl in impls
    ]
    label = f"crash failover / lease duration ({SETTINGS.lease_duration:g} s), median"
    rows.append((label, *ratios))
    return rows


def _load_rows(load: dict[str, Any], impls: tuple[str, ...]) -> list[Row]:
    parts = [load[impl] for impl in impls]
    rows: list[Row] = [
        ("API requests/min, leader alone", *(_rates(p["leader_alone"]) for p in parts))
    ]
    for n in sorted(parts[0]["groups"], key=int):
        groups = [p["groups"][n] for p in parts]
        label = f"API requests/min, 1 leader + {n} candidates"
        rows.append((label, *(_rates(g["total_per_min"]) for g in groups)))
        rows.append(
            (
                f"  per candidate (N={n}) / open watches",
                *(
                    f"{_rates(g['per_candidate_per_min'])} / {_num(g['open_watches'], '{}')}"
                    for g in groups
                ),
            )
        )
    return rows


def _lock_rows(locks: dict[str, Any], others: int) -> list[Row]:
    latency = locks["decision_latency_s"]
    winner = locks.get("winner_claim_latency_one_job_at_a_time_s", {})
    per_tick = {k.split()[0]: round(v, 2) for k, v in locks["requests_per_job_tick"].items()}
    shape = f"{locks['jobs']} jobs x {locks['replicas']} replicas"
    by_code = locks.get("requests_per_job_tick_by_code", {})
    conflicts = round(sum(v for k, v in by_code.items() if k.endswith(" 409")), 2)
    na = ("n/a",) * others
    takeover = locks.get("crashed_first_choice", {}).get("takeover_s", {})
    return [
        (
            f"lock claim decision p50 / p95 s ({shape}, all at once)",
            f"{_num(latency['median'])} / {_num(latency['p95'])}",
            *na,
        ),
        (
            "  winner's claim p50 / p95 s, one job at a time",
            f"{_num(winner.get('median'))} / {_num(winner.get('p95'))}",
            *na,
        ),
        (
            "  takeover of a crashed first choice p50 / max s",
            f"{_num(takeover.get('median'))} / {_num(takeover.get('max'))}",
            *na,
        ),
        (
            "  lock claims/s (decisions/s)",
            f"{locks['claims_per_s']:.0f} ({locks['decisions_per_s']:.0f})",
            *na,
        ),
        ("  lock ticks run twice / missed", f"{locks['duplicates']} / {locks['missed']}", *na),
        ("  API requests per job tick (all replicas)", _rates(per_tick), *na),
        ("  of which conflicts (409, lost races)", f"{conflicts:g}", *na),
    ]


def lock_targets(locks: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 16's targets, per replica count of the lock benchmark."""
    checks: list[dict[str, Any]] = []
    for n, run in sorted(locks.get("by_replicas", {}).items(), key=lambda kv: int(kv[0])):
        if not isinstance(run, dict) or "requests_per_job_tick" not in run:
            continue
        per_tick = sum(run["requests_per_job_tick"].values())
        checks.append(
            _check(
                f"locks at {n} replicas: requests per job tick <= 2.5",
                round(per_tick, 3),
                per_tick <= 2.5,
            )
        )
        checks.append(
            _check(
                f"locks at {n} replicas: 0 duplicates, 0 missed",
                f"{run['duplicates']} / {run['missed']}",
                run["duplicates"] == 0 and run["missed"] == 0,
            )
        )
        winner = run.get("winner_claim_latency_one_job_at_a_time_s", {}).get("median")
        if winner is not None:
            checks.append(
                _check(
                    f"locks at {n} replicas: winner's claim p50 < 10 ms (s)",
                    round(winner, 4),
                    winner < 0.010,
                )
            )
    return checks


def _footprint_rows(footprint: dict[str, Any], impls: tuple[str, ...]) -> list[Row]:
    imports = footprint.get("import_s", {})
    rss = footprint.get("rss_mb", {})
    memory = [
        f"{_num(rss.get(i, {}).get('leader'), '{:.1f}')} / "
        f"{_num(rss.get(i, {}).get('candidate'), '{:.1f}')}"
        for i in impls
    ]
    return [
        (
            "import time s (minus interpreter start)",
            *(_num(imports.get(i)) if i in imports else "n/a (Go binary)" for i in impls),
        ),
        ("RSS MiB, idle leader / candidate process", *memory),
    ]


def _ok(part: Any) -> bool:
    return isinstance(part, dict) and bool(part) and "error" not in part


def table(results: dict[str, Any]) -> str:
    """The side-by-side table (Markdown, readable in a terminal) and the target checks."""
    impls = shown(results)
    rows: list[Row] = []
    if _ok(results.get("failover")):
        rows += _failover_rows(results["failover"], impls)
    if _ok(results.get("api_load")):
        rows += _load_rows(results["api_load"], impls)
    if _ok(results.get("locks")):
        for run in results["locks"]["k8slease"].get("by_replicas", {}).values():
            if _ok(run):
                rows += _lock_rows(run, len(impls) - 1)
    if _ok(results.get("footprint")):
        rows += _footprint_rows(results["footprint"], impls)
    header: Row = ("metric", *(LABELS[i] for i in impls))
    widths = [max(len(row[c]) for row in [header, *rows]) for c in range(len(header))]

    def line(row: Row) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |"

    lines = [line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += [line(row) for row in rows]
    for impl, why in results.get("meta", {}).get("left_out", {}).items():
        lines.append(f"{LABELS.get(impl, impl)}: left out ({why})")
    for name in ("failover", "api_load", "locks", "footprint"):
        part = results.get(name)
        if isinstance(part, dict) and "error" in part:
            lines.append(f"{name}: FAILED ({part['error']})")
    checks = results.get("targets", [])
    if checks:
        lines += ["", "Targets (k8slease):"]
        for check in checks:
            mark = "PASS" if check["ok"] else "MISS"
            lines.append(f"  [{mark}] {check['target']}: {check['measured']}")
    return "\n".join(lines)


def others(parts: dict[str, Any]) -> str:
    """The figures of the other benchmarks of the package, one per line."""
    lines: list[str] = []
    for name, value in parts.items():
        lines.append(f"\n{name}:")
        figures = value.get("figures", value) if isinstance(value, dict) else {"status": value}
        for key, figure in figures.items():
            shown = f"{figure:,.1f}" if isinstance(figure, float) else str(figure)
            lines.append(f"  {key:<32} {shown}")
    return "\n".join(lines)


def write_json(results: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2) + "\n")


def plot(results: dict[str, Any], path: Path) -> None:
    """CDF of graceful failover times per implementation, crash failovers as markers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"k8slease": "tab:blue", "clientgo": "tab:green", "official": "tab:orange"}
    fig, ax = plt.subplots(figsize=(8, 5.8), dpi=110)
    failover = results.get("failover", {}) if _ok(results.get("failover")) else {}
    for impl in shown(results):
        runs = failover.get(impl, {})
        graceful = sorted(runs.get("graceful", {}).get("seconds", []))
        if graceful:
            ys = [(i + 1) / len(graceful) for i in range(len(graceful))]
            ax.step(
                [graceful[0], *graceful],
                [0.0, *ys],
                where="post",
                color=colors[impl],
                linewidth=2,
                label=f"{LABELS[impl]}: graceful (SIGTERM), CDF",
            )
        crash = runs.get("crash", {}).get("seconds", [])
        if crash:
            ax.scatter(
                crash,
                [1.05] * len(crash),
                marker="x",
                s=60,
                color=colors[impl],
                label=f"{LABELS[impl]}: crash (SIGKILL) trials",
                zorder=3,
            )
    ax.axvline(0.2, color="grey", linestyle=":", label="target: graceful < 0.2 s")
    ax.axvline(
        SETTINGS.lease_duration,
        color="grey",
        linestyle="--",
        label=f"lease duration {SETTINGS.lease_duration:g} s",
    )
    ax.set_xscale("log")
    ax.set_xlabel("signal to the new leader's on_started_leading (s, log scale)")
    ax.set_ylabel("fraction of trials")
    ax.set_ylim(0, 1.12)
    ax.set_title(
        f"Leader failover, embedded API server (lease {SETTINGS.lease_duration:g} s, "
        f"renew deadline {SETTINGS.renew_deadline:g} s, retry {SETTINGS.retry_interval:g} s)",
        fontsize=10,
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)

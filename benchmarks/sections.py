"""The generated sections of the published pages, each rendered from the results files.

docs/benchmarks.md and README.md carry sections marked ``<!-- generated:NAME -->``;
:data:`SECTIONS` maps each NAME to the function that renders its text from
``benchmarks/results/*.json`` (the electors, the per-job locks, the operator, the embedded API
server, the provenance of every file, and the README's summary). ``benchmarks.publish`` puts
that text in place and checks it; nothing here reads or writes a document.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import provenance, report

ELECTORS = "latest.json"


class PublishError(ValueError):
    """A document or results file cannot be published from; the message says which and why."""


def _load(results: Path, name: str) -> dict[str, Any] | None:
    path = results / name
    if not path.exists():
        return None
    try:
        return provenance.read(path)
    except ValueError as exc:
        raise PublishError(str(exc)) from exc


def _missing(what: str, command: str) -> str:
    return f"*No results for {what}: run `{command}`.*"


def _day(document: dict[str, Any]) -> str:
    return str(document["provenance"]["date"]).replace("T", " ").replace("+00:00", " UTC")


def _load_text(load: dict[str, Any]) -> str:
    avg = load.get("loadavg", [])
    others = load.get("other_processes", {})
    return f"{avg[0] if avg else 'n/a'} ({others.get('busy', 'n/a')} busy)"


def run_line(document: dict[str, Any], file: str) -> str:
    """One sentence: when, on which commit and machine, under which load the figures were taken."""
    p = document["provenance"]
    m = p["machine"]
    load = p["load"]
    return (
        f"Run of {_day(document)}, commit `{p['commit'][:10]}`, `{p['command']}` "
        f"({p['duration_s']:g} s), on {m['cores']} cores / {m['memory_gib']:g} GiB, "
        f"Python {m['python']}; load average (1 min) and other busy processes before / after: "
        f"{_load_text(load['before'])} / {_load_text(load.get('after', {}))}. "
        f"File: [`benchmarks/results/{file}`](../benchmarks/results/{file})."
    )


def _table_and_targets(part: dict[str, Any], meta: dict[str, Any]) -> list[str]:
    # the lock rows have a section of their own (locks); the lock targets stay
    text = report.table({**part, "locks": {}, "meta": meta})
    table, _, targets = text.partition("\n\nTargets (k8slease):\n")
    lines = [table, ""]
    if targets:
        # the marker: output, not a command (tests/integration/install/docblocks.py)
        lines += ["Targets (k8slease), as the run reports them:", ""]
        lines += ["<!-- docs-test: output -->", "```text"]
        lines += [line.strip() for line in targets.splitlines()]
        lines += ["```", ""]
    ranges = []
    for impl in report.shown({"meta": meta}):
        for kind in ("graceful", "crash"):
            run = part.get("failover", {}).get(impl, {}).get(kind, {})
            if run.get("n"):
                ranges.append(
                    f"{kind} {run['min']:.3f}-{run['max']:.3f} s for {report.LABELS[impl]}"
                )
    if ranges:
        lines.append("Ranges (min-max): " + "; ".join(ranges) + ".")
    return lines


def electors_embedded(results: Path) -> str:
    document = _load(results, ELECTORS)
    if document is None:
        return _missing("the electors", "make bench")
    figures = document["figures"]
    lines = [run_line(document, ELECTORS), ""]
    lines += _table_and_targets(figures, figures["meta"])
    return "\n".join(lines).rstrip()


def electors_real(results: Path) -> str:
    document = _load(results, ELECTORS)
    real = None if document is None else document["figures"].get("real")
    if document is None or not isinstance(real, dict):
        return _missing("the real control plane", "make bench")
    if "error" in real:
        return f"The real control plane could not be measured in this run: {real['error']}"
    meta = document["figures"]["meta"]
    return "\n".join(_table_and_targets(real, meta)).rstrip()


def _ms(value: Any) -> str:
    return "n/a" if value is None else f"{value * 1000:.1f}"


def _lock_cells(run: dict[str, Any]) -> dict[str, str]:
    per_tick = sum(run["requests_per_job_tick"].values())
    codes = ", ".join(f"{k} x {v:g}" for k, v in run["requests_per_job_tick_by_code"].items())
    one = run.get("winner_claim_latency_one_job_at_a_time_s", {})
    many = run.get("winner_claim_latency_s", {})
    decision = run.get("decision_latency_s", {})
    takeover = run.get("crashed_first_choice", {}).get("takeover_s", {})
    return {
        "API requests per job tick (all replicas), by code": f"**{per_tick:g}**: {codes}",
        "ticks run twice / missed": f"{run['duplicates']} / {run['missed']}",
        "winner's claim p50 / p95 ms, one job at a time": f"{_ms(one.get('median'))} / "
        f"{_ms(one.get('p95'))}",
        f"winner's claim p50 / p95 ms, {run['jobs']} jobs at once": f"{_ms(many.get('median'))}"
        f" / {_ms(many.get('p95'))}",
        "decision p50 / p95 ms (every replica), all at once": f"{_ms(decision.get('median'))}"
        f" / {_ms(decision.get('p95'))}",
        "takeover from a crashed first choice, p50 / max ms": f"{_ms(takeover.get('median'))}"
        f" / {_ms(takeover.get('max'))} (n={int(takeover.get('n', 0))})",
    }


def _grid(columns: list[tuple[str, dict[str, str]]], corner: str) -> list[str]:
    rows: list[str] = []
    for _, cells in columns:
        rows += [r for r in cells if r not in rows]
    lines = [
        "| " + " | ".join([corner, *(c for c, _ in columns)]) + " |",
        "|---" * (len(columns) + 1) + "|",
    ]
    for row in rows:
        lines.append("| " + " | ".join([row, *(cells.get(row, "") for _, cells in columns)]) + " |")
    return lines


def locks(results: Path) -> str:
    document = _load(results, ELECTORS)
    if document is None:
        return _missing("the locks", "make bench")
    figures = document["figures"]
    columns: list[tuple[str, dict[str, str]]] = []
    for server, part in (("embedded", figures), ("real", figures.get("real") or {})):
        by_replicas = (part.get("locks") or {}).get("k8slease", {}).get("by_replicas", {})
        for n, run in sorted(by_replicas.items(), key=lambda kv: int(kv[0])):
            if isinstance(run, dict) and "requests_per_job_tick" in run:
                columns.append((f"{server}, {n} replicas", _lock_cells(run)))
    if not columns:
        return _missing("the locks", "make bench")
    lines = ["From the same run as the electors. " + run_line(document, ELECTORS), ""]
    lines += _grid(columns, "per job tick")
    return "\n".join(lines)


def locks_scale(results: Path) -> str:
    found = sorted(results.glob("locks_*jobs_*replicas.json"))
    if not found:
        return _missing(
            "locks at scale", "python -m benchmarks.locks --replicas 10 --jobs 1000 --ticks 2"
        )
    lines: list[str] = []
    for path in found:
        document = provenance.read(path)
        settings = document["provenance"]["settings"]
        columns = [
            (f"{settings['server']}, {settings['jobs']} jobs, {n} replicas", _lock_cells(run))
            for n, run in sorted(document["figures"].items(), key=lambda kv: int(kv[0]))
        ]
        lines += [run_line(document, path.name), "", *_grid(columns, "per job tick"), ""]
    return "\n".join(lines).rstrip()


OPERATOR_ROWS: tuple[tuple[str, Callable[[dict[str, Any]], str]], ...] = (
    (
        "convergence: every auto-created group shows its leader",
        lambda f: (
            f"{f['converge_seconds']:g} s"
            if f.get("converged")
            else f"not within {f['converge_seconds']:g} s (timed out)"
        ),
    ),
    ("status writes at start-up", lambda f: f"{f['status_patches_startup']:,}"),
    (
        "status writes per Lease renewal (every Lease renewed every 2 s for 10 s)",
        lambda f: (
            f"{f['status_patches_per_renewal']:g} "
            f"({f['status_patches_during_renewals']:,} / {f['renewals']:,})"
        ),
    ),
    (
        "failover latency, Lease write to status seen: p50 / p95 / max",
        lambda f: (
            " / ".join(
                f"{f[k]:,}" if k in f else "n/a"
                for k in (
                    "failover_latency_ms_median",
                    "failover_latency_ms_p95",
                    "failover_latency_ms_max",
                )
            )
            + f" ms ({f['failovers_seen']:,} of {f['groups']:,} seen"
            + ("" if f["failovers_seen"] == f["groups"] else "; of those seen only")
            + ")"
        ),
    ),
    (
        "status writes for one failover of every group",
        lambda f: f"{f['status_patches_for_failovers']:,}",
    ),
    ("operator API calls in all", lambda f: f"{f['operator_api_calls_total']:,}"),
    ("Lease writes by the operator", lambda f: f"{f['lease_writes_by_operator']:,}"),
    ("operator resident memory", lambda f: f"{f['operator_rss_mb']:g} MB"),
)


def operator(results: Path) -> str:
    found = sorted(
        results.glob("operator_*_*.json"),
        key=lambda p: (p.stem.split("_")[1], int(p.stem.split("_")[2])),
    )
    if not found:
        return _missing("the operator", "python -m benchmarks.bench_operator --groups 2000")
    columns: list[tuple[str, dict[str, str]]] = []
    notes: list[str] = []
    for index, path in enumerate(found, start=1):
        document = provenance.read(path)
        figures = document["figures"]
        label = f"{figures['server']}, {figures['groups']:,} groups [{index}]"
        columns.append((label, {row: render(figures) for row, render in OPERATOR_ROWS}))
        notes.append(f"[{index}] {run_line(document, path.name)}")
    return "\n".join([*_grid(columns, "figure"), "", *notes])


def apiserver(results: Path) -> str:
    document = _load(results, "apiserver.json")
    if document is None:
        return _missing("the embedded API server", "python -m benchmarks.bench_apiserver")
    f = document["figures"]
    rows = [
        ("GET one Lease, requests/s (32 in flight)", f"{f['get_rps']:,.0f}"),
        ("PATCH one Lease, requests/s (32 in flight)", f"{f['patch_rps']:,.0f}"),
        ("LIST Leases, requests/s (32 in flight)", f"{f['list_rps']:,.0f}"),
        ("watches open at once", f"{f['watches_open']:,.0f}"),
        (
            "watch events delivered per second, all watches",
            f"{f['watch_fanout_events_per_s']:,.0f}",
        ),
        (
            "write to delivery on every watch, p50 / p99 ms",
            f"{f['watch_delivery_p50_ms']:.1f} / {f['watch_delivery_p99_ms']:.1f}",
        ),
    ]
    lines = [run_line(document, "apiserver.json"), "", "| figure | value |", "|---|---|"]
    lines += [f"| {a} | {b} |" for a, b in rows]
    return "\n".join(lines)


def provenance_table(results: Path) -> str:
    lines = [
        "| file | benchmark | date | commit | machine | load average before / after "
        "| other busy processes before / after |",
        "|---|---|---|---|---|---|---|",
    ]
    for path in sorted(results.glob("*.json")):
        document = provenance.read(path)
        p = document["provenance"]
        m = p["machine"]
        before, after = p["load"]["before"], p["load"].get("after", {})
        lines.append(
            f"| `{path.name}` | {document['benchmark']} | {_day(document)} | `{p['commit'][:10]}` "
            f"| {m['cores']} cores, {m['memory_gib']:g} GiB, {m['cpu']}, Python {m['python']} "
            f"| {' '.join(map(str, before['loadavg']))} / "
            f"{' '.join(map(str, after.get('loadavg', [])))} "
            f"| {before['other_processes']['busy']} / "
            f"{after.get('other_processes', {}).get('busy')} |"
        )
    return "\n".join(lines)


def readme(results: Path) -> str:
    document = _load(results, ELECTORS)
    if document is None:
        return _missing("the electors", "make bench")
    figures = document["figures"]
    real = figures.get("real") if isinstance(figures.get("real"), dict) else {}
    impls = report.shown(figures)

    def cell(impl: str, get: Callable[[dict[str, Any]], str]) -> str:
        ours = get(figures.get("failover", {}).get(impl, {}) | {"_load": figures})
        if real and "error" not in real:
            theirs = get(real.get("failover", {}).get(impl, {}) | {"_load": real})
            return f"{ours} ({theirs})"
        return ours

    def graceful(part: dict[str, Any]) -> str:
        run = part.get("graceful", {})
        return f"{report._num(run.get('median'))} s / {report._num(run.get('p95'))} s"

    def crash(part: dict[str, Any]) -> str:
        run = part.get("crash", {})
        return (
            f"{report._num(run.get('median'))} s, "
            f"{report._num(run.get('ratio_to_lease_median'), '{:.2f}x')}"
        )

    sizes = [int(n) for n in figures.get("api_load", {}).get(impls[0], {}).get("groups", {})]
    largest = str(max(sizes)) if sizes else "?"

    def load_of(impl: str) -> Callable[[dict[str, Any]], str]:
        def get(part: dict[str, Any]) -> str:
            groups = part["_load"].get("api_load", {}).get(impl, {}).get("groups", {})
            if largest not in groups:
                return "n/a"
            return report._rates(groups[largest]["total_per_min"])

        return get

    rows = [
        ("graceful failover (SIGTERM), median / p95", [cell(i, graceful) for i in impls]),
        (
            "crash failover (SIGKILL), median, as a share of the lease",
            [cell(i, crash) for i in impls],
        ),
        (
            f"requests/min, 1 leader + {largest} candidates",
            [cell(i, load_of(i)) for i in impls],
        ),
    ]
    by_replicas = (figures.get("locks") or {}).get("k8slease", {}).get("by_replicas", {})
    per_tick = [
        f"{sum(run['requests_per_job_tick'].values()):g}"
        for _, run in sorted(by_replicas.items(), key=lambda kv: int(kv[0]))
        if isinstance(run, dict) and "requests_per_job_tick" in run
    ]
    if per_tick:
        counts = " / ".join(sorted(by_replicas, key=int))
        rows.append(
            (
                f"per-job locks, API requests per job tick at {counts} replicas",
                [" / ".join(per_tick)] + ["n/a"] * (len(impls) - 1),
            )
        )
    p = document["provenance"]
    lines = [
        f"Run of {_day(document)} (commit `{p['commit'][:10]}`, {p['machine']['cores']} cores, "
        f"load average {p['load']['before']['loadavg'][0]} before and "
        f"{p['load'].get('after', {}).get('loadavg', ['n/a'])[0]} after"
        + ("; real kube-apiserver in brackets):" if real and "error" not in real else "):"),
        "",
        "| | " + " | ".join(report.LABELS[i] for i in impls) + " |",
        "|---" * (len(impls) + 1) + "|",
    ]
    lines += [f"| {label} | " + " | ".join(cells) + " |" for label, cells in rows]
    return "\n".join(lines)


SECTIONS: dict[str, Callable[[Path], str]] = {
    "electors-embedded": electors_embedded,
    "electors-real": electors_real,
    "locks": locks,
    "locks-scale": locks_scale,
    "operator": operator,
    "apiserver": apiserver,
    "provenance": provenance_table,
    "readme": readme,
}

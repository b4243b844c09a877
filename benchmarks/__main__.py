"""``python -m benchmarks`` (``make bench``): k8slease, client-go and the official Python client's
electors side by side on the embedded API server, with the same lease settings; with ``--server
real`` or ``both``, failover and API load on a real kube-apiserver too (``ControlPlane``).

Prints a table, writes ``benchmarks/results/latest.json`` (the figures with their provenance:
commit, machine, load; ``benchmarks.provenance``) and ``failover.png``. ``--quick`` takes about
a minute and a half; the full run about five minutes (the real server adds about as much again).
The other benchmarks of this package (``bench_apiserver``, ``bench_operator`` at 200 groups) are
run too unless ``--skip-others``, each writing its own results file. client-go is built with
``make peers`` and left out, with the reason in the results, where Go is missing.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import random
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from benchmarks import failover, footprint, load, locks, peer_clientgo, provenance, report
from benchmarks.common import IMPLEMENTATIONS, NAMESPACE, SETTINGS, quiet_logging
from benchmarks.replicas import ROOT
from benchmarks.targets import SERVERS, EmbeddedTarget, Target, open_target

OTHERS = ("bench_apiserver", "bench_operator")


@dataclasses.dataclass(frozen=True)
class Plan:
    graceful_trials: int = 20
    crash_trials: int = 5
    load_window: float = 30.0
    load_warmup: float = 5.0
    candidates: tuple[int, ...] = load.CANDIDATES
    jobs: int = 100
    lock_replicas: tuple[int, ...] = (3, 10)
    lock_ticks: int = 3
    import_runs: int = 5


QUICK = Plan(graceful_trials=3, crash_trials=1, load_window=10.0, load_warmup=3.0,
             lock_ticks=1, import_runs=3)  # fmt: skip


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer trials, shorter windows")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--skip-others", action="store_true", help="skip bench_apiserver etc.")
    parser.add_argument("--verbose", action="store_true", help="show the replicas' stderr")
    parser.add_argument("--seed", type=int, default=None, help="seed of the pause before signals")
    parser.add_argument(
        "--implementations",
        type=lambda s: tuple(s.split(",")),
        default=IMPLEMENTATIONS,
        help=f"comma-separated subset of {','.join(IMPLEMENTATIONS)} (default: all)",
    )
    parser.add_argument(
        "--server",
        choices=(*SERVERS, "both"),
        default="embedded",
        help="where failover and API load are measured: the embedded API server, a real "
        "kube-apiserver (ControlPlane, built on first use), or both (default: embedded)",
    )
    tiny = parser.add_argument_group("overrides (for smoke tests)")
    tiny.add_argument("--graceful-trials", type=int)
    tiny.add_argument("--crash-trials", type=int)
    tiny.add_argument("--load-window", type=float)
    tiny.add_argument("--load-warmup", type=float)
    tiny.add_argument("--candidates", type=lambda s: tuple(int(n) for n in s.split(",")))
    tiny.add_argument("--jobs", type=int)
    tiny.add_argument(
        "--lock-replicas",
        type=lambda s: tuple(int(n) for n in s.split(",")),
        help="replica counts of the lock benchmark, comma-separated (default 3,10)",
    )
    tiny.add_argument("--lock-ticks", type=int)
    tiny.add_argument("--import-runs", type=int)
    return parser.parse_args(argv)


def make_plan(args: argparse.Namespace) -> Plan:
    plan = QUICK if args.quick else Plan()
    overrides = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(Plan)
        if getattr(args, f.name, None) is not None
    }
    return dataclasses.replace(plan, **overrides)


def machine() -> dict[str, Any]:
    """The client versions of this run (the machine, commit and load are in the provenance)."""
    import kubernetes

    return {"kubernetes_client": kubernetes.__version__}


def section(name: str, results: dict[str, Any], fn: Callable[[], Any]) -> None:
    """Run one part; an error is recorded (and shown) instead of ending the whole run."""
    print(f"-- {name} ...", flush=True)
    started = time.monotonic()
    try:
        results[name] = fn()
    except Exception as exc:
        traceback.print_exc()
        results[name] = {"error": f"{type(exc).__name__}: {exc}"}
    print(f"   {name}: {time.monotonic() - started:.1f} s", flush=True)


def available(wanted: tuple[str, ...], meta: dict[str, Any]) -> tuple[str, ...]:
    """The implementations of ``wanted`` that can run here; why others cannot goes in ``meta``."""
    unknown = [impl for impl in wanted if impl not in IMPLEMENTATIONS]
    if unknown:
        raise SystemExit(f"--implementations: unknown {unknown}; choose from {IMPLEMENTATIONS}")
    usable = list(wanted)
    if "clientgo" in wanted:
        try:
            peer_clientgo.build()
            meta["machine"].update(peer_clientgo.versions())
        except peer_clientgo.Unavailable as exc:
            usable.remove("clientgo")
            meta.setdefault("left_out", {})["clientgo"] = str(exc)
            print(f"client-go left out: {exc}", flush=True)
    return tuple(usable)


def run_failover(
    server: Target,
    plan: Plan,
    impls: tuple[str, ...],
    rng: random.Random,
    stderr: IO[Any] | None,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for impl in impls:
        out[impl] = {}
        for kind, trials in (("graceful", plan.graceful_trials), ("crash", plan.crash_trials)):
            if trials > 0:
                run = failover.run_trials(impl, kind, trials, server.kubeconfig, rng=rng,
                                          stderr=stderr)  # fmt: skip
                out[impl][kind] = run.to_json()
    return out


def run_locks(target: Target, plan: Plan, stderr: IO[Any] | None) -> dict[str, Any]:
    """The lock benchmark at each replica count of the plan, on ``target``."""
    by_replicas = {
        str(n): locks.measure(
            target, jobs=plan.jobs, replicas=n, ticks=plan.lock_ticks, stderr=stderr
        )
        for n in plan.lock_replicas
    }
    return {"k8slease": {"by_replicas": by_replicas}, "official": "n/a (no per-job locks)"}


def run_real(
    plan: Plan, impls: tuple[str, ...], rng: random.Random, stderr: IO[Any] | None
) -> dict[str, Any]:
    """Failover and API load on a real kube-apiserver (the control plane is built on first use)."""
    real: dict[str, Any] = {}
    with open_target("real", NAMESPACE) as target:
        section("real failover", real, lambda: run_failover(target, plan, impls, rng, stderr))
        section("real api_load", real, lambda: load.measure(
            target, window=plan.load_window, warmup=plan.load_warmup,
            candidates=plan.candidates, implementations=impls, stderr=stderr))  # fmt: skip
        section("real locks", real, lambda: run_locks(target, plan, stderr))
    return {
        "failover": real["real failover"],
        "api_load": real["real api_load"],
        "locks": real["real locks"],
    }


def run_others(out: Path) -> dict[str, Any]:
    """The other benchmarks of the package, each recorded in its own results file in ``out``;
    their figures are returned too, for the printed summary."""
    figures: dict[str, Any] = {}
    for name in OTHERS:
        module = importlib.import_module(f"benchmarks.{name}")
        try:
            path, result = module.record(out)
            figures[name] = {"figures": result, "file": path.name}
        except Exception as exc:
            traceback.print_exc()
            figures[name] = {"error": f"{type(exc).__name__}: {exc}"}
    return figures


def add_rss(results: dict[str, Any], impls: tuple[str, ...]) -> None:
    """Put the replicas' memory, taken during the graceful failover trials, under footprint."""
    footprint_, failover_ = results["footprint"], results.get("failover")
    if failover_ is None or "error" in footprint_ or "error" in failover_:
        return
    footprint_["rss_mb"] = {
        impl: {
            "leader": failover_[impl].get("graceful", {}).get("rss_leader_mb"),
            "candidate": failover_[impl].get("graceful", {}).get("rss_candidate_mb"),
        }
        for impl in impls
    }


def _has_real(results: dict[str, Any]) -> bool:
    real = results.get("real")
    return isinstance(real, dict) and "error" not in real


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    plan = make_plan(args)
    quiet_logging()
    stderr = sys.stderr if args.verbose else None
    rng = random.Random(args.seed)
    started = time.monotonic()
    words = sys.argv[1:] if argv is None else argv
    run = provenance.start("electors", " ".join(["python -m benchmarks", *words]), argv=words)
    results: dict[str, Any] = {
        "meta": {
            "mode": "quick" if args.quick else "full",
            "servers": list(SERVERS if args.server == "both" else (args.server,)),
            "plan": dataclasses.asdict(plan),
            "settings": dataclasses.asdict(SETTINGS),
            "machine": machine(),
        }
    }
    impls = available(args.implementations, results["meta"])
    results["meta"]["implementations"] = list(impls)
    servers = SERVERS if args.server == "both" else (args.server,)
    if "embedded" in servers:
        with open_target("embedded", NAMESPACE) as target:
            assert isinstance(target, EmbeddedTarget)
            section("failover", results, lambda: run_failover(target, plan, impls, rng, stderr))
            section("api_load", results, lambda: load.measure(
                target, window=plan.load_window, warmup=plan.load_warmup,
                candidates=plan.candidates, implementations=impls, stderr=stderr))  # fmt: skip
            section("locks", results, lambda: run_locks(target, plan, stderr))
    if "real" in servers:
        section("real", results, lambda: run_real(plan, impls, rng, stderr))
    section("footprint", results, lambda: {"import_s": footprint.import_times(plan.import_runs)})
    add_rss(results, impls)
    if not args.skip_others:
        section("others", results, lambda: run_others(args.out))
    results["targets"] = report.targets(results)
    if _has_real(results):
        results["real"]["targets"] = report.targets(results["real"])
    results["meta"]["duration_s"] = round(time.monotonic() - started, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    provenance.write(args.out / "latest.json", run, results)
    report.plot(results, args.out / "failover.png")
    print()
    if "failover" in results or "api_load" in results:
        print("embedded API server:")
        print(report.table(results))
    if _has_real(results):
        print("\nreal kube-apiserver (ControlPlane):")
        print(report.table({**results["real"], "meta": results["meta"]}))
    elif "real" in results:
        print(f"\nreal kube-apiserver: FAILED ({results['real'].get('error')})")
    print(report.others(results.get("others", {})))
    print(f"\nwrote {args.out / 'latest.json'} and {args.out / 'failover.png'} "
          f"in {results['meta']['duration_s']:.0f} s")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

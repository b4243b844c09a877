"""The slow-API scenario of issue 22 on a real (or the embedded) API server, as processes.

Three replica processes (tests/chaos/chaos_slow_replica.py: ``Jobs`` with an ONCE_PER_TICK job
and a LEADER-class job, every ``every`` seconds, default options but the election timings) and
the operator talk to the API server through :class:`~k8slease.testing.slowproxy.DelayProxy`.
Once a leader runs both jobs, one fault:

* ``slow``: every request delayed ``delay`` seconds for ``spell`` seconds;
* ``outage``: the API server stops answering for ``spell`` seconds (kube-apiserver SIGSTOPped,
  then SIGCONTed; embedded: every request held);

then ``tail`` seconds of healthy server, and every process is stopped gracefully. The figures,
read from the journals (CLOCK_MONOTONIC, shared by the processes) and the replicas' logs:
leadership changes and abdications, seconds nobody led, overlapping leaders, ticks of each job
run, run twice, lost and reported at WARNING or not, the first run after an outage, and the load
average. :func:`check` holds them to the issue's done-when.

Run a full spell by hand, from the repository root (one at a time: the machine is small)::

    .venv/bin/python -m tests.chaos.slowcp --timing 60/20/40 --delay 10 --spell 300
    .venv/bin/python -m tests.chaos.slowcp --timing 15/5/10 --fault outage --spell 60

``tests/chaos/test_chaos_slow_api.py`` runs a short one in the suite.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tests.chaos.chaoslib import Procs, lines, poll, proxied_kubeconfig

HERE = Path(__file__).resolve().parent
APP = HERE / "chaos_slow_replica.py"
GROUP = "slowcp"
JOBS = ("tick", "lead")
REPLICAS = ("a", "b", "c")
START_WITHIN = 90.0  # three process starts, a first election and a first run on a busy machine
OPERATOR_ENV = {"K8SLEASE_OPERATOR_EVALUATE_INTERVAL": "1"}
FIELD = re.compile(r"\b(\w+)=('?)([^\s']*)\2")
ISO = re.compile(r"\d{4}-\d\d-\d\dT[\d:.]+(?:[+-]\d\d:\d\d|Z)")


@dataclass
class Figures:
    """What one run measured (times in seconds)."""

    server: str
    timing: str
    fault: str
    delay: float
    spell: float
    every: float
    window: float = 0.0  # from the fault's start to the end of the tail
    leadership_changes: int = 0  # a replica that starts leading during the window
    abdications: int = 0  # a replica that stops leading during the window
    leaderless: float = 0.0
    leader_overlaps: int = 0
    ticks: dict[str, int] = field(default_factory=dict)  # ticks of the window, per job
    ran: dict[str, int] = field(default_factory=dict)  # ticks run (once), per job
    twice: dict[str, int] = field(default_factory=dict)
    lost_reported: dict[str, int] = field(default_factory=dict)  # not run, named at WARNING
    lost_silent: dict[str, int] = field(default_factory=dict)  # not run, no warning
    runs_lost: dict[str, int] = field(default_factory=dict)  # started, ctx.lost read
    first_run_after: dict[str, float] = field(default_factory=dict)  # outage: from the return
    first_tick_after: float = 0.0  # outage: the first tick after the return, from the return
    load: list[float] = field(default_factory=list)  # 1-minute load average: min, mean, max
    # Events posted by the replicas in the window per reason, their event WARNINGs, and the
    # Events in the namespace once the replicas stopped (per source component and reason)
    events_posted: dict[str, int] = field(default_factory=dict)
    event_failures: dict[str, int] = field(default_factory=dict)
    events_in_api: dict[str, int] = field(default_factory=dict)
    wall: float = 0.0


def _kube_apiserver(server: Any) -> Any:
    for child in getattr(server, "_children", []):
        if child.name == "kube-apiserver" and child.process is not None:
            return child.process
    raise AssertionError("no kube-apiserver process found")


class Scenario:
    def __init__(
        self, server: Any, namespace: str, tmp: Path, *, timing: str, every: float, run: float
    ) -> None:
        from k8slease.testing.slowproxy import DelayProxy

        self.server = server
        self.namespace = namespace
        self.tmp = tmp
        self.timing = timing
        self.every = every
        self.run = run
        self.proxy = DelayProxy(("127.0.0.1", server.port)).start()
        self.kubeconfig = proxied_kubeconfig(server, self.proxy.port, tmp / "proxied.kubeconfig")
        self.procs = Procs(tmp)
        self.load: list[float] = []
        self._sampling = threading.Event()

    def start(self) -> None:
        for name in REPLICAS:
            self.procs.spawn(name, [
                str(APP), "--kubeconfig", str(self.kubeconfig), "--namespace", self.namespace,
                "--identity", name, "--journal", str(self.tmp / f"{name}.journal"),
                "--log", str(self.tmp / f"{name}.log"), "--timing", self.timing,
                "--every", str(self.every), "--run", str(self.run),
            ])  # fmt: skip
        self.procs.spawn("operator", ["-m", "k8slease", "operator", "--kubeconfig",
                                      str(self.kubeconfig), "--namespace", self.namespace,
                                      "--auto-create-group", GROUP], **OPERATOR_ENV)  # fmt: skip
        threading.Thread(target=self._sample_load, daemon=True).start()

    def _sample_load(self) -> None:
        while not self._sampling.wait(5):
            self.load.append(os.getloadavg()[0])

    def close(self) -> None:
        self._sampling.set()
        self.procs.close()
        self.proxy.stop()

    # -- journals and logs -------------------------------------------------------------------

    def runs(self) -> list[tuple[str, str, int, int, float, float | None, str]]:
        """(who, job, tick, token, start, end, outcome) of every run."""
        out = []
        for who in REPLICAS:
            open_: dict[tuple[str, int, int], int] = {}
            for row in lines(self.tmp / f"{who}.journal"):
                if row[0] == "start":
                    open_[(row[1], int(row[2]), int(row[3]))] = len(out)
                    out.append((who, row[1], int(row[2]), int(row[3]), float(row[4]), None, ""))
                elif row[0] == "end" and (key := (row[1], int(row[2]), int(row[3]))) in open_:
                    i = open_.pop(key)
                    out[i] = (*out[i][:5], float(row[4]), row[5])
        return out

    def leading(self) -> dict[str, list[tuple[float, float | None]]]:
        """Per replica, the stretches in which it believed it led (end None: still)."""
        spans: dict[str, list[tuple[float, float | None]]] = {}
        for who in REPLICAS:
            mine: list[tuple[float, float | None]] = []
            for row in lines(self.tmp / f"{who}.journal"):
                if row[0] != "leading":
                    continue
                when, on = float(row[1]), row[2] == "1"
                if on:
                    mine.append((when, None))
                elif mine and mine[-1][1] is None:
                    mine[-1] = (mine[-1][0], when)
            spans[who] = mine
        return spans

    def warnings(self) -> list[tuple[str, float, float, str, dict[str, str]]]:
        """(who, mono, wall, event, fields) of every WARNING or ERROR of the replicas."""
        return self.records(("WARNING", "ERROR"))

    def records(
        self, levels: tuple[str, ...]
    ) -> list[tuple[str, float, float, str, dict[str, str]]]:
        """(who, mono, wall, event, fields) of every log record of the replicas at ``levels``."""
        out = []
        for who in REPLICAS:
            path = self.tmp / f"{who}.log"
            if not path.exists():
                continue
            for line in path.read_text(errors="replace").splitlines():
                parts = line.split(" ", 4)  # mono wall level logger message
                if len(parts) < 5 or parts[2] not in levels:
                    continue
                event = parts[4].split(" ", 1)[0]
                fields = {m.group(1): m.group(3) for m in FIELD.finditer(parts[4])}
                fields["_ticks"] = " ".join(ISO.findall(parts[4].partition(" ticks=")[2]))
                out.append((who, float(parts[0]), float(parts[1]), event, fields))
        return out

    def wait_ready(self) -> None:
        def ready() -> bool:
            done = {job for _, job, _, _, _, _, outcome in self.runs() if outcome == "done"}
            return done == set(JOBS) and any(
                spans and spans[-1][1] is None for spans in self.leading().values()
            )

        poll("a leader that ran both jobs", ready, START_WITHIN, every=0.5)


def _epoch(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _reported(scenario: Scenario, job: str, until_wall: float) -> set[int]:
    """Ticks of ``job`` some replica named at WARNING as lost (or in a reported outage)."""
    named: set[int] = set()
    spans: list[tuple[float, float]] = []
    dropping: dict[str, float] = {}
    losing: dict[str, float] = {}
    every = scenario.every
    for who, _, wall, event, f in scenario.warnings():
        if f.get("job") not in (job, f"{GROUP}.{job}", None):
            continue
        if event == "job.ticks_lost" and f.get("job") == job:
            spans.append((_epoch(f["first"]), _epoch(f["last"])))
            losing.pop(who, None)
        elif event == "job.ticks_being_lost" and f.get("job") == job:
            losing[who] = _epoch(f["tick"])  # its count comes when it ends
        elif event == "job.ticks_dropped" and f.get("job") == job:
            dropping[who] = _epoch(f["tick"])
        elif event == "job.ticks_dropped_ended" and f.get("job") == job and who in dropping:
            spans.append((dropping.pop(who), wall))
        elif event == "job.api_recovered" and f.get("job") == job:
            named.update(round(_epoch(t)) for t in f["_ticks"].split())  # skipped, named
        elif event == "lock.claim_unanswered" and f.get("job") == job and "tick" in f:
            named.add(round(_epoch(f["tick"])))
        elif event == "lock.tick_lost" and "lost_tick" in f:
            named.add(round(_epoch(f["lost_tick"])))
        elif event == "job.finished" and f.get("outcome") == "lost" and "tick" in f:
            named.add(round(_epoch(f["tick"])))
    spans += [(first, until_wall) for first in [*dropping.values(), *losing.values()]]
    for first, last in spans:
        tick = math.ceil(first / every - 1e-6) * every
        while tick <= last + 1e-6:
            named.add(round(tick))
            tick += every
    return named


def measure(scenario: Scenario, *, fault: str, delay: float, spell: float, tail: float,
            server_name: str) -> Figures:  # fmt: skip
    """Run the fault on a scenario whose replicas are ready; stop them; the figures."""
    s = scenario
    fig = Figures(server_name, s.timing, fault, delay, spell, s.every)
    began_mono, began_wall = time.monotonic(), time.time()
    if fault == "slow":
        s.proxy.slow(delay, duration=spell)
        time.sleep(spell)  # real processes on real time: the spell is the experiment
        back_mono, back_wall = time.monotonic(), time.time()
    else:
        if getattr(s.server, "embedded", True):
            s.server.faults.pause()
            resume = s.server.faults.resume
        else:
            apiserver = _kube_apiserver(s.server)
            apiserver.send_signal(signal.SIGSTOP)

            def resume() -> None:
                apiserver.send_signal(signal.SIGCONT)

        try:
            time.sleep(spell)  # the pause is the experiment
        finally:
            resume()
        back_mono, back_wall = time.monotonic(), time.time()
    time.sleep(tail)  # the window measured after the fault: its ticks are the figures
    end_mono, end_wall = time.monotonic(), time.time()
    for name in REPLICAS:
        s.procs.signal(name, signal.SIGTERM)
    for name in REPLICAS:
        s.procs.procs[name].wait(timeout=120)
    times = [began_mono, began_wall, back_mono, back_wall, end_mono, end_wall]
    in_api = _events_in_api(s.server, s.namespace)
    (s.tmp / "window.json").write_text(
        json.dumps({"times": times, "figures": asdict(fig), "events_in_api": in_api})
    )
    fig = analysed(s, fig, *times)
    fig.events_in_api = in_api
    return fig


def _events_in_api(server: Any, namespace: str) -> dict[str, int]:
    """Events in ``namespace`` (straight from the server, not through the proxy), counted by
    ``<source component>:<reason>``."""
    from kubernetes import client

    api = server.api_client()
    try:
        raw = client.CoreV1Api(api).list_namespaced_event(namespace, _preload_content=False)
        items = json.loads(raw.data)["items"]
    finally:
        api.close()
    found = Counter(
        f"{(e.get('source') or {}).get('component', '?')}:{e.get('reason')}" for e in items
    )
    return dict(sorted(found.items()))


def analysed(s: Scenario, fig: Figures, began_mono: float, began_wall: float, back_mono: float,
             back_wall: float, end_mono: float, end_wall: float) -> Figures:  # fmt: skip
    """``fig`` filled in from the journals and logs of a run whose fault began at
    ``began_*``, ended at ``back_*``, and whose replicas were stopped at ``end_*``."""
    delay = fig.delay
    fault = fig.fault
    fig.window = round(end_mono - began_mono, 1)
    fig.wall = fig.window

    # leadership within the window
    spans = s.leading()
    cut = [(who, a, min(b if b is not None else end_mono, end_mono)) for who, mine in spans.items()
           for a, b in mine if (b is None or b > began_mono) and a < end_mono]  # fmt: skip
    fig.leadership_changes = sum(1 for _, a, _ in cut if a > began_mono)
    fig.abdications = sum(
        1 for mine in spans.values() for _, b in mine if b is not None and began_mono < b < end_mono
    )
    ordered = sorted((max(a, began_mono), b, who) for who, a, b in cut)
    fig.leader_overlaps = sum(
        1 for i, x in enumerate(ordered) for y in ordered[i + 1 :] if y[0] < x[1] and y[2] != x[2]
    )
    covered, reach = 0.0, began_mono
    for a, b, _ in ordered:
        if b > reach:
            covered += b - max(a, reach)
            reach = b
    fig.leaderless = round((end_mono - began_mono) - covered, 1)

    # ticks of the window: those due after the fault began whose run (a claim, the run, a
    # release) could end before the tail did
    runs = s.runs()
    first_tick = math.ceil(began_wall / s.every) * s.every
    last_tick = end_wall - 2 * max(delay, 1.0) - s.run - 2.0
    window = [round(first_tick + k * s.every) for k in range(int((last_tick - first_tick)
                                                                  // s.every) + 1)]  # fmt: skip
    for job in JOBS:
        started = Counter(t for _, j, t, *_ in runs if j == job)
        lost_runs = {t for _, j, t, _, _, _, o in runs if j == job and o == "lost"}
        reported = _reported(s, job, end_wall)
        fig.ticks[job] = len(window)
        fig.ran[job] = sum(1 for t in window if started[t] >= 1 and t not in lost_runs)
        fig.twice[job] = sum(1 for t in window if started[t] > 1)
        missing = [t for t in window if started[t] == 0 or t in lost_runs]
        fig.lost_reported[job] = sum(1 for t in missing if t in reported)
        fig.lost_silent[job] = sum(1 for t in missing if t not in reported)
        fig.runs_lost[job] = sum(1 for t in window if t in lost_runs)
        if fault == "outage":
            after = [st for _, j, _, _, st, _, _ in runs if j == job and st > back_mono]
            fig.first_run_after[job] = round(min(after) - back_mono, 1) if after else -1.0
    fig.first_tick_after = round(math.ceil(back_wall / s.every) * s.every - back_wall, 1)
    failures = ("event.post_failed", "event.given_up", "event.queue_full")
    posted: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    for _, _, wall, event, f in s.records(("INFO", "WARNING")):
        if not began_wall <= wall <= end_wall:
            continue
        if event == "event.posted":
            posted[f.get("reason", "?")] += 1
        elif event in failures:
            failed[event] += 1
    fig.events_posted, fig.event_failures = dict(sorted(posted.items())), dict(failed)
    if s.load:
        fig.load = [round(min(s.load), 2), round(sum(s.load) / len(s.load), 2),
                    round(max(s.load), 2)]  # fmt: skip
    return fig


def check(fig: Figures, *, tolerated: float) -> list[str]:
    """The issue's done-when, as failures (empty: met)."""
    fails = []
    if fig.leader_overlaps:
        fails.append(f"{fig.leader_overlaps} overlapping leaders")
    if any(fig.twice.values()):
        fails.append(f"ticks run twice {fig.twice}")
    if any(fig.lost_silent.values()):
        fails.append(f"ticks lost without a warning {fig.lost_silent}")
    if fig.fault == "slow" and fig.delay < tolerated and fig.abdications:
        fails.append(f"{fig.abdications} abdications below the tolerated latency")
    if fig.fault == "slow" and fig.delay >= tolerated and fig.leadership_changes > 1:
        fails.append(f"{fig.leadership_changes} leadership changes at the tolerated latency")
    if fig.fault == "outage":
        for job, after in fig.first_run_after.items():
            if not 0 <= after <= fig.every + 2:  # the first tick after the return
                fails.append(f"{job}: first run {after} s after the return")
    return fails


def scenario_run(server: Any, namespace: str, tmp: Path, *, timing: str, fault: str,
                 delay: float, spell: float, every: float, run: float, tail: float,
                 server_name: str) -> Figures:  # fmt: skip
    from k8slease.operator.crd import install_crd

    api = server.api_client()
    install_crd(api)
    api.close()
    s = Scenario(server, namespace, tmp, timing=timing, every=every, run=run)
    try:
        s.start()
        s.wait_ready()
        return measure(s, fault=fault, delay=delay, spell=spell, tail=tail,
                       server_name=server_name)  # fmt: skip
    finally:
        s.close()


def analyse(directory: Path, *, timing: str, every: float, run: float) -> Scenario:
    """A scenario over the journals and logs a run kept (``--keep``), to read them again."""
    s = Scenario.__new__(Scenario)
    s.tmp, s.timing, s.every, s.run, s.load = directory, timing, every, run, []
    return s


def reanalyse(directory: Path, printed: dict[str, Any]) -> Figures:
    """The figures of a kept run again, from its journals and logs and the figures it printed
    (its window from ``window.json``, or else from when the replicas got SIGTERM)."""
    fig = Figures(**{k: v for k, v in printed.items() if k in Figures.__dataclass_fields__})
    s = analyse(directory, timing=fig.timing, every=fig.every, run=1.0)
    s.load = []
    saved = directory / "window.json"
    in_api: dict[str, int] = {}
    if saved.exists():
        kept = json.loads(saved.read_text())
        times, in_api = kept["times"], kept.get("events_in_api", {})
    else:
        stops = []
        for who in REPLICAS:
            for line in (directory / f"{who}.log").read_text(errors="replace").splitlines():
                if " signal.received " in line:
                    mono, wall = (float(x) for x in line.split(" ", 2)[:2])
                    stops.append((mono, wall))
        end_mono, end_wall = min(stops)
        began = (end_mono - fig.window, end_wall - fig.window)
        tail = fig.window - fig.spell
        times = [*began, end_mono - tail, end_wall - tail, end_mono, end_wall]
    load = fig.load
    fig = analysed(s, fig, *times)
    fig.load, fig.events_in_api = load, in_api
    return fig


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", choices=("real", "embedded"), default="real")
    parser.add_argument("--timing", default="60/20/40")
    parser.add_argument("--fault", choices=("slow", "outage"), default="slow")
    parser.add_argument("--delay", type=float, default=10.0)
    parser.add_argument("--spell", type=float, default=300.0)
    parser.add_argument("--every", type=float, default=10.0)
    parser.add_argument("--run", type=float, default=1.0)
    parser.add_argument("--tail", type=float, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the journals and logs")
    parser.add_argument("--reanalyse", type=Path, help="a file holding a kept run's JSON line")
    args = parser.parse_args()
    if args.reanalyse:
        printed = json.loads(args.reanalyse.read_text().strip().splitlines()[-1])
        fig = reanalyse(Path(printed["tmp"]), printed)
        fails = check(fig, tolerated=printed["tolerated"])
        print(json.dumps(asdict(fig) | {"tolerated": printed["tolerated"], "fails": fails}))
        return 1 if fails else 0
    from k8slease.election.budgets import tolerated_latency
    from k8slease.election.timing import ElectionTiming

    lease, renew, deadline = (float(x) for x in args.timing.split("/"))
    tolerated = tolerated_latency(
        ElectionTiming(lease_duration=lease, renew_interval=renew, renew_deadline=deadline)
    )
    tail = args.tail if args.tail is not None else 3 * args.every + 2 * args.delay
    tmp = Path(tempfile.mkdtemp(prefix="k8slease-slowcp-"))
    if args.server == "real":
        from k8slease.testing.controlplane import ControlPlane

        server: Any = ControlPlane()
    else:
        from k8slease.testing.server import APIServer

        server = APIServer()
    with server:
        fig = scenario_run(server, "default", tmp, timing=args.timing, fault=args.fault,
                           delay=args.delay, spell=args.spell, every=args.every, run=args.run,
                           tail=tail, server_name=args.server)  # fmt: skip
    fails = check(fig, tolerated=tolerated)
    print(json.dumps(asdict(fig) | {"tolerated": tolerated, "fails": fails, "tmp": str(tmp)}))
    if not args.keep and not fails:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())

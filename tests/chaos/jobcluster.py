"""The harness of the job-holder chaos scenarios (test_chaos_jobs.py, and the partition, hostile
and unanswered scenarios): :class:`JobCluster` spawns ``Jobs`` replicas (tests/chaos/chaos_jobs.py)
and the operator as processes, reads their journals back as :class:`Run` records and leader acts,
waits on them (a leader, a run in progress, a takeover), and reads the job's Lease, the
operator's status and the Events; with the scenario's timings and their bounds. The
``jobs_cluster`` fixture that makes one per test is in tests/chaos/conftest.py.
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from k8slease.errors import NotFound
from k8slease.lease.transport import LeaseTransport
from k8slease.lease.view import LeaseView
from k8slease.names import CRD_GROUP, CRD_PLURAL, CRD_VERSION
from tests.chaos.chaoslib import HERE, Procs, lines, overlaps, poll, segments_by

APP = HERE / "chaos_jobs.py"
GROUP, JOB = "chaosjobs", "tick"
EVERY, LOCK, RUN = 2.0, 3.0, 1.0  # tick interval, lock_at_most_for, run length (seconds)
LEASE, DEADLINE = 2.0, 1.4  # the group's election
CLAIM_SPREAD = 2 * 0.5  # the third replica's turn in a tick's claim order
# A stalled or dead holder's lock is taken at the first tick after it was seen unchanged for
# lock_at_most_for (its last keep-alive at most LOCK / 3 before the fault), in claim order;
# + 2 s for requests and a poll on 2 busy cores.
TAKEOVER_WITHIN = LOCK + EVERY + CLAIM_SPREAD + 2.0
LEADER_WITHIN = LEASE + DEADLINE + 2.0  # as in test_chaos_election.py
# With silent watches a replica's view is stale: its first claim after the holder died fails
# (409), the read that follows shows the last keep-alive, which it waits out from then on.
STALLED_TAKEOVER_WITHIN = TAKEOVER_WITHIN + LOCK
START_WITHIN = 20.0  # a process start (imports) on a loaded machine
OPERATOR_ENV = {
    "K8SLEASE_OPERATOR_FLUSH_INTERVAL": "0.05",
    "K8SLEASE_OPERATOR_MIN_WRITE_INTERVAL": "0.1",
    "K8SLEASE_OPERATOR_EVALUATE_INTERVAL": "0.5",
}


@dataclass
class Run:
    who: str
    tick: int
    token: int
    start: float
    works: list[float]
    end: float | None = None
    outcome: str = ""  # done | lost | "" (never ended: the process died)
    lost_read: float | None = None


class JobCluster:
    def __init__(self, server: Any, namespace: str, tmp: Path) -> None:
        self.server = server
        self.namespace = namespace
        self.tmp = tmp
        self.procs = Procs(tmp)
        self.api = server.api_client()
        self.transport = LeaseTransport(self.api, namespace, request_timeout=5)
        self.faults: list[str] = []
        self.times: dict[str, list[float]] = {}
        self.operators = 0

    # -- processes ------------------------------------------------------------------------------

    def spawn(
        self,
        name: str,
        *,
        every: float = EVERY,
        lock: float = LOCK,
        run: float = RUN,
        kubeconfig: Path | None = None,
    ) -> None:
        """A replica (chaos_jobs.py): a tick job every ``every`` s, ``lock_at_most_for=lock``,
        each run ``run`` s long; talking to the server through ``kubeconfig`` (default: the
        server's own)."""
        config = kubeconfig or self.server.kubeconfig
        self.procs.spawn(name, [
            str(APP), "--kubeconfig", str(config), "--namespace", self.namespace,
            "--identity", name, "--journal", str(self.tmp / f"{name}.journal"),
            "--log", str(self.tmp / f"{name}.log"),
            "--every", str(every), "--lock", str(lock), "--run", str(run),
        ])  # fmt: skip

    def spawn_operator(self) -> str:
        self.operators += 1
        name = f"operator{self.operators}"
        self.procs.spawn(name, ["-m", "k8slease", "operator", "--kubeconfig",
                                str(self.server.kubeconfig), "--namespace", self.namespace,
                                "--auto-create-group", GROUP],  # told about the group
                         **OPERATOR_ENV)  # fmt: skip
        return name

    def replicas(self) -> list[str]:
        return [n for n in self.procs.procs if not n.startswith("operator")]

    # -- journals -------------------------------------------------------------------------------

    def runs(self) -> list[Run]:
        out: list[Run] = []
        for who in self.replicas():
            current: dict[tuple[int, int], Run] = {}
            for row in lines(self.tmp / f"{who}.journal"):
                kind = row[0]
                if kind not in ("start", "work", "lost", "end"):
                    continue
                key = (int(row[1]), int(row[2]))
                when = float(row[3])
                if kind == "start":
                    current[key] = Run(who, key[0], key[1], when, [])
                    out.append(current[key])
                elif kind == "work":
                    current[key].works.append(when)
                elif kind == "lost":
                    current[key].lost_read = when
                else:
                    current[key].end, current[key].outcome = when, row[4]
        return sorted(out, key=lambda r: r.start)

    def leads(self) -> list[tuple[str, str, float]]:
        rows = []
        for who in self.replicas():
            for row in lines(self.tmp / f"{who}.journal"):
                if row[0] == "lead":
                    rows.append((who, row[2], float(row[1])))
        return rows

    def leader(self, *, not_: str = "", since: float = 0.0) -> str | None:
        """A live replica other than ``not_`` that led after ``since`` (its latest act)."""
        last: dict[str, float] = {}
        for who, _, when in self.leads():
            last[who] = max(last.get(who, 0.0), when)
        live = [(w, t) for w, t in last.items() if w != not_ and t > since and self.procs.alive(w)]
        return max(live, key=lambda x: x[1])[0] if live else None

    def wait_leader(self, *, not_: str = "", within: float = LEADER_WITHIN) -> tuple[str, float]:
        began = time.monotonic()
        who = poll("a leader", lambda: self.leader(not_=not_, since=began), within + 10)
        first = min(t for w, _, t in self.leads() if w == who and t > began)
        return who, first - began

    def wait_mid_run(self) -> Run:
        """A run in progress on a live replica, with at least half of it still to go."""

        def probe() -> Run | None:
            now = time.monotonic()
            for run in reversed(self.runs()):
                if run.end is None and self.procs.alive(run.who) and now - run.start < RUN / 2:
                    return run
            return None

        return poll("a run in progress", probe, EVERY * 3 + START_WITHIN)

    def wait_start(self, *, after: Run, within: float = TAKEOVER_WITHIN) -> Run:
        """The first run started by another replica for a tick after ``after``'s."""

        def probe() -> Run | None:
            later = [r for r in self.runs() if r.tick > after.tick and r.who != after.who]
            return later[0] if later else None

        return poll(f"a takeover of {after.who}'s lock", probe, within + 10)

    def wait_ended(self, run: Run, within: float) -> Run:
        def probe() -> Run | None:
            for r in self.runs():
                if (r.who, r.tick) == (run.who, run.tick) and r.end is not None:
                    return r
            return None

        return poll(f"the end of {run.who}'s run of tick {run.tick}", probe, within)

    def run_after(self, since: float, what: str, within: float) -> Run:
        """The first run started after ``since`` (CLOCK_MONOTONIC), once two more have started
        after it (the job runs on); ``what`` names the wait."""

        def probe() -> Run | None:
            later = [r for r in self.runs() if r.start > since]
            return later[0] if later else None

        first = poll(f"a run after {what}", probe, within)
        poll("two more runs", lambda: len([r for r in self.runs() if r.start > first.start]) >= 2,
             10)  # fmt: skip
        return first

    def stop_replicas(self) -> list[Run]:
        """SIGTERM every replica and wait for each: the runs of their complete journals, after
        checking that no two overlapped and that no tick was started twice."""
        for who in self.replicas():
            self.procs.signal(who, signal.SIGTERM)
        for who in self.replicas():
            self.procs.procs[who].wait(timeout=30)
        runs = self.runs()
        segments = segments_by((r.who, f"{r.tick}", r.start) for r in runs)
        assert not overlaps(segments), overlaps(segments)
        started = [r.tick for r in runs]
        assert len(started) == len(set(started)), started
        return runs

    def wait_up(self, who: str) -> None:
        poll(f"{who} up", lambda: any(r[0] == "up" for r in lines(self.tmp / f"{who}.journal")),
             START_WITHIN)  # fmt: skip

    def log_lines(self, who: str) -> list[str]:
        path = self.tmp / f"{who}.log"
        return path.read_text(errors="replace").splitlines() if path.exists() else []

    # -- API ------------------------------------------------------------------------------------

    def job_lease(self) -> LeaseView | None:
        try:
            return LeaseView.decode(self.transport.get(f"{GROUP}.{JOB}"))
        except NotFound:
            return None

    def status(self) -> dict[str, Any]:
        try:
            obj = client.CustomObjectsApi(self.api).get_namespaced_custom_object(
                CRD_GROUP, CRD_VERSION, self.namespace, CRD_PLURAL, GROUP
            )
        except ApiException as exc:
            if exc.status == 404:
                return {}
            raise
        return dict(obj.get("status") or {})

    def events(self) -> list[Any]:
        return list(client.CoreV1Api(self.api).list_namespaced_event(self.namespace).items)

    def took(self, what: str, seconds: float) -> None:
        self.times.setdefault(what, []).append(round(seconds, 2))

    def signal_holder_mid_run(
        self, sig: signal.Signals, took: str, *, within: float = TAKEOVER_WITHIN
    ) -> tuple[Run, float]:
        """``sig`` to the holder of a run in progress; returns that run and when the signal was
        sent, once another replica has started a run (within ``within`` s; the takeover time
        recorded as ``took``)."""
        victim = self.wait_mid_run()
        sent_at = time.monotonic()
        self.procs.signal(victim.who, sig)
        taker = self.wait_start(after=victim, within=within)
        self.took(took, taker.start - sent_at)
        return victim, sent_at

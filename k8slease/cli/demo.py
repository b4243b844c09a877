"""``python -m k8slease demo``: the whole story in about a minute, on a laptop with no cluster.

It starts the embedded API server (or uses ``--kubeconfig``), installs the ScheduledJobGroup CRD,
starts the operator and three replicas of the demo app that ships in the package
(``python -m k8slease.cli.demoapp.billing_app``) as separate processes, and
narrates what they log: who leads, which replica ran which invoice tick. It then kills the leader
(SIGKILL), later stops the new leader gracefully (SIGTERM), prints the group as ``kubectl get`` /
``describe`` show it (or ``k8slease status`` without kubectl), checks from the shared invoice
store that no tick ran twice, and exits 0 when everything held.

Everything it runs comes from the installed package, so it works from a wheel
(``pip install 'k8slease[demo]'``) as well as from a checkout (``make demo``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from k8slease.cli.demoapp.invoice_store import InvoiceStore

#: The module the replicas run: the demo app shipped in the package.
APP_MODULE = "k8slease.cli.demoapp.billing_app"
GROUP = "billing"
JOB = "nightly-invoices"


@dataclass
class Replica:
    """One replica process and what it told us."""

    name: str
    process: subprocess.Popen[str]
    identity: str = ""
    alive: bool = True


@dataclass
class Narrator:
    """Prints the demo's story with a clock relative to its start; collects what it saw."""

    started: float = field(default_factory=time.monotonic)
    events: queue.Queue[tuple[str, dict[str, Any]]] = field(default_factory=queue.Queue)
    runs: list[tuple[str, str, int]] = field(default_factory=list)
    leaders: list[tuple[float, str, int]] = field(default_factory=list)

    def say(self, text: str) -> None:
        print(f"[{time.monotonic() - self.started:6.1f}s] {text}", flush=True)

    def follow(self, name: str, stream: IO[str], keep: Path) -> None:
        """Read a replica's JSON log lines (in a thread), keep them all in ``keep`` and queue
        the interesting ones."""
        with keep.open("a") as kept:
            for line in stream:
                kept.write(line)
                kept.flush()
                self._queue(name, line)

    def _queue(self, name: str, line: str) -> None:
        try:
            event = json.loads(line)
        except ValueError:
            return
        if isinstance(event, dict):
            self.events.put((name, event))

    def next_event(self, timeout: float) -> tuple[str, dict[str, Any]] | None:
        try:
            name, event = self.events.get(timeout=timeout)
        except queue.Empty:
            return None
        kind = event.get("event")
        if kind == "leader.started":
            token = int(event.get("fencing_token") or 0)
            self.leaders.append((time.monotonic(), name, token))
            self.say(f"{name} leads now (identity {event.get('identity')}, fencing token {token})")
        elif kind == "job.finished" and event.get("job") == JOB:
            tick = str(event.get("tick", ""))
            token = int(event.get("fencing_token") or 0)
            self.runs.append((tick, name, token))
            self.say(
                f"{name} ran {JOB} for tick {tick[11:19]}: {event.get('outcome')} "
                f"(fencing token {token})"
            )
        elif kind == "leader.stopped":
            self.say(f"{name} stopped leading ({event.get('reason')})")
        elif kind == "queue.polling":
            self.say(f"{name} started the LEADER job poll-queue")
        elif kind == "queue.stopped":
            self.say(f"{name} stopped poll-queue after {event.get('polls')} polls (ctx.lost)")
        return name, event


class Demo:
    """Runs the demo's phases; ``quick`` shortens them (for the test that covers the demo)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.narrator = Narrator()
        self.replicas: list[Replica] = []
        self.operator: subprocess.Popen[str] | None = None
        self.workdir = Path(tempfile.mkdtemp(prefix="k8slease-demo-"))
        self.store = self.workdir / "invoices.sqlite"
        self.kubeconfig = ""
        self.namespace = args.namespace
        self.failures: list[str] = []

    # -- set-up --------------------------------------------------------------------------------

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["KUBECONFIG"] = self.kubeconfig
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def prepare_cluster(self, api_client: Any) -> None:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        core = client.CoreV1Api(api_client)
        try:
            core.create_namespace(
                client.V1Namespace(metadata=client.V1ObjectMeta(name=self.namespace))
            )
        except ApiException as exc:
            if exc.status != 409:
                raise
        from k8slease.names import CRD_GROUP, CRD_KIND, CRD_PLURAL, CRD_VERSION
        from k8slease.operator.crd import install_crd

        install_crd(api_client)
        body = {
            "apiVersion": f"{CRD_GROUP}/{CRD_VERSION}",
            "kind": CRD_KIND,
            "metadata": {"name": GROUP},
            "spec": {},
        }
        try:
            client.CustomObjectsApi(api_client).create_namespaced_custom_object(
                CRD_GROUP, CRD_VERSION, self.namespace, CRD_PLURAL, body
            )
        except ApiException as exc:
            if exc.status != 409:
                raise

    def group_status(self, api_client: Any) -> dict[str, Any]:
        """The demo group's ScheduledJobGroup status ({} while there is none)."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        from k8slease.names import CRD_GROUP, CRD_PLURAL, CRD_VERSION

        try:
            group: Any = client.CustomObjectsApi(api_client).get_namespaced_custom_object(
                CRD_GROUP, CRD_VERSION, self.namespace, CRD_PLURAL, GROUP
            )
        except ApiException:
            return {}
        status = group.get("status") if isinstance(group, dict) else None
        return status if isinstance(status, dict) else {}

    def wait_until_operator_watches(self, api_client: Any) -> None:
        """The operator writes the group's status once it watches; replicas start after that,
        so that it sees the first leader too (kopf takes seconds to start on a busy machine)."""
        deadline = time.monotonic() + 60
        while not self.group_status(api_client):
            if time.monotonic() > deadline:
                self.failures.append("the operator wrote no status within 60 s")
                return
            time.sleep(0.2)
        self.narrator.say("operator is watching (it wrote the group's status)")

    def start_operator(self) -> None:
        command = [
            sys.executable,
            "-m",
            "k8slease",
            "operator",
            "--namespace",
            self.namespace,
            "--kubeconfig",
            self.kubeconfig,
        ]
        log = open(self.workdir / "operator.log", "w")  # noqa: SIM115 - kept open while it runs
        self.operator = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            env=self.env(),
            cwd=self.workdir,
        )
        self.narrator.say(f"operator started (pid {self.operator.pid}, log {log.name})")

    def start_replica(self, index: int) -> Replica:
        name = f"replica-{index}"
        env = self.env()
        env["POD_NAME"] = name
        env["POD_NAMESPACE"] = self.namespace
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                APP_MODULE,
                "--kubeconfig",
                self.kubeconfig,
                "--namespace",
                self.namespace,
                "--group",
                GROUP,
                "--store",
                str(self.store),
                "--fast",
                "--log-level",
                "debug",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,  # a traceback lands in the replica's log too
            text=True,
            env=env,
            cwd=self.workdir,
        )
        replica = Replica(name, process)
        assert process.stdout is not None
        threading.Thread(
            target=self.narrator.follow,
            args=(name, process.stdout, self.workdir / f"{name}.log"),
            daemon=True,
        ).start()
        self.replicas.append(replica)
        return replica

    # -- phases --------------------------------------------------------------------------------

    def wait_for(self, what: str, predicate: Any, timeout: float) -> bool:
        """Narrate events until ``predicate()`` holds; record a failure after ``timeout``."""
        deadline = time.monotonic() + timeout
        while not predicate():
            self.check_replicas()
            left = deadline - time.monotonic()
            if left <= 0:
                self.failures.append(f"timed out waiting for {what}")
                self.narrator.say(f"!! timed out waiting for {what}")
                return False
            self.narrator.next_event(min(left, 0.5))
        return True

    def check_replicas(self) -> None:
        """Record a replica that ended without being told to (its log says why)."""
        for replica in self.replicas:
            status = replica.process.poll() if replica.alive else None
            if status is not None:
                replica.alive = False
                log = self.workdir / f"{replica.name}.log"
                self.failures.append(f"{replica.name} exited with status {status} (see {log})")
                self.narrator.say(f"!! {replica.name} exited with status {status}")

    def leader(self) -> Replica | None:
        if not self.narrator.leaders:
            return None
        name = self.narrator.leaders[-1][1]
        return next((r for r in self.replicas if r.name == name and r.alive), None)

    def runs_after(self, count: int) -> Any:
        return lambda: len(self.narrator.runs) >= count

    def failover(self, how: signal.Signals) -> None:
        leader = self.leader()
        if leader is None:
            self.failures.append("no leader to stop")
            return
        leaders_before = len(self.narrator.leaders)
        verb = "killing" if how is signal.SIGKILL else "stopping"
        self.narrator.say(f">> {verb} the leader {leader.name} with {how.name}")
        sent = time.monotonic()
        leader.process.send_signal(how)
        leader.alive = False
        if self.wait_for("a new leader", lambda: len(self.narrator.leaders) > leaders_before, 20):
            took = self.narrator.leaders[-1][0] - sent
            self.narrator.say(
                f"<< {self.narrator.leaders[-1][1]} took over {took:.2f} s after {how.name}"
            )

    def run(self) -> int:
        from k8slease.kube.apiclient import default_api_client

        with self.api_server() as kubeconfig:
            self.kubeconfig = kubeconfig
            api_client = default_api_client(kubeconfig=kubeconfig)
            print(
                f"kubeconfig: {kubeconfig}\n  try: kubectl --kubeconfig {kubeconfig} "
                f"get leases,scheduledjobgroups -n {self.namespace}",
                flush=True,
            )
            self.prepare_cluster(api_client)
            if not self.args.no_operator:
                self.start_operator()
                self.wait_until_operator_watches(api_client)
            try:
                self.story()
                self.show(api_client)
            finally:
                self.shutdown()
            self.verify()
        if self.failures:
            print("\nDEMO FAILED:\n  " + "\n  ".join(self.failures), flush=True)
            print(f"  the replicas' and the operator's logs are in {self.workdir}", flush=True)
            return 1
        print("\nDemo finished: one leader at a time, every invoice tick ran exactly once.")
        return 0

    def story(self) -> None:
        quick = self.args.quick
        # the shared store made (its schema and WAL mode) before the replicas race to make it
        InvoiceStore(self.store)
        for index in range(self.args.replicas):
            replica = self.start_replica(index)
            self.narrator.say(f"{replica.name} started (pid {replica.process.pid})")
        if not self.wait_for("the first leader", lambda: bool(self.narrator.leaders), 20):
            return
        self.wait_for("invoice runs", self.runs_after(1 if quick else 3), 30)
        self.failover(signal.SIGKILL)
        self.wait_for(
            "invoice runs", self.runs_after(len(self.narrator.runs) + (1 if quick else 2)), 30
        )
        if self.args.replicas >= 3:
            self.failover(signal.SIGTERM)
            self.wait_for("invoice runs", self.runs_after(len(self.narrator.runs) + 1), 30)

    @contextlib.contextmanager
    def api_server(self) -> Iterator[str]:
        if self.args.kubeconfig:
            yield self.args.kubeconfig
            return
        from k8slease.testing.server import APIServer

        with APIServer() as server:
            self.narrator.say(f"embedded API server at {server.url}")
            yield str(server.kubeconfig)

    def shutdown(self) -> None:
        if self.operator is not None and self.operator.poll() is None:
            self.operator.kill()
        for replica in self.replicas:
            if replica.alive:
                replica.process.send_signal(signal.SIGTERM)
        for replica in self.replicas:
            try:
                replica.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                replica.process.kill()
                replica.process.wait()
        # Drain what the replicas said while stopping.
        while self.narrator.next_event(0.05) is not None:
            pass

    def show(self, api_client: Any) -> None:
        if self.operator is not None:
            self.wait_for_operator(api_client)
        kubectl = shutil.which("kubectl")
        print("", flush=True)
        if kubectl and not self.args.no_kubectl:
            base = [kubectl, "--kubeconfig", self.kubeconfig, "-n", self.namespace]
            for extra in (
                ["get", "scheduledjobgroups", "-o", "wide"],
                ["get", "leases"],
                ["describe", "scheduledjobgroup", GROUP],
            ):
                print(f"$ kubectl {' '.join(extra)} -n {self.namespace}", flush=True)
                subprocess.run(base + extra, check=False, timeout=30)
                print("", flush=True)
        else:
            from k8slease.cli.status import render_status

            print(f"$ k8slease status {GROUP} -n {self.namespace}")
            print(render_status(api_client, namespace=self.namespace, group=GROUP), flush=True)
        if self.operator is not None:
            self.operator.send_signal(signal.SIGTERM)
            try:
                self.operator.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.operator.kill()

    def wait_for_operator(self, api_client: Any) -> None:
        """Give the operator a bounded moment to write the last failover into the status."""
        deadline = time.monotonic() + 20
        wanted = len(self.narrator.leaders)
        while time.monotonic() < deadline:
            status = self.group_status(api_client)
            last_ticks = {
                str((job.get("lastRun") or {}).get("tick", ""))[:19]
                for job in status.get("jobs") or []
                if isinstance(job, dict)
            }
            newest = self.narrator.runs[-1][0][:19] if self.narrator.runs else ""
            if len(status.get("failovers") or []) >= wanted and (
                not newest or newest in last_ticks
            ):
                return
            time.sleep(0.5)
        self.failures.append("the operator did not report every leadership change in time")

    def verify(self) -> None:
        from collections import Counter

        ticks = Counter(tick for tick, _, _ in self.narrator.runs)
        twice = sorted(tick for tick, count in ticks.items() if count > 1)
        if twice:
            self.failures.append(f"ticks that ran more than once: {twice}")
        if self.store.exists():
            import sqlite3

            with contextlib.closing(sqlite3.connect(self.store)) as db:
                stored = [row[0] for row in db.execute("SELECT tick FROM runs")]
            dup = sorted(t for t, c in Counter(stored).items() if c > 1)
            if dup:
                self.failures.append(f"the invoice store recorded ticks twice: {dup}")
            print(f"invoice store: {len(stored)} runs, {len(set(stored))} distinct ticks")
        if len(self.narrator.leaders) < (3 if self.args.replicas >= 3 else 2):
            self.failures.append(f"expected failovers, saw leaders {self.narrator.leaders}")


def build_parser() -> argparse.ArgumentParser:
    """The command-line options."""
    parser = argparse.ArgumentParser(
        prog="k8slease demo",
        description="Run the demo app's replicas, the operator and two failovers (SIGKILL, "
        "SIGTERM) on the embedded API server, or on a real cluster with --kubeconfig, and check "
        "that no invoice tick ran twice.",
    )
    parser.add_argument(
        "--kubeconfig",
        help="run against this cluster instead of an embedded one (the replicas and the "
        "operator run on this machine; the CRD is installed if missing)",
    )
    parser.add_argument(
        "--namespace",
        "-n",
        default="k8slease-demo",
        help="namespace for the demo's Leases, created if missing (default k8slease-demo)",
    )
    parser.add_argument(
        "--replicas",
        type=int,
        default=3,
        choices=range(2, 10),
        metavar="N",
        help="how many replicas to run, 2 to 9 (default 3)",
    )
    parser.add_argument("--quick", action="store_true", help="fewer runs per phase (tests)")
    parser.add_argument("--no-operator", action="store_true", help="do not start the operator")
    parser.add_argument(
        "--no-kubectl",
        action="store_true",
        help="show the result with 'k8slease status' even when kubectl is installed",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from k8slease.errors import K8sLeaseError
    from k8slease.kube.identity import checked_namespace

    args = build_parser().parse_args(argv)
    try:
        checked_namespace(args.namespace, source="--namespace")
        return Demo(args).run()
    except K8sLeaseError as exc:
        print(f"k8slease demo: {exc}", file=sys.stderr)
        return 2

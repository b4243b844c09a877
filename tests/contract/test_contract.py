"""The contract matrix: every promise of the docs, in every form, shape and ending (issue 21).

The cases are generated: every public **form** x every callback or job **shape** x every
**ending**, on each API server (``--k8s-server``: the embedded one and the real control plane).

Forms:
    ``with`` (``with LeaderElector(...)``), ``run`` (``LeaderElector.run()``), ``start-stop``
    (``start()``, then ``stop()`` in a ``finally``), ``async-with`` (``async with
    AsyncLeaderElector``), ``jobs-run`` (``Jobs.run()``), ``with-jobs`` (``with jobs``),
    ``async-with-jobs`` (``async with jobs``), ``wrap`` (``wrap(scheduler, elector)`` with
    ``with elector``).
Shapes (``on_started_leading`` for the elector forms, a LEADER singleton job for ``Jobs``):
    ``blocks`` (until ``ctx.lost``), ``returns`` (at once), ``returns-noarg`` (zero arguments),
    ``raises``, ``async`` (an ``async def`` awaiting until cancelled), ``async-noarg``.
Endings:
    ``sigterm-main`` (SIGTERM delivered to the main thread), ``sigterm-thread`` (delivered to
    another thread), ``stop`` (the form's own stop: ``stop()``, or leaving the ``with`` body),
    ``exception`` (the body raises), ``lost`` (another replica takes the Lease over), and
    ``unreachable`` (the API server cut off by a proxy).

Every case asserts what the docs promise: the Lease released (holder empty) within a bound after
the ending (or, when lost, the other replica's Lease left alone; when unreachable, a step-down
within ``renew_deadline``), the callbacks once each and in order, the exception not swallowed,
the signal handed on to the handler that was there before, no thread or task left behind, the
``k8slease_is_leader`` gauge back at 0, ``ready()`` false and ``healthy()`` true once stopped
(``ready()`` false and ``healthy()`` true while cut off). SIGTERM endings also run once per form
in a process of their own with the default SIGTERM action: it must end with -SIGTERM after the
release.

Cases run in real processes (``contract_child.py``), batched: a few children per server, each
running its share of the cases one after another (its own SIGTERM handler in place, so a signal
ends the case, not the process), all sharing one API server. Excluded combinations, with the
reason, are in :data:`EXCLUDED`. The counts are in docs/testing.md.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from kubernetes import client

from k8slease.kube.microtime import format_microtime
from k8slease.testing.server import APIServer
from tests.contract.contract_child import TIMING
from tests.contract.contract_proxy import CuttableProxy, server_port
from tests.support.processes import child_env, serving

# the first case of each server waits for all of them (the module fixture runs them at once)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

CHILD = Path(__file__).with_name("contract_child.py")

FORMS = (
    "with", "run", "start-stop", "async-with", "jobs-run", "with-jobs", "async-with-jobs", "wrap",
)  # fmt: skip
SHAPES = ("blocks", "returns", "returns-noarg", "raises", "async", "async-noarg")
ENDINGS = ("sigterm-main", "sigterm-thread", "stop", "exception", "lost", "unreachable")
ELECTOR_FORMS = ("with", "run", "start-stop", "async-with", "wrap")
NO_BODY = "the main thread is inside run(): there is no code of the caller's to raise"

#: (form, shape, ending) patterns the docs do not allow, with the reason (None: any)
EXCLUDED: list[tuple[str | None, str | None, str | None, str]] = [
    ("run", None, "exception", NO_BODY),
    ("jobs-run", None, "exception", NO_BODY),
    ("wrap", "async", None, "wrap() chains plain callbacks only (an async one is a ConfigError)"),
    ("wrap", "async-noarg", None, "wrap() chains plain callbacks only"),
]

#: The child's timings: the bounds below follow from them.
RENEW_INTERVAL = TIMING["renew_interval"]
RENEW_DEADLINE = TIMING["renew_deadline"]
#: slack for a busy 2-core machine on top of each bound
SLACK = 2.0
CHILDREN = 8
IDENTITY = "contract-child"
USURPER = "usurper"


@dataclass(frozen=True)
class Case:
    form: str
    shape: str
    ending: str
    default_signals: bool = False

    @property
    def id(self) -> str:
        suffix = "-exit" if self.default_signals else ""
        return f"{self.form}-{self.shape}-{self.ending}{suffix}"


def excluded(form: str, shape: str, ending: str) -> str | None:
    for f, s, e, reason in EXCLUDED:
        if f in (None, form) and s in (None, shape) and e in (None, ending):
            return reason
    return None


def generate() -> list[Case]:
    """Every allowed form x shape x ending (batched), plus each form's SIGTERM endings in a
    process of its own with the default SIGTERM action (the exit status)."""
    cases = [
        Case(form, shape, ending)
        for form, shape, ending in itertools.product(FORMS, SHAPES, ENDINGS)
        if excluded(form, shape, ending) is None
    ]
    cases += [
        Case(form, "blocks", ending, default_signals=True)
        for form, ending in itertools.product(FORMS, ("sigterm-main", "sigterm-thread"))
    ]
    return cases


#: CONTRACT_CASES=substring runs only the matching cases (to look into one while debugging)
CASES = [case for case in generate() if os.environ.get("CONTRACT_CASES", "") in case.id]


# -- running the cases -----------------------------------------------------------------------


def lease_api(api_client: client.ApiClient) -> client.CoordinationV1Api:
    return client.CoordinationV1Api(api_client)


def holder(api_client: client.ApiClient, name: str) -> str:
    lease = lease_api(api_client).read_namespaced_lease(name, "default")
    return lease.spec.holder_identity or ""


def take_over(api_client: client.ApiClient, name: str) -> None:
    """Another replica takes the Lease (as after an expiry): a conditional write, retried on
    a conflict with the child's renewals."""
    api = lease_api(api_client)
    for _ in range(50):
        lease = api_client.sanitize_for_serialization(api.read_namespaced_lease(name, "default"))
        now = format_microtime(_utcnow())
        spec = lease["spec"]
        spec.update(holderIdentity=USURPER, acquireTime=now, renewTime=now)
        spec.update(leaseDurationSeconds=30, leaseTransitions=spec.get("leaseTransitions", 0) + 1)
        try:
            api.replace_namespaced_lease(name, "default", lease)
            return
        except client.ApiException as exc:
            if exc.status != 409:
                raise
    raise AssertionError(f"could not take {name} over")


def _utcnow() -> Any:
    from datetime import UTC, datetime

    return datetime.now(UTC)


class Child:
    """One child process running ``cases`` one after another; the parent's side of the talk."""

    def __init__(
        self,
        cases: list[tuple[Case, str]],
        kubeconfig: Path,
        api_client: client.ApiClient,
        proxy: CuttableProxy | None,
        *,
        default_signals: bool = False,
    ) -> None:
        self.cases = dict((lease, case) for case, lease in cases)
        self.by_id = {case.id: (case, lease) for case, lease in cases}
        self.api_client = api_client
        self.proxy = proxy
        self.results: dict[str, dict[str, Any]] = {}
        specs = [
            {"id": case.id, "form": case.form, "shape": case.shape, "ending": case.ending,
             "lease": lease}
            for case, lease in cases
        ]  # fmt: skip
        command = [sys.executable, str(CHILD), str(kubeconfig), json.dumps(specs)]
        if default_signals:
            command.append("--default-signals")
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=child_env(),
        )
        self.stderr = ""
        self.thread = threading.Thread(target=self._talk, daemon=True)
        self.thread.start()
        self.err_thread = threading.Thread(target=self._drain_stderr, daemon=True)
        self.err_thread.start()

    def _drain_stderr(self) -> None:
        assert self.process.stderr is not None
        self.stderr = self.process.stderr.read()

    def _talk(self) -> None:
        process = self.process
        assert process.stdout is not None and process.stdin is not None
        for line in process.stdout:
            word, _, rest = line.strip().partition(" ")
            if word == "READY":
                case, lease = self.by_id[rest]
                if case.ending == "lost":
                    take_over(self.api_client, lease)
                elif case.ending == "unreachable":
                    assert self.proxy is not None
                    self.proxy.cut()
                self.results.setdefault(case.id, {})["go_at"] = time.monotonic()
                process.stdin.write("GO\n")
                process.stdin.flush()
            elif word == "RESULT":
                result = json.loads(rest)
                case, lease = self.by_id[result["id"]]
                if self.proxy is not None:
                    self.proxy.restore()
                result["holder_after"] = holder(self.api_client, lease)
                self.results.setdefault(case.id, {}).update(result)
        process.wait()
        for case, lease in self.by_id.values():
            if case.default_signals:
                entry = self.results.setdefault(case.id, {})
                entry["returncode"] = process.returncode
                entry["exited_after"] = time.monotonic() - entry.get("go_at", time.monotonic())
                entry["holder_after"] = holder(self.api_client, lease)

    def wait(self, timeout: float) -> None:
        self.thread.join(timeout)
        if self.thread.is_alive():
            self.process.kill()
            self.thread.join(5)
        self.err_thread.join(5)


def _collected(children: list[Child]) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """The children's results and each case's log, by case id."""
    results: dict[str, dict[str, Any]] = {}
    logs: dict[str, str] = {}
    for child in children:
        results.update(child.results)
        for part in child.stderr.split("=== CASE ")[1:]:
            case_id, _, log = part.partition("\n")
            logs[case_id] = log
        if len(child.by_id) == 1:
            [only] = child.by_id
            logs.setdefault(only, child.stderr)
    return results, logs


def _starved(case: Case, log: str) -> bool:
    """Whether the case's replica stepped down at its renew deadline though the case cut
    nothing off: the server did not answer its renewals in time, and the case's own ending
    was never what it met."""
    return case.ending != "unreachable" and "reason='renew deadline passed'" in log


@contextlib.contextmanager
def _server_of_its_own(server: Any, tmp: Path) -> Iterator[tuple[Any, Path]]:
    """The API client and kubeconfig of the matrix's server: the real tier as it is; for the
    embedded tier, an embedded server in a process of its own (``k8slease apiserver``).

    The plugin's embedded server runs in the pytest worker, beside the children's proxies and
    their reader threads: under `make test` with `make e2e` booting beside it, it answered
    nothing for seconds, and releases of a dozen cases ran out of time in two runs out of two.
    What the matrix tests is the library in the children, not where the server runs, nor how
    its process fares among the suite's for CPU: it runs at a higher priority where allowed.
    """
    if not isinstance(server, APIServer):
        yield server.api_client(), Path(server.kubeconfig)
        return
    kubeconfig = tmp / "kubeconfig"
    # a cluster's API server does not share its CPU with the clients it answers: ahead of the
    # suite's own processes (where allowed), so that under `make test` beside `make e2e` it does
    # not stall for seconds (two CI runs: releases that found it silent for 5 s)
    with serving(
        "k8slease", "apiserver", "--kubeconfig", str(kubeconfig), stop_within=30, niceness=-10
    ):
        api_client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
        try:
            yield api_client, kubeconfig
        finally:
            api_client.close()


@pytest.fixture(scope="module")
def outcomes(k8s_apiserver: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Run every case on this server (children in parallel); the results by case id."""
    tmp = tmp_path_factory.mktemp("contract")
    with _server_of_its_own(k8s_apiserver, tmp) as (api_client, kubeconfig):
        yield from _outcomes(k8s_apiserver, api_client, kubeconfig, tmp)


def _outcomes(server: Any, api_client: Any, kubeconfig: Path, tmp: Path) -> Iterator[Any]:
    run = uuid.uuid4().hex[:5]
    leases = {case.id: f"c{index}-{run}" for index, case in enumerate(CASES)}
    batched = [case for case in CASES if not case.default_signals]
    children: list[Child] = []
    proxies: list[CuttableProxy] = []
    started = time.monotonic()
    for index in range(CHILDREN):
        share = [(case, leases[case.id]) for case in batched[index::CHILDREN]]
        proxy = CuttableProxy(server_port(kubeconfig))
        proxies.append(proxy)
        through = proxy.kubeconfig_through(kubeconfig, tmp / f"kubeconfig-{index}")
        children.append(Child(share, through, api_client, proxy))
    for case in CASES:
        if case.default_signals:
            children.append(
                Child([(case, leases[case.id])], kubeconfig, api_client, None, default_signals=True)
            )
    for child in children:
        child.wait(timeout=600)
    results, logs = _collected(children)
    # A case whose replica missed its renew deadline with no fault of the case's making did not
    # test its ending: the server answered too late (all children start at once, with `make
    # test`, `make e2e` and the floor tests starting beside them). Such a case runs once more,
    # alone; its second result stands, and it says that it is a second run.
    starved = [case for case in batched if _starved(case, logs.get(case.id, ""))]
    if starved:
        proxy = CuttableProxy(server_port(kubeconfig))
        proxies.append(proxy)
        through = proxy.kubeconfig_through(kubeconfig, tmp / "kubeconfig-rerun")
        again = Child(
            [(case, f"{leases[case.id]}-r") for case in starved], through, api_client, proxy
        )
        again.wait(timeout=600)
        rerun_results, rerun_logs = _collected([again])
        for case in starved:
            first = logs.get(case.id, "")
            results[case.id] = {**rerun_results.get(case.id, {}), "second_run": True}
            logs[case.id] = (
                f"--- the first run's, ending ---\n{first[-1000:]}\n--- the second run's ---\n"
                + rerun_logs.get(case.id, "")
            )
        ids = [case.id for case in starved]
        print(f"contract matrix: ran again (a renew deadline missed unprovoked): {ids}")
    for proxy in proxies:
        proxy.close()
    elapsed = time.monotonic() - started
    slowest = sorted(results.items(), key=lambda kv: -kv[1].get("case_seconds", 0))[:8]
    for case_id, result in slowest:
        print(
            f"  {case_id}: {result.get('case_seconds', 0):.2f}s"
            f" (to lead {result.get('lead_seconds', 0):.2f}s)"
        )
    print(f"contract matrix: {len(CASES)} cases in {elapsed:.1f}s on {server!r}")
    yield results, logs


# -- the promises ------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_contract(case: Case, outcomes: Any) -> None:
    results, logs = outcomes
    result = results.get(case.id)
    assert result is not None and "holder_after" in result, (
        f"no result for {case.id}\n{logs.get(case.id, '')[-3000:]}"
    )
    context = (
        f"{case.id}: {json.dumps(result, default=str)}\n--- child's stderr ---\n"
        + logs.get(case.id, "")[-3000:]
    )
    if case.default_signals:
        assert result["returncode"] == -signal.SIGTERM, context
        assert result["holder_after"] == "", "released before the process ended\n" + context
        assert result["exited_after"] < RENEW_DEADLINE + SLACK, context
        return
    assert not result.get("never_led"), context
    calls: list[str] = result["calls"]
    assert calls and calls[0] == "started", context
    assert calls.count("started") == 1, "the callback or job ran once\n" + context
    assert result["gauge_while_leading"] == 1.0, context
    # after the end, whatever the ending
    assert result["threads_left"] == [], "no thread left behind\n" + context
    assert result.get("tasks_left", []) == [], "no task left behind\n" + context
    assert result["gauge"] == 0.0, context
    assert result["is_leader"] is False, context
    assert result["ready"] is False, "not ready once stopped\n" + context
    assert result["healthy"] is True, context
    if case.form in ELECTOR_FORMS:
        assert calls.count("stopped") == 1, "on_stopped_leading once\n" + context
    if case.shape == "blocks":
        assert "returned" in calls, "ctx.lost ended the blocking callback\n" + context
    if case.shape.startswith("async"):
        assert "cancelled" in calls, "the coroutine was cancelled when leadership ended\n" + context
    ending = case.ending
    if ending in ("sigterm-main", "sigterm-thread", "stop", "exception"):
        assert result["holder_after"] == "", "the Lease was released\n" + context
        assert result["ended_after"] < RENEW_DEADLINE + SLACK, context
    if ending.startswith("sigterm"):
        assert "app-handler" in calls, "the signal went on to the previous handler\n" + context
        assert calls.index("app-handler") > calls.index("started"), context
    if ending == "exception":
        assert result["raised"] == "the body raised", "the exception was not swallowed\n" + context
    else:
        assert result["raised"] is None, context
    if ending == "lost":
        assert result["holder_after"] == USURPER, "the other replica's Lease was left alone\n" + (
            context
        )
        assert result["stepped_down"], context
        assert result["stepped_down_after"] < RENEW_INTERVAL + RENEW_DEADLINE + SLACK, context
    if ending == "unreachable":
        assert result["stepped_down"], context
        assert result["stepped_down_after"] < RENEW_DEADLINE + SLACK, context
        assert result["healthy_while_cut"] is True, "a stepped-down replica is healthy\n" + context
        assert result["ready_while_cut"] is False, "not ready while cut off\n" + context
        assert result["holder_after"] == IDENTITY, "nothing could be released\n" + context
        assert result["ended_after"] < RENEW_DEADLINE + SLACK + 1.0, context


def test_the_counts_in_docs_testing_md_are_current() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "testing.md").read_text()
    excluded_count = len(list(itertools.product(FORMS, SHAPES, ENDINGS))) - sum(
        1 for case in CASES if not case.default_signals
    )
    line = (
        f"{len(CASES)} cases per server ({len(FORMS)} forms x {len(SHAPES)} shapes x "
        f"{len(ENDINGS)} endings, {excluded_count} excluded"
    )
    assert line in text, f"docs/testing.md should say: {line}"


def test_only_a_case_starved_of_answers_runs_again() -> None:
    """The second run is for a case the server failed, never for one that met its ending."""
    missed = "leader.stopped lease=c9 term=1 reason='renew deadline passed'\n"
    taken = "leader.stopped lease=c10 term=1 reason='lease edited by someone else: held by u'\n"
    assert _starved(Case("with", "returns", "exception"), missed)
    assert _starved(Case("with", "returns", "lost"), missed)
    assert not _starved(Case("with", "returns", "unreachable"), missed)
    assert not _starved(Case("with", "returns", "lost"), taken)
    assert not _starved(Case("run", "blocks", "stop"), "")

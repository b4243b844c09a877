"""The child process of the contract matrix (tests/contract/test_contract.py): runs cases.

``python contract_child.py KUBECONFIG CASES_JSON`` runs the cases in order, in this process, on
the API server of ``KUBECONFIG``. Per case it prints ``READY <id>`` once the form leads and the
callback or job has started, waits for a ``GO`` line on stdin (the parent has meanwhile done its
part of the ending: cut the API server off, taken the Lease over), ends the case as its ending
says, and prints ``RESULT <json>`` with what it observed. Printed lines are the protocol; logs go
to stderr.

With ``--default-signals`` (one case) the process keeps the default SIGTERM action, so the
signal ends it (the parent checks the exit status). Otherwise the driver installs its own
SIGTERM handler before each case, as an application may: k8slease's handler must stop (release)
and then hand the signal on to it, which ends the case's body; the process survives for the
next case.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler
from prometheus_client import REGISTRY

from k8slease import AsyncLeaderElector, ElectionTiming, Jobs, LeaderElector, Mode, wrap
from k8slease.kube.apiclient import default_api_client
from tests.support.polling import poll  # the parent puts the repository root on PYTHONPATH

#: short, but with a request timeout a loaded 2-core machine meets (the derived one, a third of
#: the renew deadline, timed releases out there) and a renew deadline it meets too (1.5 s was
#: missed by renews and releases in a warm CI run, `make e2e` booting its cluster beside; 2.5 s
#: left a default-SIGTERM child 0.37 s for its release in another, the stop itself starved of
#: CPU by the matrix's own children beside `make test` and `make e2e`); renewals once a second,
#: not twice: two dozen children renewing at once are the matrix's server's whole load
TIMING: dict[str, float] = dict(
    lease_duration=6,
    renew_interval=1.0,
    renew_deadline=4,
    retry_interval=0.2,
    request_timeout=1.0,
)
#: how long the child waits for leadership, a step-down, the end of threads
WAIT = 10.0
NAMESPACE = "default"
IDENTITY = "contract-child"
OWN_THREADS = ("MainThread", "contract-control")


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class Case:
    """One case's state: what its callback did, how to end its body, what was observed."""

    def __init__(self, spec: dict[str, str]) -> None:
        self.id = spec["id"]
        self.form = spec["form"]
        self.shape = spec["shape"]
        self.ending = spec["ending"]
        self.lease = spec["lease"]
        self.calls: list[str] = []
        self.lock = threading.Lock()
        self.started = threading.Event()
        self.end = threading.Event()  # the body (with, start/stop) returns when set
        self.raise_in_body = False
        self.loop: asyncio.AbstractEventLoop | None = None
        self.async_end: asyncio.Event | None = None
        self.stop_form: Callable[[], None] = self.end_body
        self.leads: Callable[[], bool] = lambda: False
        self.ready: Callable[[], bool] = lambda: False
        self.healthy: Callable[[], bool] = lambda: True
        self.observed: dict[str, Any] = {}

    def record(self, what: str) -> None:
        with self.lock:
            self.calls.append(what)
        if what == "started":
            self.started.set()

    def end_body(self) -> None:
        """End the body of a with / start-stop / async-with form (thread- and signal-safe)."""
        self.end.set()
        if self.loop is not None and self.async_end is not None:
            self.loop.call_soon_threadsafe(self.async_end.set)

    def body(self) -> None:
        """A with body as an application writes it: it works (here: waits) until told to end."""
        while not self.end.wait(0.25):
            pass
        if self.raise_in_body:
            raise RuntimeError("the body raised")

    async def async_body(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.async_end = asyncio.Event()
        if self.end.is_set():
            self.async_end.set()
        await self.async_end.wait()
        if self.raise_in_body:
            raise RuntimeError("the body raised")

    # -- the callback / job shapes -------------------------------------------------------------

    def shape_function(self) -> Callable[..., Any]:
        record = self.record
        if self.shape == "blocks":

            def blocks(ctx: Any) -> None:
                record("started")
                ctx.lost.wait()
                record("returned")

            return blocks
        if self.shape == "returns":

            def returns(ctx: Any) -> None:
                record("started")

            return returns
        if self.shape == "returns-noarg":

            def returns_noarg() -> None:
                record("started")

            return returns_noarg
        if self.shape == "raises":

            def raises(ctx: Any) -> None:
                record("started")
                raise RuntimeError("the callback raised")

            return raises

        async def until_cancelled() -> None:
            record("started")
            try:
                await asyncio.Event().wait()  # runs until cancelled
            except asyncio.CancelledError:
                record("cancelled")
                raise

        if self.shape == "async":

            async def coroutine(ctx: Any) -> None:
                await until_cancelled()

            return coroutine
        if self.shape == "async-noarg":

            async def coroutine_noarg() -> None:
                await until_cancelled()

            return coroutine_noarg
        raise AssertionError(self.shape)


# -- the forms ---------------------------------------------------------------------------------


def elector_options(case: Case, client: Any, **extra: Any) -> dict[str, Any]:
    return dict(
        namespace=NAMESPACE,
        identity=IDENTITY,
        api_client=client,
        on_stopped_leading=lambda: case.record("stopped"),
        **TIMING,
        **extra,
    )


def watch_elector(case: Case, elector: LeaderElector) -> None:
    case.leads = lambda: elector.is_leader
    case.ready = elector.ready
    case.healthy = elector.healthy


def form_with(case: Case, client: Any) -> None:
    elector = LeaderElector(
        case.lease, **elector_options(case, client, on_started_leading=case.shape_function())
    )
    watch_elector(case, elector)
    with elector:
        case.body()


def form_run(case: Case, client: Any) -> None:
    elector = LeaderElector(
        case.lease, **elector_options(case, client, on_started_leading=case.shape_function())
    )
    watch_elector(case, elector)
    case.stop_form = elector.stop
    elector.run()


def form_start_stop(case: Case, client: Any) -> None:
    elector = LeaderElector(
        case.lease, **elector_options(case, client, on_started_leading=case.shape_function())
    )
    watch_elector(case, elector)
    elector.start()
    try:
        case.body()
    finally:
        elector.stop()


def run_async_with(case: Case, make: Callable[[], Any]) -> None:
    """``async with make(): case.async_body()`` in a loop of its own (``make`` is called in
    it); the tasks still pending once the form ended are observed as ``tasks_left``."""

    async def main() -> None:
        async with make():
            await case.async_body()
        await asyncio.sleep(0)
        left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        case.observed["tasks_left"] = [repr(t) for t in left]

    asyncio.run(main())


def form_async_with(case: Case, client: Any) -> None:
    def make() -> AsyncLeaderElector:
        elector = AsyncLeaderElector(
            case.lease, **elector_options(case, client, on_started_leading=case.shape_function())
        )
        case.leads = lambda: elector.is_leader
        case.ready = elector.ready
        case.healthy = elector.healthy
        return elector

    run_async_with(case, make)


def make_jobs(case: Case, client: Any) -> Jobs:
    jobs = Jobs(
        case.lease,
        namespace=NAMESPACE,
        identity=IDENTITY,
        api_client=client,
        election=ElectionTiming(**TIMING),
        restart_delay=30,
    )
    jobs.singleton(mode=Mode.LEADER, name="work")(case.shape_function())
    case.leads = lambda: jobs.is_leader
    case.ready = jobs.ready
    case.healthy = jobs.healthy
    return jobs


def form_jobs_run(case: Case, client: Any) -> None:
    jobs = make_jobs(case, client)
    case.stop_form = jobs.stop
    jobs.run()


def form_with_jobs(case: Case, client: Any) -> None:
    with make_jobs(case, client):
        case.body()


def form_async_with_jobs(case: Case, client: Any) -> None:
    run_async_with(case, lambda: make_jobs(case, client))


def form_wrap(case: Case, client: Any) -> None:
    scheduler = BackgroundScheduler(timezone="UTC")
    elector = LeaderElector(
        case.lease, **elector_options(case, client, on_started_leading=case.shape_function())
    )
    wrap(scheduler, elector)
    watch_elector(case, elector)
    try:
        with elector:
            case.body()
    finally:
        scheduler.shutdown(wait=True)


FORMS: dict[str, Callable[[Case, Any], None]] = {
    "with": form_with,
    "run": form_run,
    "start-stop": form_start_stop,
    "async-with": form_async_with,
    "jobs-run": form_jobs_run,
    "with-jobs": form_with_jobs,
    "async-with-jobs": form_async_with_jobs,
    "wrap": form_wrap,
}


# -- endings -----------------------------------------------------------------------------------


def wait_until(predicate: Callable[[], bool], timeout: float) -> bool:
    """Ask ``predicate`` every 20 ms until it holds or ``timeout`` passes. It asks what the forms
    expose and no one event covers: ``is_leader`` (Jobs create their elector inside ``run()``,
    too late for a listener), the case's records, the threads still alive."""
    try:
        return poll("", predicate, timeout, every=0.02)
    except AssertionError:
        return False


def control(case: Case, done: threading.Event) -> None:
    """The case's control thread: READY, wait for GO, end the case as its ending says."""
    if not wait_until(lambda: case.leads() and case.started.is_set(), WAIT):
        case.observed["never_led"] = True
        say(f"READY {case.id}")  # the parent still answers; the result says why
        sys.stdin.readline()
        case.stop_form()
        return
    case.observed["gauge_while_leading"] = gauge(case.lease)
    say(f"READY {case.id}")
    sys.stdin.readline()
    case.observed["go_at"] = time.monotonic()
    ending = case.ending
    if ending == "sigterm-main":
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGTERM)
    elif ending == "sigterm-thread":
        signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
    elif ending == "stop":
        case.stop_form()
    elif ending == "exception":
        case.raise_in_body = True
        case.end_body()
    elif ending in ("lost", "unreachable"):
        stepped_down = wait_until(lambda: not case.leads(), WAIT)
        case.observed["stepped_down_after"] = time.monotonic() - case.observed["go_at"]
        case.observed["stepped_down"] = stepped_down
        if ending == "unreachable":
            case.observed["ready_while_cut"] = case.ready()
            case.observed["healthy_while_cut"] = case.healthy()
        case.stop_form()
    done.wait()


def gauge(lease: str) -> float | None:
    return REGISTRY.get_sample_value("k8slease_is_leader", {"lease": lease})


def app_handler(case: Case) -> Callable[[int, Any], None]:
    def handle(signum: int, frame: Any) -> None:
        case.record("app-handler")
        case.end_body()

    return handle


def run_case(spec: dict[str, str], client: Any, *, default_signals: bool) -> dict[str, Any]:
    case = Case(spec)
    began = time.monotonic()
    sys.stderr.write(f"=== CASE {case.id}\n")  # the parent splits the log per case
    sys.stderr.flush()
    if not default_signals:
        signal.signal(signal.SIGTERM, app_handler(case))
    done = threading.Event()
    controller = threading.Thread(
        target=control, args=(case, done), name="contract-control", daemon=True
    )
    controller.start()
    raised = None
    try:
        FORMS[case.form](case, client)
    except RuntimeError as exc:
        raised = str(exc)
    ended_at = time.monotonic()
    if case.ending.startswith("sigterm") and not default_signals:
        # k8slease hands the signal on to the application's handler after its release: let
        # that arrive before this case's handler is replaced
        wait_until(lambda: "app-handler" in case.calls, 3.0)
    done.set()
    controller.join(WAIT)
    others = lambda: [t.name for t in threading.enumerate() if t.name not in OWN_THREADS]  # noqa: E731
    wait_until(lambda: not others(), 3.0)
    go_at = case.observed.get("go_at")
    return {
        "id": case.id,
        "calls": case.calls,
        "raised": raised,
        "ended_after": None if go_at is None else ended_at - go_at,
        "threads_left": others(),
        "is_leader": case.leads(),
        "ready": case.ready(),
        "healthy": case.healthy(),
        "gauge": gauge(case.lease),
        "case_seconds": time.monotonic() - began,
        "lead_seconds": case.observed.pop("go_at", began) - began,
        **case.observed,
    }


def main() -> None:
    args = sys.argv[1:]
    default_signals = "--default-signals" in args
    args = [a for a in args if a != "--default-signals"]
    kubeconfig, cases = args[0], json.loads(args[1])
    # k8slease's INFO lines (leader.started / leader.stopped and why, lock decisions) in the
    # case's log that a failure prints: a case that failed under load (a term lost and won
    # again before GO, 2026-12-03) otherwise left only WARNING lines, or none
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(message)s")
    logging.getLogger("k8slease").setLevel(logging.INFO)
    client = default_api_client(kubeconfig=kubeconfig)
    for spec in cases:
        result = run_case(spec, client, default_signals=default_signals)
        say("RESULT " + json.dumps(result))
        if not default_signals:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


if __name__ == "__main__":
    main()

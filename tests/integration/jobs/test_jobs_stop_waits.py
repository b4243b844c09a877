"""Hole 5 of issue 15 (SIGTERM during a run): ``Jobs.run()`` returns only after the run it was
stopped in the middle of has ended (and its lock was released with its run record); ``async
with jobs``, whose scheduler cancels the coroutine runs in progress, ends only once their
cancellation has been handled (the lock released with the run record)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
from typing import Any

from k8slease import JobContext, Jobs
from k8slease.lease.jobrecord import job_state_from_lease
from k8slease.lease.transport import LeaseTransport
from k8slease.testing.server import APIServer


def test_run_returns_only_after_the_job_it_stopped_in_has_ended(
    k8s_embedded_apiserver: APIServer,
) -> None:
    server = k8s_embedded_apiserver
    jobs = Jobs("g", namespace="default", identity="r0", api_client=server.api_client())
    started, release = threading.Event(), threading.Event()
    order: list[str] = []

    @jobs.interval(seconds=1, name="slow")
    def slow(ctx: JobContext) -> None:
        started.set()
        release.wait(30)
        order.append("job ended")

    def main() -> None:
        jobs.run(handle_signals=False)
        order.append("run returned")

    runner = threading.Thread(target=main)
    runner.start()
    assert started.wait(10), "the job never started"
    stopper = threading.Thread(target=jobs.stop)  # what the SIGTERM handler does
    stopper.start()
    runner.join(0.5)
    returned_early = not runner.is_alive()
    release.set()
    runner.join(10)
    stopper.join(10)
    assert not returned_early, "run() returned while its job was still running"
    assert order == ["job ended", "run returned"]
    lease: dict[str, Any] = LeaseTransport(server.api_client(), "default").get("g.slow")
    last = job_state_from_lease(lease).last_run
    assert last is not None and last.outcome == "succeeded"


RUN_THEN_SIGTERM_ON_ANOTHER_THREAD = """
import signal, sys, threading
from k8slease import Jobs
from k8slease.kube.apiclient import default_api_client

jobs = Jobs("g", namespace="default", identity="r0",
            api_client=default_api_client(kubeconfig=sys.argv[1]))

@jobs.interval(seconds=1, name="tick")
def tick(ctx):
    pass

def deliver():
    jobs_started.wait(10)
    # the kernel may hand a process-directed SIGTERM to any thread that does not block it
    signal.pthread_kill(threading.get_ident(), signal.SIGTERM)

jobs_started = threading.Event()
threading.Thread(target=deliver).start()
jobs.start()
print("started", flush=True)
jobs_started.set()
jobs.run()
"""


def test_run_handles_a_sigterm_that_landed_on_another_thread(
    k8s_embedded_apiserver: APIServer,
) -> None:
    """Found with the chaos suite (a replica SIGTERMed in a rolling restart kept running): Python
    runs signal handlers in the main thread only, and a main thread blocked in an untimed wait
    is not woken by a signal another thread received; ``Jobs.run()`` must still stop."""
    proc = subprocess.Popen(
        [sys.executable, "-c", RUN_THEN_SIGTERM_ON_ANOTHER_THREAD,
         str(k8s_embedded_apiserver.kubeconfig)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=dict(os.environ),
    )  # fmt: skip
    try:
        code = proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        out = proc.communicate()[0].decode(errors="replace")
        raise AssertionError(f"Jobs.run() ignored the SIGTERM:\n{out[-2000:]}") from None
    out = proc.communicate()[0].decode(errors="replace")
    assert "started" in out, out
    assert code == -signal.SIGTERM, (code, out[-2000:])


ASYNC_WITH_THEN_SIGTERM_MID_RUN = """
import asyncio, sys
from k8slease import Jobs
from k8slease.kube.apiclient import default_api_client

jobs = Jobs("ag", namespace="default", identity="r0",
            api_client=default_api_client(kubeconfig=sys.argv[1]))

@jobs.interval(seconds=1, name="slow", lock_at_most_for=60)
async def slow(ctx):
    print("run", flush=True)
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        await asyncio.sleep(0.3)  # the run's own cleanup, on the loop
        print("cleaned up", flush=True)
        raise

async def main():
    async with jobs:
        await asyncio.Event().wait()

asyncio.run(main())
"""


def test_a_sigterm_in_the_middle_of_an_async_run_ends_the_process_after_its_release(
    k8s_embedded_apiserver: APIServer,
) -> None:
    """``async with jobs`` and SIGTERM (default action) while a coroutine ONCE_PER_TICK run is
    in progress: the scheduler's shutdown cancels the run, and the process ends only once the
    run's cancellation has been handled, its lock released with its run record (the job Lease
    was left held for ``lock_at_most_for``, without a record)."""
    server = k8s_embedded_apiserver
    proc = subprocess.Popen(
        [sys.executable, "-c", ASYNC_WITH_THEN_SIGTERM_MID_RUN, str(server.kubeconfig)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=dict(os.environ), text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.strip() == "run", first + proc.stdout.read()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = proc.communicate()[0]
    assert code == -signal.SIGTERM, (code, out[-2000:])
    assert "cleaned up" in out, out[-2000:]
    lease: dict[str, Any] = LeaseTransport(server.api_client(), "default").get("ag.slow")
    assert not lease["spec"].get("holderIdentity"), lease["spec"]
    last = job_state_from_lease(lease).last_run
    assert last is not None and (last.outcome, last.error) == ("failed", "cancelled"), last


def test_leaving_async_with_in_the_middle_of_a_run_returns_after_its_release(
    k8s_embedded_apiserver: APIServer,
) -> None:
    """No signal: ``async with jobs`` left while a coroutine run is in progress returns only
    once the cancelled run has released its lock with its run record."""
    server = k8s_embedded_apiserver
    jobs = Jobs("ag", namespace="default", identity="r0", api_client=server.api_client())
    order: list[str] = []

    async def main() -> dict[str, Any]:
        started = asyncio.Event()

        @jobs.interval(seconds=1, name="slow", lock_at_most_for=60)
        async def slow(ctx: JobContext) -> None:
            started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                await asyncio.sleep(0.3)  # the run's own cleanup, on the loop
                order.append("cleaned up")
                raise

        async with jobs:
            await asyncio.wait_for(started.wait(), 10)
        order.append("left")
        transport = LeaseTransport(server.api_client(), "default")
        lease: dict[str, Any] = await asyncio.to_thread(transport.get, "ag.slow")
        return lease

    lease = asyncio.run(main())
    assert order == ["cleaned up", "left"]
    assert not lease["spec"].get("holderIdentity"), lease["spec"]
    last = job_state_from_lease(lease).last_run
    assert last is not None and (last.outcome, last.error) == ("failed", "cancelled"), last

"""Hole 5 of issue 15 (SIGTERM during a run): ``Jobs.run()`` returns only after the run it was
stopped in the middle of has ended (and its lock was released with its run record)."""

from __future__ import annotations

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

"""A returning ``on_started_leading`` (issue 21).

* SIGTERM after the callback returned must still release the Lease, in the ``run()`` and
  ``with`` forms: the finished work thread's ident, reused by the signal's stop thread, made
  that ``stop()`` think it ran inside the elector and only ask, and the process ended holding
  the Lease (candidates waited the whole lease on every rolling update).
* ``release_on_return=True``: once the work returned, ``run()`` returns after the release,
  as client-go's ``Run`` does, instead of leading again every retry interval forever.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest
from kubernetes import client

from k8slease import LeaderElector
from k8slease.lease.record import record_from_lease
from k8slease.lease.transport import LeaseTransport
from k8slease.testing.server import APIServer
from tests.integration.election.elector_helpers import ChildOutput
from tests.support.threads import returns_within

pytestmark = pytest.mark.slow

TIMING = dict(lease_duration=4, renew_interval=1, renew_deadline=3, retry_interval=1)

CHILD = textwrap.dedent(
    """
    import queue, sys, threading
    from k8slease import LeaderElector
    from k8slease.kube.apiclient import default_api_client

    kubeconfig, form, name = sys.argv[1:]
    client = default_api_client(kubeconfig=kubeconfig)
    options = dict(namespace="default", identity="child", api_client=client,
                   lease_duration=4, renew_interval=1, renew_deadline=3, retry_interval=1)
    work_threads = queue.Queue()

    def started():
        work_threads.put(threading.current_thread())
        print("leading", flush=True)   # returns at once: the term goes on

    def report_the_work_thread_ended():
        work_threads.get().join()
        print("work thread ended", flush=True)
        threading.Event().wait()  # stays alive: only the work thread's ident is free for reuse

    threading.Thread(target=report_the_work_thread_ended, daemon=True).start()
    if form == "with":
        with LeaderElector(name, on_started_leading=started, **options) as elector:
            threading.Event().wait()  # until SIGTERM, whose default action ends the process
    else:
        LeaderElector(name, on_started_leading=started, **options).run()
    sys.exit("the elector returned before the SIGTERM ended the process")
    """
)


def holder(api_client: client.ApiClient, name: str) -> str:
    lease = LeaseTransport(api_client, "default", request_timeout=5).get(name)
    return record_from_lease(lease).holder


@pytest.mark.parametrize("form", ["with", "run"])
def test_sigterm_releases_after_on_started_leading_returned(
    k8s_embedded_apiserver: APIServer, form: str
) -> None:
    server = k8s_embedded_apiserver
    name = f"returned-{form}"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(server.kubeconfig), form, name],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    output = ChildOutput(child)
    try:
        output.wait_line("leading", 30)
        # the bug needs the finished work thread's ident free for the signal's stop thread
        output.wait_line("work thread ended", 10)
        child.send_signal(signal.SIGTERM)
        stderr = output.end(timeout=10)
        assert child.returncode == -signal.SIGTERM, stderr
        assert holder(server.api_client(), name) == "", "the Lease was released before the end"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_run_returns_after_the_release_when_the_work_returns(
    k8s_api_client: client.ApiClient,
) -> None:
    calls: list[str] = []
    elector = LeaderElector(
        "work-returns",
        namespace="default",
        identity="solo",
        api_client=k8s_api_client,
        release_on_return=True,
        handle_signals=False,
        on_started_leading=lambda: calls.append("started"),
        on_stopped_leading=lambda: calls.append("stopped"),
        **TIMING,  # type: ignore[arg-type]
    )
    assert returns_within(elector.run, 10), "run() returned once the work had returned"
    assert calls == ["started", "stopped"], "one term, not a new one every retry interval"
    assert holder(k8s_api_client, "work-returns") == ""
    assert elector.wait(0)

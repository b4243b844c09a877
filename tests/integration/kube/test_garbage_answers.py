"""A 200 whose body is not the Lease asked for (JSON nested past the recursion limit, a Lease
without usable metadata, another Lease, a body larger than the bound of one Lease) is an
unavailable API server: the elector warns naming what was wrong
(``request.failed``, not ``elector.request_crashed`` with a traceback) and never leads on such an
answer to its create; ``Jobs`` starts and skips the tick as api-unreachable instead of raising.

The answers come from a proxy in front of the embedded server (tests/support/garbage_proxy.py):
the Lease's writes (and for Jobs its reads) are answered with garbage and never reach the
server, everything else (the informer's list and watch) is forwarded."""

from __future__ import annotations

import json
import logging
import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from k8slease import Mode
from k8slease.kube.bodyread import MAX_OBJECT_BYTES
from tests.integration.election.elector_helpers import stop_and_close, tracked_elector
from tests.support.factories import make_jobs
from tests.support.garbage_proxy import GarbageProxy
from tests.support.timing import OPERATOR_FAST

#: a Lease as the API server sends one, but not the one asked for: held by the elector ("a")
#: and the claimant of the Jobs test ("r1"), renewed in the future (taken for a success, before)
ANOTHER_LEASE = {
    "kind": "Lease",
    "apiVersion": "coordination.k8s.io/v1",
    "metadata": {"name": "someone-else", "namespace": "default", "resourceVersion": "7"},
    "spec": {
        "holderIdentity": "a",
        "leaseDurationSeconds": 15,
        "acquireTime": "2099-01-01T00:00:00.000000Z",
        "renewTime": "2099-01-01T00:00:00.000000Z",
    },
}

#: garbage 200 bodies and what the warning names ({lease}: the Lease asked for)
GARBAGE = {
    "deep": (b"[" * 100_000, "the API server answered something that is not JSON"),
    "metadata-a-string": (
        json.dumps({"kind": "Lease", "metadata": "x", "spec": {}}).encode(),
        "the API server answered a Lease whose metadata is 'x', not a mapping",
    ),
    "empty-metadata": (
        json.dumps({"kind": "Lease", "metadata": {}}).encode(),
        "the API server answered a Lease without metadata.resourceVersion",
    ),
    "no-kind": (
        json.dumps({"metadata": {"name": "demo"}}).encode(),
        "the API server answered a Lease without metadata.resourceVersion",
    ),
    "another-lease": (
        json.dumps(ANOTHER_LEASE).encode(),
        "the API server answered the Lease 'default/someone-else' instead of 'default/{lease}'",
    ),
    "over-the-bound": (
        b" " * (MAX_OBJECT_BYTES + 1),
        f"the API server answered {MAX_OBJECT_BYTES + 1} bytes, more than the 4 MiB k8slease "
        "reads for one Lease; not read",
    ),
}


def _answer_with(
    proxy: GarbageProxy, body: bytes, lease: str, methods: tuple[str, ...] = ("POST", "PUT")
) -> None:
    """Answer ``methods`` on the Lease ``lease`` (a POST: on the collection) with ``body``."""

    def rule(method: str, path: str) -> tuple[int, bytes] | None:
        if "watch=true" in path or method not in methods:
            return None
        if path.endswith("/leases") or f"/leases/{lease}" in path:
            return 200, body
        return None

    proxy.rule = rule


def _events(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str, dict[str, Any]]]:
    return [
        (r.levelno, getattr(r, "k8slease_event", ""), getattr(r, "k8slease_fields", {}))
        for r in caplog.records
    ]


@pytest.mark.parametrize(("body", "named"), GARBAGE.values(), ids=GARBAGE.keys())
def test_an_elector_answered_garbage_warns_and_does_not_lead(
    proxy: GarbageProxy, caplog: pytest.LogCaptureFixture, body: bytes, named: str
) -> None:
    _answer_with(proxy, body, "demo")
    led = threading.Event()
    things: list[Any] = []
    elector = tracked_elector(
        proxy,
        things,
        "demo",
        "a",
        timing=OPERATOR_FAST,
        handle_signals=False,
        on_started_leading=led.set,
    )
    with caplog.at_level(logging.INFO, logger="k8slease"):
        elector.start()
        try:
            # two creates answered: the first answer was judged before the second was sent
            assert proxy.wait_answered(2, 30)
            assert not elector.is_leader
        finally:
            stop_and_close(things, stop_timeout=5)
    assert not led.is_set()
    events = _events(caplog)
    assert not [e for e in events if "crashed" in e[1]]
    failed = [f for level, event, f in events if event == "request.failed"]
    assert failed, events
    assert failed[0]["error"] == "create: " + named.format(lease="demo")
    assert failed[0]["reason"] == "unavailable"


@pytest.mark.parametrize(("body", "named"), GARBAGE.values(), ids=GARBAGE.keys())
def test_jobs_answered_garbage_start_and_skip_the_tick_as_api_unreachable(
    proxy: GarbageProxy, caplog: pytest.LogCaptureFixture, body: bytes, named: str
) -> None:
    # its read too: the catch-up read of Jobs.start
    _answer_with(proxy, body, "billing.invoices", ("GET", "POST", "PUT"))
    ran = threading.Event()
    jobs = make_jobs(
        "billing", proxy.api_client(), identity="r1", handle_signals=False, journal=None
    )
    jobs.cron("0 0 1 1 *", name="invoices", mode=Mode.ONCE_PER_TICK)(lambda ctx: ran.set())
    with caplog.at_level(logging.INFO, logger="k8slease"):
        jobs.start()
        try:
            assert jobs.fire("invoices", datetime(2026, 1, 1, tzinfo=UTC)) is None
        finally:
            jobs.stop()
    assert not ran.is_set()
    assert proxy.answered, "the claim never reached the proxy"
    events = _events(caplog)
    assert not [e for e in events if "crashed" in e[1]]
    named = named.format(lease="billing.invoices")
    catch_up = [f["error"] for _, event, f in events if event == "jobs.catch_up_unavailable"]
    assert catch_up == [f"get: {named}"]
    unreachable = [f["error"] for _, event, f in events if event == "job.api_unreachable"]
    # the claim reads first (get) when the informer has not synced yet, else it creates
    assert unreachable in ([f"get: {named}"], [f"create: {named}"])

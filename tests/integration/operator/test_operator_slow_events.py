"""The operator's Events (``LeaderElected``, ``RunMissing``, ...) under a slow API server (issue
22): queued, so the write loop does not wait on them, and each post allowed what the default
election timings tolerate, not its ``request_timeout``. The latency is real time on the embedded
server; a short ``request_timeout`` stands in for the 10 s one."""

from __future__ import annotations

import time

import pytest

from k8slease.operator.groups import PostEvent
from k8slease.operator.history import Notice
from k8slease.operator.settings import OperatorConfig
from k8slease.operator.writeloop import OperatorRuntime
from k8slease.testing.server import APIServer
from tests.support.polling import poll

TIMEOUT = 0.5  # the operator's request_timeout here
LATENCY = 1.5  # every Event create: above request_timeout, far below what the timings tolerate


@pytest.mark.embedded_only  # faults
@pytest.mark.timeout(60)
def test_an_operator_event_slower_than_request_timeout_is_posted_without_holding_the_loop(
    k8s_embedded_apiserver: APIServer,
) -> None:
    server = k8s_embedded_apiserver
    runtime = OperatorRuntime(
        OperatorConfig(request_timeout=TIMEOUT), api_client=server.api_client()
    )
    server.faults.add("create", "events", latency=LATENCY)
    action = PostEvent(
        key=("default", "billing"),
        involved={
            "apiVersion": "k8slease.io/v1alpha1",
            "kind": "ScheduledJobGroup",
            "name": "billing",
            "uid": "u-1",
        },
        notice=Notice("Normal", "LeaderElected", "replica-0 became leader"),
    )
    began = time.monotonic()
    runtime._event(action)
    assert time.monotonic() - began < TIMEOUT, "the write loop waited on the Event"
    (event,) = poll("Event created", lambda: server.store.objects("/events", "default"),
                    LATENCY + 10)  # fmt: skip
    assert event["reason"] == "LeaderElected"
    recorder = runtime._recorders["default"]
    poll("the operator learning the Event was created", lambda: not recorder.pending(), 10)
    assert recorder.posted == 1 and recorder.refused == recorder.given_up == 0

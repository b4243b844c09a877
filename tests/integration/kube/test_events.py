"""Events that replicas post reach the API server intact, also at a whole second.

A real API server parses ``eventTime`` as MicroTime (exactly six fractional digits); the typed
client would render a whole-second time without its fraction and the Event would be refused.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from k8slease.kube.events import EventRecorder
from tests.support.fakeclock import FakeClock


def test_an_event_at_a_whole_second_is_accepted_with_its_microtime(
    k8s_api_client: client.ApiClient, k8s_namespace: str
) -> None:
    clock = FakeClock(wall=datetime(2026, 11, 30, 2, 0, tzinfo=UTC))
    recorder = EventRecorder(k8s_api_client, k8s_namespace, identity="pod-1", clock=clock)
    lease: dict[str, Any] = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "billing.invoices", "uid": "u-1"},
    }
    assert recorder.post(lease, reason="JobFailed", message="boom", type_="Warning")
    raw = client.CoreV1Api(k8s_api_client).list_namespaced_event(
        k8s_namespace, _preload_content=False
    )
    (event,) = json.loads(raw.data)["items"]
    assert event["eventTime"] == "2026-11-30T02:00:00.000000Z"
    assert event["reason"] == "JobFailed" and event["type"] == "Warning"
    assert event["involvedObject"]["name"] == "billing.invoices"
    assert event["reportingInstance"] == "pod-1"

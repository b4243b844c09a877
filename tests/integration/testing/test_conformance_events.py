"""Events, as kube-apiserver serves them: core/v1 and events.k8s.io/v1 are one resource in two
views, each API listing what was written through the other (with a field selector too).

(Part of the conformance tests: helpers in conformance.py, fixtures in conftest.py.)
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from kubernetes import client

from tests.integration.testing.conformance import raw

pytestmark = pytest.mark.conformance


def test_core_and_events_k8s_io_events(
    k8s_api_client: client.ApiClient, k8s_namespace: str
) -> None:
    core = client.CoreV1Api(k8s_api_client)
    involved = client.V1ObjectReference(kind="Lease", name="x", namespace=k8s_namespace)
    created = core.create_namespaced_event(
        k8s_namespace,
        client.CoreV1Event(
            metadata=client.V1ObjectMeta(generate_name="ev-"), involved_object=involved,
            reason="Elected", message="a won", type="Normal",
        ),
    )  # fmt: skip
    assert created.metadata.name.startswith("ev-")
    found = core.list_namespaced_event(k8s_namespace, field_selector="reason=Elected")
    assert [e.metadata.name for e in found.items] == [created.metadata.name]
    events = client.EventsV1Api(k8s_api_client)
    now = datetime.now(UTC)
    modern = events.create_namespaced_event(
        k8s_namespace,
        client.EventsV1Event(
            metadata=client.V1ObjectMeta(name="modern"), event_time=now, action="Elect",
            reason="Elected", note="b won", type="Normal", reporting_controller="k8slease.io/test",
            reporting_instance="test", regarding=involved,
        ),
    )  # fmt: skip
    assert modern.note == "b won"
    # One resource, two views: each API lists the events written through the other.
    legacy = {e.metadata.name: e for e in core.list_namespaced_event(k8s_namespace).items}
    assert legacy["modern"].message == "b won"
    assert legacy["modern"].involved_object.name == "x"
    assert legacy["modern"].reporting_component == "k8slease.io/test"
    # (raw: a legacy event's eventTime is null, which the client's model refuses)
    status, listed = raw(
        k8s_api_client, "GET", f"/apis/events.k8s.io/v1/namespaces/{k8s_namespace}/events"
    )
    assert status == 200
    viewed = {e["metadata"]["name"]: e for e in listed["items"]}
    assert viewed[created.metadata.name]["note"] == "a won"
    assert viewed[created.metadata.name]["regarding"]["kind"] == "Lease"

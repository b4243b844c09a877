"""What the server accepts in a Lease, as kube-apiserver judges it: names, a body that does not
match its URL, unknown fields (dropped), the spec's bounds (422) and MicroTime formats (400
for anything but microseconds), and the client's datetimes round-tripped.

(Part of the conformance tests: helpers in conformance.py, fixtures in conftest.py.)
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client

from tests.integration.testing.conformance import lease_body, raw, status_of

pytestmark = pytest.mark.conformance


def test_invalid_names_and_mismatched_urls(
    k8s_api_client: client.ApiClient, coord: client.CoordinationV1Api, k8s_namespace: str
) -> None:
    with pytest.raises(client.ApiException) as info:
        coord.create_namespaced_lease(k8s_namespace, lease_body("Not_A_Name"))
    body = status_of(info.value)
    assert (info.value.status, body["reason"]) == (422, "Invalid")
    assert body["details"]["causes"][0]["field"] == "metadata.name"
    coord.create_namespaced_lease(k8s_namespace, lease_body("named"))
    path = f"/apis/coordination.k8s.io/v1/namespaces/{k8s_namespace}/leases/named"
    status, body = raw(k8s_api_client, "PUT", path, lease_body("other"))
    assert (status, body["reason"]) == (400, "BadRequest")
    wrong_ns = lease_body("named")
    wrong_ns["metadata"]["namespace"] = "default"
    status, body = raw(k8s_api_client, "PUT", path, wrong_ns)
    assert (status, body["reason"]) == (400, "BadRequest")


def test_unknown_lease_fields_are_dropped(
    k8s_api_client: client.ApiClient, k8s_namespace: str
) -> None:
    body = lease_body("extra", bogus=1)
    body["status"] = {"x": 1}
    path = f"/apis/coordination.k8s.io/v1/namespaces/{k8s_namespace}/leases"
    status, stored = raw(k8s_api_client, "POST", path, body)
    assert status == 201
    assert "status" not in stored and "bogus" not in stored["spec"]


@pytest.mark.parametrize(
    ("spec", "field"),
    [({"leaseDurationSeconds": 0}, "spec.leaseDurationSeconds"),
     ({"leaseTransitions": -1}, "spec.leaseTransitions")],
)  # fmt: skip
def test_lease_spec_validation(
    k8s_api_client: client.ApiClient, k8s_namespace: str, spec: dict[str, Any], field: str
) -> None:
    status, body = raw(
        k8s_api_client, "POST", f"/apis/coordination.k8s.io/v1/namespaces/{k8s_namespace}/leases",
        lease_body("bad", **spec),
    )  # fmt: skip
    assert (status, body["reason"]) == (422, "Invalid")
    assert body["details"]["kind"] == "Lease"
    assert [c["field"] for c in body["details"]["causes"]] == [field]


def test_lease_micro_time_formats(k8s_api_client: client.ApiClient, k8s_namespace: str) -> None:
    path = f"/apis/coordination.k8s.io/v1/namespaces/{k8s_namespace}/leases"
    status, body = raw(
        k8s_api_client, "POST", path,
        lease_body(
            "t1",
            renewTime="2026-11-30T05:32:13.123456Z",
            acquireTime="2026-11-30T07:32:13.000001+02:00",
        ),
    )  # fmt: skip
    assert status == 201
    assert body["spec"]["renewTime"] == "2026-11-30T05:32:13.123456Z"
    assert body["spec"]["acquireTime"] == "2026-11-30T05:32:13.000001Z"
    for garbage in ("yesterday", "2026-11-30T05:32:13Z", "2026-11-30T05:32:13.123456789Z"):
        status, body = raw(k8s_api_client, "POST", path, lease_body("t2", renewTime=garbage))
        assert (status, body["reason"]) == (400, "BadRequest"), garbage
        assert garbage in body["message"]


def test_client_datetimes_round_trip(coord: client.CoordinationV1Api, k8s_namespace: str) -> None:
    moment = datetime(2026, 11, 30, 5, 32, 13, 123456, tzinfo=UTC)
    body = lease_body("dt")
    body["spec"]["renewTime"] = moment
    lease = coord.create_namespaced_lease(k8s_namespace, client.V1Lease.from_dict(body))
    assert lease.spec.renew_time == moment

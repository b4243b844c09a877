"""Differential sequences of the API server's other behaviour the embedded server imitates.

Tables (Leases, Widgets, a Namespace, CRDs, Events), a custom resource's status subresource and
schema (defaults, validation, pruning), dry runs, field validation, Namespaces and Events, and
the CustomResourceDefinitions the server refuses. Each is a function of a
:class:`~tests.realserver.differential.Session` in a fresh namespace (``s.ns``);
``sequences.py`` lists them.
"""

from __future__ import annotations

from tests.realserver.differential import Session
from tests.support.bodies import MERGE, STRATEGIC, TABLE
from tests.support.sequence_requests import lease, leases, widget, widget_crd, widgets


def tables(s: Session) -> None:
    s.request("create-lease", "POST", leases(s), lease("tab", holderIdentity="me"))
    s.request("create-widget", "POST", widgets(s), widget("tw", color="blue"))
    s.request(
        "status-widget",
        "PATCH",
        widgets(s, "tw", "status"),
        {"status": {"phase": "Up"}},
        content_type=MERGE,
    )
    s.request("lease-table", "GET", leases(s), accept=TABLE)
    s.request("lease-table-one", "GET", leases(s, "tab"), accept=TABLE)
    s.request(
        "lease-table-object", "GET", leases(s), accept=TABLE, query={"includeObject": "Object"}
    )
    s.request("lease-table-none", "GET", leases(s), accept=TABLE, query={"includeObject": "None"})
    s.request("widget-table", "GET", widgets(s), accept=TABLE)
    s.request("widget-table-one", "GET", widgets(s, "tw"), accept=TABLE)
    s.request("namespace-table", "GET", f"/api/v1/namespaces/{s.ns}", accept=TABLE)
    s.request("table-fallback-json", "GET", leases(s), accept=f"{TABLE},application/json")


def status_subresource(s: Session) -> None:
    s.request("create-with-status", "POST", widgets(s), {**widget("st"), "status": {"phase": "X"}})
    _, obj = s.request("get", "GET", widgets(s, "st"))
    changed = {**obj, "spec": {**obj["spec"], "size": 4}, "status": {"phase": "Ignored"}}
    s.request("update-main-ignores-status", "PUT", widgets(s, "st"), changed)
    s.request(
        "patch-status",
        "PATCH",
        widgets(s, "st", "status"),
        {"status": {"phase": "Ready"}, "spec": {"size": 9}},
        content_type=MERGE,
    )
    _, current = s.request("get-status", "GET", widgets(s, "st", "status"))
    s.request(
        "put-status", "PUT", widgets(s, "st", "status"), {**current, "status": {"phase": "Done"}}
    )
    s.request(
        "patch-main-labels",
        "PATCH",
        widgets(s, "st"),
        {"metadata": {"labels": {"l": "1"}}, "status": {"phase": "No"}},
        content_type=MERGE,
    )
    s.request(
        "strategic-on-cr", "PATCH", widgets(s, "st"), {"spec": {"size": 2}}, content_type=STRATEGIC
    )
    s.request("schema-too-big", "POST", widgets(s), widget("big", size=11))
    s.request(
        "schema-missing-required", "POST", widgets(s), {**widget("req"), "spec": {"color": "red"}}
    )
    s.request("schema-enum", "POST", widgets(s), widget("en", color="green"))
    s.request("schema-pattern", "POST", widgets(s), widget("pat", code="ABC"))
    s.request("schema-type", "POST", widgets(s), widget("typ", size="big"))
    s.request("schema-two-errors", "POST", widgets(s), widget("two", size=0, color="green"))
    s.request("pruned", "POST", widgets(s), widget("pr", unknown="x"))
    s.request(
        "status-of-missing",
        "PATCH",
        widgets(s, "nope", "status"),
        {"status": {"phase": "x"}},
        content_type=MERGE,
    )
    s.request("list", "GET", widgets(s))


def dry_run(s: Session) -> None:
    s.request("create-dry", "POST", leases(s), lease("dry"), query={"dryRun": "All"})
    s.request("get-after-dry-create", "GET", leases(s, "dry"))
    _, real = s.request("create", "POST", leases(s), lease("dry"))
    s.request(
        "update-dry",
        "PUT",
        leases(s, "dry"),
        {**real, "spec": {"holderIdentity": "dry"}},
        query={"dryRun": "All"},
    )
    s.request(
        "patch-dry",
        "PATCH",
        leases(s, "dry"),
        {"spec": {"holderIdentity": "p"}},
        content_type=MERGE,
        query={"dryRun": "All"},
    )
    s.request("delete-dry", "DELETE", leases(s, "dry"), query={"dryRun": "All"})
    s.request("get-after-dry-writes", "GET", leases(s, "dry"))
    s.request("dry-invalid-value", "POST", leases(s), lease("bad"), query={"dryRun": "Some"})
    s.request("dry-invalid-object", "POST", leases(s), lease("Bad_Name"), query={"dryRun": "All"})
    s.request("dry-widget", "POST", widgets(s), widget("dw"), query={"dryRun": "All"})


def field_validation(s: Session) -> None:
    typo = {**lease("v"), "spec": {"holderIdentity": "a", "holdr": "b"}}
    s.request("lease-strict", "POST", leases(s), typo, query={"fieldValidation": "Strict"})
    s.request(
        "lease-warn",
        "POST",
        leases(s),
        {**typo, "metadata": {"name": "w"}},
        query={"fieldValidation": "Warn"},
    )
    s.request(
        "lease-ignore",
        "POST",
        leases(s),
        {**typo, "metadata": {"name": "i"}},
        query={"fieldValidation": "Ignore"},
    )
    s.request("lease-default", "POST", leases(s), {**typo, "metadata": {"name": "d"}})
    s.request(
        "lease-invalid-value", "POST", leases(s), lease("x"), query={"fieldValidation": "Loud"}
    )
    s.request(
        "lease-duplicate-field-strict",
        "POST",
        leases(s),
        query={"fieldValidation": "Strict"},
        raw_body=b'{"apiVersion":"coordination.k8s.io/v1","kind":"Lease",'
        b'"metadata":{"name":"dup","name":"dup"},"spec":{}}',
    )
    s.request(
        "lease-unknown-metadata-strict",
        "POST",
        leases(s),
        {**lease("m"), "metadata": {"name": "m", "labelz": {}}},
        query={"fieldValidation": "Strict"},
    )
    s.request(
        "widget-strict",
        "POST",
        widgets(s),
        widget("ws", sise=1),
        query={"fieldValidation": "Strict"},
    )
    s.request(
        "widget-warn", "POST", widgets(s), widget("ww", sise=1), query={"fieldValidation": "Warn"}
    )
    s.request(
        "widget-strict-patch",
        "PATCH",
        widgets(s, "ww"),
        {"spec": {"colr": "x"}},
        content_type=MERGE,
        query={"fieldValidation": "Strict"},
    )


def namespaces_and_events(s: Session) -> None:
    s.request("get-namespace", "GET", f"/api/v1/namespaces/{s.ns}")
    s.request("get-missing-namespace", "GET", "/api/v1/namespaces/no-such-ns-y")
    s.request(
        "invalid-namespace-name",
        "POST",
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "Bad_NS"}},
    )
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "ev1"},
        "involvedObject": {"kind": "Lease", "name": "x", "namespace": s.ns},
        "reason": "Elected",
        "message": "a won",
        "type": "Normal",
        "source": {"component": "diff"},
        "firstTimestamp": "2024-01-02T03:04:05Z",
        "lastTimestamp": "2024-01-02T03:04:05Z",
        "count": 1,
    }
    s.request("create-event", "POST", f"/api/v1/namespaces/{s.ns}/events", event)
    s.request(
        "events-by-reason",
        "GET",
        f"/api/v1/namespaces/{s.ns}/events",
        query={"fieldSelector": "reason=Elected"},
    )
    s.request(
        "events-by-involved",
        "GET",
        f"/api/v1/namespaces/{s.ns}/events",
        query={"fieldSelector": "involvedObject.name=x,involvedObject.kind=Lease"},
    )
    s.request("events-v1-view", "GET", f"/apis/events.k8s.io/v1/namespaces/{s.ns}/events/ev1")
    s.request(
        "event-bad-type",
        "POST",
        f"/api/v1/namespaces/{s.ns}/events",
        {**event, "metadata": {"name": "ev2"}, "type": "Shouting"},
    )
    s.request(
        "event-no-involved",
        "POST",
        f"/api/v1/namespaces/{s.ns}/events",
        {**event, "metadata": {"name": "ev3"}, "involvedObject": {}},
    )


def definitions(s: Session) -> None:
    """CustomResourceDefinitions the server refuses, and the Tables of CRDs and Events."""
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    bad = widget_crd()
    bad["metadata"]["name"] = "wrong.diff.k8slease.io"
    s.request("crd-name-mismatch", "POST", crds, bad)
    no_storage = widget_crd()
    no_storage["metadata"]["name"] = "gadgets.diff.k8slease.io"
    no_storage["spec"]["names"] = {"plural": "gadgets", "kind": "Gadget"}
    no_storage["spec"]["versions"][0]["storage"] = False
    s.request("crd-no-storage-version", "POST", crds, no_storage)
    s.request("crd-table", "GET", f"{crds}/widgets.diff.k8slease.io", accept=TABLE)
    s.request(
        "event",
        "POST",
        f"/api/v1/namespaces/{s.ns}/events",
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "e1"},
            "involvedObject": {"kind": "Lease", "name": "x", "namespace": s.ns},
            "reason": "Elected",
            "message": "a won",
            "type": "Normal",
            "firstTimestamp": "2024-01-02T03:04:05Z",
            "lastTimestamp": "2024-01-02T03:04:05Z",
            "count": 1,
            "source": {"component": "diff"},
        },
    )
    s.request("events-table", "GET", f"/api/v1/namespaces/{s.ns}/events", accept=TABLE)

"""The request sequences the differential test replays on both servers.

Each is a function of a :class:`~tests.realserver.differential.Session` in a fresh namespace
(``s.ns``, the same name on both servers). A sequence may read values from an answer (a
resourceVersion, a uid) to build its next request, so it makes the same requests on both servers;
only what the servers answer is compared.
"""

from __future__ import annotations

from typing import Any

from tests.realserver.differential import Sequence, Session
from tests.support import bodies
from tests.support.bodies import JSON_PATCH, MERGE, STRATEGIC, TABLE, lease_body

COORD = "/apis/coordination.k8s.io/v1"
WIDGET_GROUP = "diff.k8slease.io"
T0 = "2024-01-02T03:04:05.000000Z"


def leases(s: Session, name: str = "") -> str:
    base = f"{COORD}/namespaces/{s.ns}/leases"
    return f"{base}/{name}" if name else base


def widgets(s: Session, name: str = "", sub: str = "") -> str:
    base = f"/apis/{WIDGET_GROUP}/v1/namespaces/{s.ns}/widgets"
    path = f"{base}/{name}" if name else base
    return f"{path}/{sub}" if sub else path


def lease(name: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return lease_body(name, labels or {"app": "diff"}, **spec)


def widget(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{WIDGET_GROUP}/v1",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"size": 3, **spec},
    }


def widget_crd() -> dict[str, Any]:
    """A namespaced CRD with a status subresource, printer columns, defaults and a schema."""
    return bodies.widget_crd(WIDGET_GROUP, color_default="red", list_kind=True)


def _rv(body: Any) -> str:
    return str(body["metadata"]["resourceVersion"])


# --- sequences ------------------------------------------------------------------------------


def lease_crud(s: Session) -> None:
    _, created = s.request("create", "POST", leases(s), lease("crud"))
    s.request("get", "GET", leases(s, "crud"))
    s.request("list", "GET", leases(s))
    updated = {**created, "spec": {**created["spec"], "holderIdentity": "b"}}
    s.request("update", "PUT", leases(s, "crud"), updated)
    s.request(
        "merge-patch",
        "PATCH",
        leases(s, "crud"),
        {"spec": {"leaseTransitions": 2}},
        content_type=MERGE,
    )
    s.request(
        "json-patch",
        "PATCH",
        leases(s, "crud"),
        [{"op": "replace", "path": "/spec/holderIdentity", "value": "c"}],
        content_type=JSON_PATCH,
    )
    s.request(
        "strategic-patch",
        "PATCH",
        leases(s, "crud"),
        {"metadata": {"labels": {"tier": "x"}}},
        content_type=STRATEGIC,
    )
    s.request(
        "micro-time",
        "PATCH",
        leases(s, "crud"),
        {"spec": {"acquireTime": T0, "renewTime": "2024-01-02T03:04:05.5Z"}},
        content_type=MERGE,
    )
    s.request(
        "unknown-lease-field-dropped",
        "PATCH",
        leases(s, "crud"),
        {"spec": {"notAField": 1}},
        content_type=MERGE,
    )
    s.request("delete", "DELETE", leases(s, "crud"))
    s.request("get-deleted", "GET", leases(s, "crud"))
    s.request("delete-missing", "DELETE", leases(s, "crud"))
    s.request(
        "generate-name", "POST", leases(s), {**lease(""), "metadata": {"generateName": "gen-"}}
    )


def conflicts(s: Session) -> None:
    _, first = s.request("create", "POST", leases(s), lease("c"))
    s.request("create-again", "POST", leases(s), lease("c"))
    s.request("update", "PUT", leases(s, "c"), {**first, "spec": {"holderIdentity": "b"}})
    s.request("update-stale", "PUT", leases(s, "c"), {**first, "spec": {"holderIdentity": "x"}})
    s.request(
        "patch-stale-rv",
        "PATCH",
        leases(s, "c"),
        {"metadata": {"resourceVersion": _rv(first)}, "spec": {"holderIdentity": "y"}},
        content_type=MERGE,
    )
    unconditional = {**first, "metadata": {"name": "c"}, "spec": {"holderIdentity": "z"}}
    s.request("update-unconditional", "PUT", leases(s, "c"), unconditional)
    s.request(
        "update-other-uid",
        "PUT",
        leases(s, "c"),
        {**unconditional, "metadata": {"name": "c", "uid": "0000-not-it"}},
    )
    s.request("update-missing", "PUT", leases(s, "nope"), {**lease("nope")})
    # a PUT of a Lease as read before its deletion: the UID is a precondition, never a create
    _, gone = s.request("create-gone", "POST", leases(s), lease("gone"))
    s.request("delete-gone", "DELETE", leases(s, "gone"))
    s.request("update-deleted", "PUT", leases(s, "gone"), {**gone, "spec": {"holderIdentity": "l"}})
    s.request("patch-missing", "PATCH", leases(s, "nope"), {"spec": {}}, content_type=MERGE)
    s.request(
        "delete-wrong-uid",
        "DELETE",
        leases(s, "c"),
        {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "0000-not-it"}},
    )
    s.request(
        "delete-wrong-rv",
        "DELETE",
        leases(s, "c"),
        {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "preconditions": {"resourceVersion": _rv(first)},
        },
    )
    s.request(
        "json-patch-test-fails",
        "PATCH",
        leases(s, "c"),
        [{"op": "test", "path": "/spec/holderIdentity", "value": "nobody"}],
        content_type=JSON_PATCH,
    )


def bad_bodies(s: Session) -> None:
    s.request("not-json", "POST", leases(s), raw_body=b"{not json")
    s.request("not-an-object", "POST", leases(s), ["a", "list"])
    s.request("wrong-kind", "POST", leases(s), {**lease("k"), "kind": "Pod"})
    s.request("wrong-api-version", "POST", leases(s), {**lease("k"), "apiVersion": "v1"})
    s.request(
        "namespace-mismatch",
        "POST",
        leases(s),
        {**lease("k"), "metadata": {"name": "k", "namespace": "elsewhere"}},
    )
    s.request("invalid-name", "POST", leases(s), lease("Not_Valid"))
    s.request("no-name", "POST", leases(s), {**lease(""), "metadata": {}})
    s.request("negative-duration", "POST", leases(s), lease("d", leaseDurationSeconds=-1))
    s.request("negative-transitions", "POST", leases(s), lease("t", leaseTransitions=-1))
    s.request("bad-micro-time", "POST", leases(s), lease("m", renewTime="yesterday"))
    s.request("string-duration", "POST", leases(s), lease("s", leaseDurationSeconds="15"))
    s.request("create", "POST", leases(s), lease("ok"))
    s.request("name-mismatch", "PUT", leases(s, "ok"), lease("other"))
    s.request("bad-patch-body", "PATCH", leases(s, "ok"), raw_body=b"{oops", content_type=MERGE)
    s.request(
        "unsupported-patch-type",
        "PATCH",
        leases(s, "ok"),
        {"spec": {}},
        content_type="application/xml",
    )
    s.request(
        "invalid-label",
        "PATCH",
        leases(s, "ok"),
        {"metadata": {"labels": {"bad key!": "v"}}},
        content_type=MERGE,
    )
    s.request("missing-namespace", "POST", f"{COORD}/namespaces/no-such-ns-x/leases", lease("n"))
    s.request("unknown-resource", "GET", f"{COORD}/namespaces/{s.ns}/leasez")
    s.request("method-not-allowed", "POST", leases(s, "ok"), lease("ok"))


def selectors(s: Session) -> None:
    for name, labels in (
        ("a1", {"app": "a", "tier": "web"}),
        ("a2", {"app": "a", "tier": "db"}),
        ("b1", {"app": "b"}),
        ("n1", {"other": "x"}),
    ):
        s.request(f"create-{name}", "POST", leases(s), lease(name, labels))
    for label, selector in (
        ("equals", "app=a"),
        ("double-equals", "app==b"),
        ("not-equals", "app!=a"),
        ("in", "tier in (web,db)"),
        ("notin", "tier notin (web)"),
        ("exists", "tier"),
        ("not-exists", "!tier"),
        ("and", "app=a,tier=db"),
        ("none", "app=zzz"),
    ):
        s.request(f"label-{label}", "GET", leases(s), query={"labelSelector": selector})
    s.request("label-malformed", "GET", leases(s), query={"labelSelector": "app in (a"})
    s.request("label-bad-value", "GET", leases(s), query={"labelSelector": "app=a b"})
    for label, selector in (
        ("name", "metadata.name=b1"),
        ("not-name", "metadata.name!=b1"),
        ("namespace", f"metadata.namespace={s.ns}"),
        ("both", "metadata.name=a1,metadata.namespace=other"),
    ):
        s.request(f"field-{label}", "GET", leases(s), query={"fieldSelector": selector})
    s.request(
        "field-unsupported", "GET", leases(s), query={"fieldSelector": "spec.holderIdentity=a"}
    )
    s.request("field-malformed", "GET", leases(s), query={"fieldSelector": "metadata.name"})
    s.request(
        "label-and-field",
        "GET",
        leases(s),
        query={"labelSelector": "app=a", "fieldSelector": "metadata.name!=a1"},
    )
    s.request("page-1", "GET", leases(s), query={"limit": "3"})
    s.request("delete-collection", "DELETE", leases(s), query={"labelSelector": "app=a"})
    s.request("after-delete-collection", "GET", leases(s))


def watches(s: Session) -> None:
    _, listed = s.request("list", "GET", leases(s))
    start = _rv(listed)
    _, created = s.request("create", "POST", leases(s), lease("w", {"app": "w"}))
    s.request(
        "patch", "PATCH", leases(s, "w"), {"spec": {"holderIdentity": "b"}}, content_type=MERGE
    )
    s.request(
        "relabel",
        "PATCH",
        leases(s, "w"),
        {"metadata": {"labels": {"app": "gone"}}},
        content_type=MERGE,
    )
    s.request("create-other", "POST", leases(s), lease("x", {"app": "w"}))
    s.request("delete", "DELETE", leases(s, "w"))
    s.watch("watch-from-rv", leases(s), {"resourceVersion": start, "timeoutSeconds": "1"})
    s.watch(
        "watch-label",
        leases(s),
        {"resourceVersion": start, "labelSelector": "app=w", "timeoutSeconds": "1"},
    )
    s.watch(
        "watch-field",
        leases(s),
        {"resourceVersion": start, "fieldSelector": "metadata.name=w", "timeoutSeconds": "1"},
    )
    s.watch(
        "watch-from-created", leases(s), {"resourceVersion": _rv(created), "timeoutSeconds": "1"}
    )
    s.watch("watch-current-state", leases(s), {"timeoutSeconds": "1"})
    s.watch("watch-bad-rv", leases(s), {"resourceVersion": "abc", "timeoutSeconds": "1"})


def gone(s: Session) -> None:
    """A watch from a resourceVersion older than the server's history: 410 Gone (Expired)."""
    for index in range(25):
        s.request(f"write-{index}", "POST", leases(s), lease(f"g{index}"))
    s.watch("watch-too-old", leases(s), {"resourceVersion": "1", "timeoutSeconds": "1"})


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


def pagination(s: Session) -> None:
    for index in range(5):
        s.request(f"create-{index}", "POST", leases(s), lease(f"p{index}"))
    _, first = s.request("page-1", "GET", leases(s), query={"limit": "2"})
    token = first["metadata"]["continue"]
    _, second = s.request("page-2", "GET", leases(s), query={"limit": "2", "continue": token})
    s.request(
        "page-3", "GET", leases(s), query={"limit": "2", "continue": second["metadata"]["continue"]}
    )
    s.request("bad-token", "GET", leases(s), query={"limit": "2", "continue": "not-a-token"})
    s.request("limit-zero", "GET", leases(s), query={"limit": "0"})


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


SEQUENCES: dict[str, Sequence] = {
    "lease_crud": lease_crud,
    "conflicts": conflicts,
    "bad_bodies": bad_bodies,
    "selectors": selectors,
    "watches": watches,
    "gone": gone,
    "tables": tables,
    "status_subresource": status_subresource,
    "dry_run": dry_run,
    "field_validation": field_validation,
    "namespaces_and_events": namespaces_and_events,
    "pagination": pagination,
    "definitions": definitions,
}
